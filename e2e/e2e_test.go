// Package e2e runs the built autox binary as a process against the real
// kube-apiserver, as a user would, and checks the releases it leaves.
package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"helm.sh/helm/v4/pkg/release/common"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/autox-dev/autox/internal/format"
	"github.com/autox-dev/autox/internal/releasetest"
	"github.com/autox-dev/autox/internal/testenv"
)

var (
	cluster *testenv.Cluster
	autox   string
)

func TestMain(m *testing.M) {
	os.Exit(func() int {
		dir, err := os.MkdirTemp("", "autox-e2e-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		if autox, err = testenv.BuildAutox(dir, "e2e", testenv.RaceDetector); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return testenv.RunMainAuditedNoLeaks(m, &cluster,
			// The OCI registry (distribution/v3) starts its notification
			// broadcaster in NewRegistry and never closes it: Shutdown
			// stops the HTTP server only, and the broadcaster is unexported.
			goleak.IgnoreTopFunction("github.com/docker/go-events.(*Broadcaster).run"))
	}())
}

const patience = 60 * time.Second // a bound for a broken build, not a performance goal

// env is one end-to-end test's scene: its namespace, directory and charts,
// and the autox binary run in it.
type env struct {
	*releasetest.Scene
	t *testing.T
}

func newEnv(t *testing.T) *env { return newEnvOn(t, cluster) }

// newEnvOn is newEnv on control plane c: a test that restarts the API
// server has one of its own.
func newEnvOn(t *testing.T, c *testenv.Cluster) *env {
	return &env{Scene: releasetest.NewScene(t, c, patience), t: t}
}

// run starts autox as users run it, with leader election on (see runArgs).
func (e *env) run(config string, extra ...string) *testenv.Process {
	return testenv.StartProcess(e.t, autox, e.runArgs(config, extra...)...)
}

// runArgs are the arguments of `autox run` in these tests: a short resync, an
// http port of its own, debug logs, and leader election on, as it is by
// default, with the Lease in the test's namespace. The timings are shorter
// than the defaults (15s, 10s, 2s) so that a process started after a kill -9
// waits 4s, not 15s, for the dead one's Lease to expire. extra flags win.
func (e *env) runArgs(config string, extra ...string) []string {
	args := append(runArgsOn(e.Cluster.Kubeconfig, config), "--leader-election-namespace", e.NS, "--leader-election-lease-duration", "4s",
		"--leader-election-renew-deadline", "3s", "--leader-election-retry-period", "500ms")
	return append(args, extra...)
}

// baseRunArgs leave every leader election flag at its default.
func baseRunArgs(config string) []string { return runArgsOn(cluster.Kubeconfig, config) }

// runArgsOn are baseRunArgs with the API server of kubeconfig.
func runArgsOn(kubeconfig, config string) []string {
	return []string{"run", "--config", config, "--kubeconfig", kubeconfig, "--resync", "2s",
		"--http-addr", "127.0.0.1:0", "--log-level", "debug"}
}

const (
	passLine    = `"message":"pass complete"`
	leadingLine = "leading: this process writes"
)

// waitLog waits until p has logged text and returns where it ends in p's
// output, to count what p logs after it.
func (e *env) waitLog(p *testenv.Process, text string) int {
	e.t.Helper()
	var end int
	testenv.Eventually(e.t, patience, "log line "+text, func() (bool, error) {
		i := strings.Index(p.Output(), text)
		end = i + len(text)
		return i >= 0, nil
	})
	return end
}

// passesSince counts the passes p completed after offset in its output.
func passesSince(p *testenv.Process, offset int) int {
	return strings.Count(p.Output()[offset:], passLine)
}

// waitPasses waits until p has completed n passes after offset in its output.
func (e *env) waitPasses(p *testenv.Process, offset, n int) {
	e.t.Helper()
	testenv.Eventually(e.t, patience, fmt.Sprintf("%d passes", n), func() (bool, error) { return passesSince(p, offset) >= n, nil })
}

// leaseHolder returns who holds the Lease autox in the test's namespace ("" for nobody).
func (e *env) leaseHolder() string {
	e.t.Helper()
	lease, err := cluster.Client.CoordinationV1().Leases(e.NS).Get(context.Background(), "autox", metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	if h := lease.Spec.HolderIdentity; h != nil {
		return *h
	}
	return ""
}

var (
	deployedAt = releasetest.DeployedAt
	gone       = releasetest.Gone
	version    = releasetest.Version
	webSpec    = releasetest.WebSpec
)

const webConfig = `
namespaces: [{{.NS}}]
specs:
  web:
    trigger: {group: apps, version: v1, resource: deployments, name: web, namespace: {{.NS}}}
    releaseSpecs:
      hello:
        chart: {path: {{.Charts}}/hello}
        values: {greeting: hi}
      job:
        chart: {path: {{.Charts}}/job}
        onChange: reinstall
  api:
    trigger: {version: v1, resource: configmaps, name: api, namespace: {{.NS}}}
    releaseSpecs:
      hello:
        chart: {path: {{.Charts}}/hello}
`

func TestBinaryLifecycle(t *testing.T) {
	e := newEnv(t)
	e.Deployment("web", version("1.0.0"))
	cfg := e.WriteConfig(webConfig)
	// As the manifests deploy it: every leader election flag at its default,
	// the Lease's namespace from POD_NAMESPACE.
	p := testenv.StartProcessEnv(t, []string{"POD_NAMESPACE=" + e.NS}, autox, baseRunArgs(cfg)...)

	hello := e.WaitRelease("web-hello", "installed", deployedAt(1))
	if e.leaseHolder() == "" {
		t.Error("autox wrote without holding the Lease autox in POD_NAMESPACE")
	}
	if hello.Values["greeting"] != "hi" {
		t.Errorf("declared values missing: greeting = %v", hello.Values["greeting"])
	}
	trig, _ := hello.Values["autox"].(map[string]interface{})["trigger"].(map[string]interface{})
	if trig["name"] != "web" || trig["resource"] != "deployments" || trig["labels"].(map[string]interface{})["app.kubernetes.io/version"] != "1.0.0" {
		t.Errorf("autox.trigger values = %v", trig)
	}
	job := e.WaitRelease("web-job", "installed", deployedAt(1))

	e.Relabel("web", version("2.0.0"))
	e.WaitRelease("web-hello", "upgraded", deployedAt(2))
	e.WaitRelease("web-job", "reinstalled", func(r *format.Release) bool {
		return r != nil && r.Revision == 1 && r.Status == common.StatusDeployed && r.FirstDeployed.After(job.FirstDeployed)
	})

	e.Relabel("web", nil)
	e.WaitRelease("web-hello", "uninstalled after the label went", gone)
	e.WaitRelease("web-job", "uninstalled after the label went", gone)

	e.Relabel("web", version("3.0.0"))
	e.WaitRelease("web-hello", "installed again", deployedAt(1))
	if err := cluster.Client.AppsV1().Deployments(e.NS).Delete(context.Background(), "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.WaitRelease("web-hello", "uninstalled after the delete", gone)
	e.WaitRelease("web-job", "uninstalled after the delete", gone)

	if code := p.Stop(patience); code != 0 {
		t.Fatalf("SIGTERM: exit code %d, want 0", code)
	}
	if h := e.leaseHolder(); h != "" {
		t.Errorf("the Lease is still held by %q after a clean stop", h)
	}
	if e.Release("api-hello") != nil {
		t.Error("a spec whose trigger never existed got a release")
	}
}

func TestBinaryRestarts(t *testing.T) {
	e := newEnv(t)
	e.Deployment("web", version("1.0.0"))
	cfg := e.WriteConfig(webConfig)
	p := e.run(cfg)
	e.WaitRelease("web-hello", "installed", deployedAt(1))
	first := e.WaitRelease("web-job", "installed", deployedAt(1))
	p.Stop(patience)

	for i := 0; i < 5; i++ {
		p := e.run(cfg)
		// The start pass and one periodic pass. (The stopped process
		// released its Lease, so this one leads at once.)
		e.waitPasses(p, 0, 2)
		if code := p.Stop(patience); code != 0 {
			t.Fatalf("restart %d: exit code %d", i, code)
		}
		if strings.Contains(p.Output(), `"message":"release `) {
			t.Fatalf("restart %d made a Helm write:\n%s", i, p.Output())
		}
	}
	if r := e.Release("web-hello"); r.Revision != 1 {
		t.Errorf("web-hello revision = %d after 5 restarts", r.Revision)
	}
	if r := e.Release("web-job"); r.Revision != 1 || !r.FirstDeployed.Equal(first.FirstDeployed) {
		t.Errorf("web-job disturbed by restarts: %+v", r)
	}

	// Restart with the web spec removed: start-up cleanup uninstalls it.
	cfg = e.WriteConfig(strings.SplitN(webConfig, "  web:", 2)[0] + "  api:" + strings.SplitN(webConfig, "  api:", 2)[1])
	p = e.run(cfg)
	e.WaitRelease("web-hello", "uninstalled at start", gone)
	e.WaitRelease("web-job", "uninstalled at start", gone)
	p.Stop(patience)
}

func TestBinaryLeavesForeignReleaseAlone(t *testing.T) {
	e := newEnv(t)
	// A release of the wanted name, installed without autox's labels (as
	// `helm install` would). autox must report it and never touch it.
	cluster.InstallUnlabelled(t, e.NS, "web-hello", filepath.Join(e.Charts, "hello"))
	e.Deployment("web", version("1.0.0"))
	p := e.run(e.WriteConfig(webConfig))
	e.WaitRelease("web-job", "installed", deployedAt(1))
	// Two passes after the first report: at least one whole pass, which
	// reconciles the spec in full (a conflict is never in sync), came after.
	e.waitPasses(p, e.waitLog(p, `"action":"conflict"`), 2)
	if r := e.Release("web-hello"); r.Managed() || r.Revision != 1 || r.Values["greeting"] != "mine" {
		t.Errorf("foreign release touched: %+v", r)
	}
	p.Stop(patience)
}

func TestValidate(t *testing.T) {
	e := newEnv(t)
	good := e.WriteConfig(webConfig)
	p := testenv.StartProcess(t, autox, "validate", "--config", good)
	if code, err := p.Wait(patience); err != nil || code != 0 {
		t.Fatalf("validate good config: code %d, %v\n%s", code, err, p.Output())
	}

	bad := e.WriteConfig(webConfig + `  web2:
    trigger: {group: apps, version: v1beta2, resource: deployments, name: web, namespace: {{.NS}}}
    releaseSpecs:
      x: {chart: {path: {{.Charts}}/hello}, onChange: sometimes}
`)
	p = testenv.StartProcess(t, autox, "validate", "--config", bad)
	code, err := p.Wait(patience)
	if err != nil || code != 1 {
		t.Fatalf("validate bad config: code %d, %v", code, err)
	}
	out := p.Output()
	for _, want := range []string{
		`specs.web2.trigger: the same trigger object`, `specs "web" and "web2"`,
		`specs.web2.releaseSpecs.x.onChange: must be "upgrade" or "reinstall"`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}

	// run refuses an invalid config at start with the same lines.
	p = e.run(bad)
	if code, err := p.Wait(patience); err != nil || code != 1 || !strings.Contains(p.Output(), `specs "web" and "web2"`) {
		t.Fatalf("run with a bad config: code %d, %v\n%s", code, err, p.Output())
	}
}
