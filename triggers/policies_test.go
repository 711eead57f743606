package triggers

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/helmops"
	"github.com/autox-dev/autox/internal/redact"
	"github.com/autox-dev/autox/internal/testenv"
)

// orderSpy watches the real Helm's installs and uninstalls: when each
// started and ended, in one sequence.
type orderSpy struct {
	Helm
	mu     sync.Mutex
	events []string
}

func (s *orderSpy) note(format string, args ...interface{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events = append(s.events, fmt.Sprintf(format, args...))
}

func (s *orderSpy) Install(ctx context.Context, d helmops.Target) (int, error) {
	s.note("start install %s", d.Name)
	rev, err := s.Helm.Install(ctx, d)
	s.note("end install %s: %v", d.Name, err)
	return rev, err
}

func (s *orderSpy) UninstallWith(ctx context.Context, namespace, name string, current int, hide *redact.Redactor, p config.Policy) error {
	s.note("start uninstall %s", name)
	err := s.Helm.UninstallWith(ctx, namespace, name, current, hide, p)
	s.note("end uninstall %s: %v", name, err)
	return err
}

// before reports whether event a happened before event b (both seen).
func (s *orderSpy) before(a, b string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	ia, ib := -1, -1
	for i, e := range s.events {
		if ia < 0 && strings.HasPrefix(e, a) {
			ia = i
		}
		if ib < 0 && strings.HasPrefix(e, b) {
			ib = i
		}
	}
	return ia >= 0 && ib >= 0 && ia < ib
}

func (s *orderSpy) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.events, "\n")
}

// TestDependsOnOrder: a chart that needs another's CRD is installed once
// that one is deployed, at the first attempt, and uninstalled before it.
// Release specs without dependsOn start together (up to 4 at once), so
// without the order both would run side by side.
func TestDependsOnOrder(t *testing.T) {
	h := newHarness(t)
	spy := &orderSpy{}
	h.spy = func(helm Helm) Helm { spy.Helm = helm; return spy }
	dropWidgetCRD(t) // cluster-wide: the tests using it run one after another
	h.Deployment("web", v("1"))
	h.start(h.config(webSpec(`      crds:
        chart: {path: {{.Charts}}/crd}
      widgets:
        chart: {path: {{.Charts}}/widget}
        dependsOn: [crds]
`)), time.Hour)
	h.WaitRelease("web-crds", "installed", deployedAt(1))
	h.WaitRelease("web-widgets", "installed", deployedAt(1))
	if !spy.before("end install web-crds: <nil>", "start install web-widgets") || strings.Contains(spy.String(), "end install web-widgets: cannot") {
		t.Fatalf("web-widgets was not installed after web-crds, at the first attempt:\n%s", spy)
	}

	h.Relabel("web", nil)
	h.WaitRelease("web-widgets", "uninstalled", gone)
	h.WaitRelease("web-crds", "uninstalled", gone)
	if !spy.before("end uninstall web-widgets: <nil>", "start uninstall web-crds") {
		t.Fatalf("web-crds was uninstalled before web-widgets was gone:\n%s", spy)
	}
}

// TestDependsOnOrderOnRemoval: dependsOn holds when the config forgets it
// too. Release specs removed from a spec in one edit, and a spec removed
// from the file, uninstall the chart using the CRD before the CRD chart:
// the order comes from the last config that had them. Without it both
// removals start together.
func TestDependsOnOrderOnRemoval(t *testing.T) {
	h := newHarness(t)
	spy := &orderSpy{}
	h.spy = func(helm Helm) Helm { spy.Helm = helm; return spy }
	dropWidgetCRD(t)
	h.Deployment("web", v("1"))
	both := `      crds:
        chart: {path: {{.Charts}}/crd}
      widgets:
        chart: {path: {{.Charts}}/widget}
        dependsOn: [crds]
      hello: {chart: {path: {{.Charts}}/hello}}
`
	h.start(h.config(webSpec(both)), time.Hour)
	installed := func() {
		h.WaitRelease("web-crds", "installed", deployedAt(1))
		h.WaitRelease("web-widgets", "installed", deployedAt(1))
		h.WaitRelease("web-hello", "installed", deployedAt(1))
	}
	removedInOrder := func(what string) {
		h.WaitRelease("web-widgets", "uninstalled", gone)
		h.WaitRelease("web-crds", "uninstalled", gone)
		if !spy.before("end uninstall web-widgets: <nil>", "start uninstall web-crds") {
			t.Errorf("%s: web-crds was uninstalled before web-widgets was gone:\n%s", what, spy)
		}
		spy.mu.Lock()
		spy.events = nil
		spy.mu.Unlock()
	}
	installed()

	h.ctrl.Reconfigure(context.Background(), h.config(webSpec(`      hello: {chart: {path: {{.Charts}}/hello}}
`)))
	removedInOrder("release specs removed in one edit")

	h.ctrl.Reconfigure(context.Background(), h.config(webSpec(both)))
	installed()
	h.ctrl.Reconfigure(context.Background(), h.config("namespaces: [{{.NS}}]\nspecs: {}\n"))
	removedInOrder("spec removed")
	h.WaitRelease("web-hello", "uninstalled", gone)
}

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// dropWidgetCRD deletes the test charts' Widget CRD now and after the test,
// so that the test starts without it.
func dropWidgetCRD(t *testing.T) {
	t.Helper()
	dyn, err := dynamic.NewForConfig(cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	// A CRD's delete returns while it is still terminating: wait until it
	// is gone, or the next test's chart finds it "already exists", skips
	// its create, and its custom resources then meet a 404 once it goes.
	drop := func() {
		err := dyn.Resource(crdResource).Delete(context.Background(), "widgets.autox.test", metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		testenv.Eventually(t, patience, "CRD widgets.autox.test gone", func() (bool, error) {
			_, err := dyn.Resource(crdResource).Get(context.Background(), "widgets.autox.test", metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return true, nil
			}
			return false, err
		})
	}
	drop()
	t.Cleanup(drop)
}

// TestSuspendedGauge: autox_suspended counts the suspended specs and the
// release specs they hold, and follows the config.
func TestSuspendedGauge(t *testing.T) {
	h := newHarness(t)
	h.start(h.config(`
namespaces: [{{.NS}}]
specs:
  a:
    suspend: true
    trigger: {group: apps, version: v1, resource: deployments, name: a, namespace: {{.NS}}}
    releaseSpecs:
      p: {chart: {path: {{.Charts}}/hello}}
      q: {chart: {path: {{.Charts}}/hello}}
  b:
    trigger: {group: apps, version: v1, resource: deployments, name: b, namespace: {{.NS}}}
    releaseSpecs:
      p: {chart: {path: {{.Charts}}/hello}, suspend: true}
      q: {chart: {path: {{.Charts}}/hello}}
`), time.Hour)
	gauge := func(level string) float64 { return testutil.ToFloat64(h.metrics.suspended.WithLabelValues(level)) }
	if gauge("spec") != 1 || gauge("release_spec") != 3 {
		t.Errorf("suspended: spec %v, release_spec %v; want 1 and 3", gauge("spec"), gauge("release_spec"))
	}
	h.ctrl.Reconfigure(context.Background(), h.config(webSpec(`      hello: {chart: {path: {{.Charts}}/hello}}
`)))
	if gauge("spec") != 0 || gauge("release_spec") != 0 {
		t.Errorf("after the config change: spec %v, release_spec %v; want 0", gauge("spec"), gauge("release_spec"))
	}
}
