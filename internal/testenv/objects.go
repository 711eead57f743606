package testenv

import (
	"context"
	"fmt"
	"html/template"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"
	"helm.sh/helm/v4/pkg/action"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/kube"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	"github.com/autox-dev/autox/internal/format"
)

// RunMain is a test package's TestMain body: it starts a control plane into
// *cluster, runs the tests and stops it. Use: os.Exit(testenv.RunMain(m, &cluster)).
func RunMain(m *testing.M, cluster **Cluster) int { return runMain(m, cluster, false) }

// RunMainAudited is RunMain with a control plane that keeps an audit log of
// writes (Cluster.Writes).
func RunMainAudited(m *testing.M, cluster **Cluster) int { return runMain(m, cluster, true) }

func runMain(m *testing.M, cluster **Cluster, audited bool) int {
	c, err := start(audited)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	*cluster = c
	release := stopOnSignal(c)
	code := m.Run()
	release()
	if err := c.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stop control plane:", err)
	}
	return code
}

// RunMainNoLeaks is RunMain that also fails the package when its tests
// leave a goroutine running (a controller not stopped, a server not closed).
// It looks once the tests passed and the control plane is stopped, so that
// connections to it are gone too; ignore names the goroutines of libraries
// that cannot be stopped.
func RunMainNoLeaks(m *testing.M, cluster **Cluster, ignore ...goleak.Option) int {
	return noLeaks(RunMain(m, cluster), ignore)
}

// RunMainAuditedNoLeaks is RunMainNoLeaks with a control plane that keeps
// an audit log of writes (Cluster.Writes).
func RunMainAuditedNoLeaks(m *testing.M, cluster **Cluster, ignore ...goleak.Option) int {
	return noLeaks(RunMainAudited(m, cluster), ignore)
}

func noLeaks(code int, ignore []goleak.Option) int {
	if code != 0 {
		return code
	}
	if err := goleak.Find(ignore...); err != nil {
		fmt.Fprintln(os.Stderr, "goroutines outlived the tests:", err)
		return 1
	}
	return 0
}

// DeploymentObject is a minimal Deployment to use as a trigger; the test
// control plane runs no controllers, so it never gets pods.
func DeploymentObject(namespace, name string, labels map[string]string) *appsv1.Deployment {
	// The pod selector's value is a label value (63 characters at most);
	// a longer object name is cut, which is unique enough for a test.
	app := name
	if len(app) > 63 {
		app = strings.TrimRight(app[:63], "-.")
	}
	sel := map[string]string{"app": app}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: sel},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: sel},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox:1.36"}}},
			},
		},
	}
}

// CreateDeployment creates a trigger Deployment.
func (c *Cluster) CreateDeployment(t testing.TB, namespace, name string, labels map[string]string) {
	t.Helper()
	if _, err := c.Client.AppsV1().Deployments(namespace).Create(context.Background(), DeploymentObject(namespace, name, labels), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// Relabel replaces a Deployment's labels.
func (c *Cluster) Relabel(t testing.TB, namespace, name string, labels map[string]string) {
	t.Helper()
	ctx := context.Background()
	d, err := c.Client.AppsV1().Deployments(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d.Labels = labels
	if _, err := c.Client.AppsV1().Deployments(namespace).Update(ctx, d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// InstallUnlabelled installs a chart directory as a release the way a person
// with Helm 4's `helm install` would: without autox's labels, values
// {greeting: mine}, applied server-side and waiting for hooks only (the
// CLI's defaults).
func (c *Cluster) InstallUnlabelled(t testing.TB, namespace, name, chartDir string) {
	t.Helper()
	in := action.NewInstall(c.helmConfig(t, namespace))
	in.ReleaseName, in.Namespace = name, namespace
	in.WaitStrategy = kube.HookOnlyStrategy
	if _, err := in.Run(loadChart(t, chartDir), map[string]interface{}{"greeting": "mine"}); err != nil {
		t.Fatal(err)
	}
}

// TakeOver upgrades a release the way a person taking it over with Helm 4's
// `helm upgrade --labels` would: a new revision without autox's labels,
// values {greeting: mine}, applied as the release was last (the CLI's
// "auto").
func (c *Cluster) TakeOver(t testing.TB, namespace, name, chartDir string) {
	t.Helper()
	up := action.NewUpgrade(c.helmConfig(t, namespace))
	up.Namespace, up.ResetValues = namespace, true
	up.WaitStrategy = kube.HookOnlyStrategy
	up.Labels = map[string]string{format.LabelSpec: "null", format.LabelReleaseSpec: "null", format.LabelInstance: "null",
		format.LabelObject: "null", format.LabelObjectNamespace: "null", format.LabelDigest: "null", format.LabelRevision: "null"}
	if _, err := up.Run(name, loadChart(t, chartDir), map[string]interface{}{"greeting": "mine"}); err != nil {
		t.Fatal(err)
	}
}

// UpgradeReusingValues upgrades a release the way a person running Helm 4's
// `helm upgrade --reuse-values` would: a new revision of the chart with the
// release's values, keeping its labels (Helm carries the last revision's
// over), so autox's revision label names the older revision.
func (c *Cluster) UpgradeReusingValues(t testing.TB, namespace, name, chartDir string) {
	t.Helper()
	up := action.NewUpgrade(c.helmConfig(t, namespace))
	up.Namespace, up.ReuseValues = namespace, true
	up.WaitStrategy = kube.HookOnlyStrategy
	if _, err := up.Run(name, loadChart(t, chartDir), nil); err != nil {
		t.Fatal(err)
	}
}

func (c *Cluster) helmConfig(t testing.TB, namespace string) *action.Configuration {
	t.Helper()
	cfg := action.NewConfiguration(action.ConfigurationSetLogger(slog.DiscardHandler))
	flags := genericclioptions.NewConfigFlags(false)
	kc, ns := c.Kubeconfig, namespace
	flags.KubeConfig, flags.Namespace = &kc, &ns
	if err := cfg.Init(flags, namespace, "secret"); err != nil {
		t.Fatal(err)
	}
	return cfg
}

func loadChart(t testing.TB, dir string) *chart.Chart {
	t.Helper()
	ch, err := loader.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

// RenderConfig fills a test config template: {{.NS}} is the test's namespace,
// {{.Charts}} the testdata/charts directory.
func RenderConfig(t testing.TB, text, namespace, charts string) string {
	t.Helper()
	var b strings.Builder
	if err := template.Must(template.New("config").Parse(text)).Execute(&b, map[string]string{"NS": namespace, "Charts": charts}); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// WriteConfig renders a config template into dir/name and returns its path.
func WriteConfig(t testing.TB, dir, name, text, namespace, charts string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(RenderConfig(t, text, namespace, charts)), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
