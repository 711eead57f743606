package helmops

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.uber.org/goleak"
	"helm.sh/helm/v4/pkg/release/common"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/helmops/chartsource"
	"github.com/autox-dev/autox/internal/format"
	"github.com/autox-dev/autox/internal/testenv"
	"github.com/autox-dev/autox/triggers/plan"
)

var (
	cluster *testenv.Cluster
	testCA  *testenv.CA
)

func TestMain(m *testing.M) {
	// The chart servers' CA is trusted the way users mount one: SSL_CERT_FILE,
	// set before anything reads the system trust store.
	caDir, err := os.MkdirTemp("", "autox-ca-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer os.RemoveAll(caDir)
	if testCA, err = testenv.NewCA(caDir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Setenv("SSL_CERT_FILE", testCA.File)
	// The leak check runs after the control plane stopped, so that nothing
	// of a test (a Helm goroutine, a watch, a chart server) may outlive it.
	goleak.VerifyTestMain(withControlPlane{m}, goleak.Cleanup(func(code int) {
		os.RemoveAll(caDir)
		os.Exit(code)
	}))
}

// withControlPlane runs the tests between starting and stopping the control
// plane, as goleak.VerifyTestMain's m.
type withControlPlane struct{ m *testing.M }

func (w withControlPlane) Run() int { return testenv.RunMainAudited(w.m, &cluster) }

func chartsDir(t *testing.T) string {
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, "testdata")
}

// withClients gives opts the clientset and metadata client of its
// RESTConfig, as autox's command line passes them.
func withClients(t *testing.T, opts Options) Options {
	t.Helper()
	cs, err := kubernetes.NewForConfig(opts.RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	mc, err := metadata.NewForConfig(opts.RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	opts.Clientset, opts.Metadata = cs, mc
	return opts
}

func newManager(t *testing.T, driver string) *Manager {
	t.Helper()
	m, err := New(withClients(t, Options{RESTConfig: cluster.Config, StorageDriver: driver, Timeout: time.Minute, MaxHistory: 3, Log: zerolog.Nop()}))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func desired(t *testing.T, ns, name, chartPath string, values map[string]interface{}) Target {
	t.Helper()
	ch, err := chartsource.LocalCharts{}.Load(context.Background(), config.Chart{Path: chartPath}, chartsDir(t))
	if err != nil {
		t.Fatal(err)
	}
	return Target{Spec: "spec", ReleaseSpec: "rs", Name: name, Namespace: ns, Chart: ch, Values: values}
}

func TestLifecycle(t *testing.T) {
	for _, driver := range []string{DriverSecret, DriverConfigMap} {
		t.Run(driver, func(t *testing.T) {
			ctx := context.Background()
			m := newManager(t, driver)
			ns := cluster.Namespace(t)

			rev, err := m.Install(ctx, desired(t, ns, "r1", "charts/hello", map[string]interface{}{"greeting": "hi", "keep": "x"}))
			if err != nil || rev != 1 {
				t.Fatalf("Install = %d, %v", rev, err)
			}
			cm, err := cluster.Client.CoreV1().ConfigMaps(ns).Get(ctx, "r1", metav1.GetOptions{})
			if err != nil || cm.Data["greeting"] != "hi" {
				t.Fatalf("chart object: %v %v", cm.Data, err)
			}

			// r1 has a record now, r2 none; a release made without autox
			// (with the secret driver, as `helm install` does) counts too.
			cluster.InstallUnlabelled(t, ns, "mine", filepath.Join(chartsDir(t), "charts", "hello"))
			inUse, err := m.NamesInUse(ctx, ns, []string{"r1", "r2", "mine"})
			if err != nil || !inUse["r1"] || inUse["r2"] || inUse["mine"] != (driver == DriverSecret) {
				t.Errorf("NamesInUse = %v, %v; want r1, and mine with the secret driver", inUse, err)
			}
			rels, err := m.SpecReleases(ctx, []string{ns}, "spec")
			if err != nil || len(rels) != 1 {
				t.Fatalf("SpecReleases = %v, %v", rels, err)
			}
			r := rels[0]
			if r.Spec != "spec" || r.ReleaseSpec != "rs" || r.Status != common.StatusDeployed || r.ChartName != "hello" || r.ChartVersion != "0.1.0" || r.Revision != 1 {
				t.Errorf("release = %+v", r)
			}

			// ResetValues: a key dropped from the desired values is gone.
			rev, err = m.Upgrade(ctx, desired(t, ns, "r1", "charts/hello-v2", map[string]interface{}{"greeting": "hey"}))
			if err != nil || rev != 2 {
				t.Fatalf("Upgrade = %d, %v", rev, err)
			}
			r, err = m.Lookup(ctx, ns, "r1")
			if err != nil || r == nil {
				t.Fatalf("Lookup: %v %v", r, err)
			}
			if d, _ := plan.ValuesDiff(map[string]interface{}{"greeting": "hey"}, r.Values); d != "" || r.ChartVersion != "0.2.0" || !r.DeployedBefore || r.LastDeployedRevision != 2 {
				t.Errorf("after upgrade: diff %q, release %+v", d, r)
			}

			recs, err := func() ([]format.Record, error) {
				inv, err := m.NewInventory()
				if err != nil {
					return nil, err
				}
				return inv.Managed(ctx, []string{ns})
			}()
			if err != nil || len(recs) != 1 || recs[0].Revision != 2 || recs[0].Spec != "spec" || recs[0].Status != "deployed" {
				t.Fatalf("Managed = %+v, %v", recs, err)
			}

			if err := m.Rollback(ctx, ns, "r1", 0, 1, nil); err != nil {
				t.Fatal(err)
			}
			if r, _ = m.Lookup(ctx, ns, "r1"); r.Revision != 3 || r.ChartVersion != "0.1.0" {
				t.Errorf("after rollback: %+v", r)
			}

			if rev, err := m.Reinstall(ctx, desired(t, ns, "r1", "charts/hello", nil)); err != nil || rev != 1 {
				t.Fatalf("Reinstall = %d, %v", rev, err)
			}
			if err := m.Uninstall(ctx, ns, "r1", 0, nil); err != nil {
				t.Fatal(err)
			}
			if err := m.Uninstall(ctx, ns, "r1", 0, nil); err != nil {
				t.Fatalf("second uninstall must be a no-op: %v", err)
			}
			if r, err := m.Lookup(ctx, ns, "r1"); r != nil || err != nil {
				t.Fatalf("after uninstall: %+v %v", r, err)
			}
			if _, err := cluster.Client.CoreV1().ConfigMaps(ns).Get(ctx, "r1", metav1.GetOptions{}); testenv.IgnoreNotFound(err) != nil || err == nil {
				t.Fatalf("chart object must be gone: %v", err)
			}
		})
	}
}

func TestMaxHistory(t *testing.T) {
	ctx := context.Background()
	m := newManager(t, DriverSecret)
	ns := cluster.Namespace(t)
	if _, err := m.Install(ctx, desired(t, ns, "h", "charts/hello", nil)); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		if _, err := m.Upgrade(ctx, desired(t, ns, "h", "charts/hello", map[string]interface{}{"n": i})); err != nil {
			t.Fatal(err)
		}
	}
	list, err := cluster.Client.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{LabelSelector: "owner=helm,name=h"})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 3 {
		t.Errorf("release records = %d, want --max-history 3", len(list.Items))
	}
}

func TestInstallErrorsAreReturned(t *testing.T) {
	ctx := context.Background()
	m := newManager(t, DriverSecret)
	ns := cluster.Namespace(t)
	_, err := m.Install(ctx, desired(t, ns, "b", "charts/broken", nil))
	if err == nil {
		t.Fatal("installing a chart that does not render must fail")
	}
	if _, err := (chartsource.LocalCharts{}).Load(ctx, config.Chart{Path: "charts/missing"}, chartsDir(t)); err == nil {
		t.Fatal("loading a missing chart must fail")
	}
	if _, err := (chartsource.LocalCharts{}).Load(ctx, config.Chart{Repo: "https://x", Name: "x", Version: "1"}, chartsDir(t)); err == nil {
		t.Fatal("LocalCharts must refuse repository charts")
	}
}

// An install does not read the name's history again (its caller just saw
// the name free); a release someone installed meanwhile still makes it
// fail, and is left as it was.
func TestInstallOverATakenNameFails(t *testing.T) {
	ctx := context.Background()
	m := newManager(t, DriverSecret)
	ns := cluster.Namespace(t)
	installLabelled(t, m, ns, "taken", nil)
	before, err := cluster.Client.CoreV1().Secrets(ns).Get(ctx, "sh.helm.release.v1.taken.v1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Install(ctx, desired(t, ns, "taken", "charts/hello", map[string]interface{}{"greeting": "mine"})); err == nil {
		t.Fatal("installing over an existing release must fail")
	}
	after, err := cluster.Client.CoreV1().Secrets(ns).Get(ctx, "sh.helm.release.v1.taken.v1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if after.ResourceVersion != before.ResourceVersion {
		t.Error("the existing release record was written")
	}
	list, err := cluster.Client.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{LabelSelector: "owner=helm,name=taken"})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("records of the release: %d, %v", len(list.Items), err)
	}
	cm, err := cluster.Client.CoreV1().ConfigMaps(ns).Get(ctx, "taken", metav1.GetOptions{})
	if err != nil || cm.Data["greeting"] == "mine" {
		t.Fatalf("the existing release's object was changed: %v %v", cm.Data, err)
	}
}
