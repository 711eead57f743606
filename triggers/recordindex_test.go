package triggers

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/autox-dev/autox/internal/format"
	"github.com/autox-dev/autox/internal/testenv"
)

var oneRelease = webSpec(`      hello:
        chart: {path: {{.Charts}}/hello}
`)

// TestStaleRecordIndexNeverUninstallsATakenRelease: while the record index
// has stopped seeing changes (its watch delivers nothing), someone takes the
// release over with `helm upgrade` and the trigger loses its label. The
// index still shows autox's revision; the reconcile finds that record
// written since and reads the release live (not ours any more), and an
// uninstall decided on the old revision would fail on Helm's read of the
// history anyway: the release taken over stays.
func TestStaleRecordIndexNeverUninstallsATakenRelease(t *testing.T) {
	h := newHarness(t)
	h.Deployment("web", v("1.0.0"))
	h.start(h.config(oneRelease), time.Hour)
	h.WaitRelease("web-hello", "installed", deployedAt(1))
	h.halt()

	h.faults = &testenv.MetadataFaults{Frozen: &atomic.Bool{}}
	h.faults.Frozen.Store(true)
	h.start(h.config(oneRelease), time.Hour)
	h.waitPass()
	cluster.TakeOver(t, h.NS, "web-hello", h.Charts+"/hello")
	h.Relabel("web", map[string]string{"team": "x"}) // the trigger label gone
	h.waitFreshReconcile("web")
	r := h.Release("web-hello")
	if r == nil || r.Revision != 2 || r.Managed() {
		t.Fatalf("the release taken over = %+v; want revision 2 without autox's labels, left alone", r)
	}
}

// TestUnsyncedRecordIndexIsReadLive: a record index that cannot list never
// syncs; autox starts anyway (after a bounded wait) and reads records live,
// never taking the empty index for "no releases": start-up cleanup still
// uninstalls the releases of a spec removed from the config, and a release
// in sync stays at its revision.
func TestUnsyncedRecordIndexIsReadLive(t *testing.T) {
	h := newHarness(t)
	h.Deployment("web", v("1.0.0"))
	h.Deployment("old", v("1.0.0"))
	both := oneRelease + `  old:
    trigger: {group: apps, version: v1, resource: deployments, name: old, namespace: {{.NS}}}
    releaseSpecs:
      hello:
        chart: {path: {{.Charts}}/hello}
`
	h.start(h.config(both), time.Hour)
	h.WaitRelease("web-hello", "installed", deployedAt(1))
	h.WaitRelease("old-hello", "installed", deployedAt(1))
	h.halt()

	h.faults = &testenv.MetadataFaults{ListFails: &atomic.Bool{}}
	h.faults.ListFails.Store(true)
	h.start(h.config(oneRelease), time.Hour)
	h.WaitRelease("old-hello", "uninstalled at start-up (removed spec)", gone)
	h.waitPass()
	if r := h.Release("web-hello"); r == nil || r.Revision != 1 {
		t.Errorf("web-hello = %+v; want revision 1, untouched", r)
	}
	list, err := cluster.Client.CoreV1().Secrets(h.NS).List(context.Background(), metav1.ListOptions{LabelSelector: format.LabelSpec + "=web"})
	if err != nil || len(list.Items) != 1 {
		t.Errorf("records of web: %d, %v; want the one", len(list.Items), err)
	}
}
