package triggers

import (
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/release/common"
	"helm.sh/helm/v4/pkg/storage/driver"

	"github.com/autox-dev/autox/internal/format"

	"github.com/autox-dev/autox/internal/releasetest"
)

var threeReleases = webSpec(`      upgrading: {chart: {path: {{.Charts}}/hello}}
      installing: {chart: {path: {{.Charts}}/hello}}
      young: {chart: {path: {{.Charts}}/hello}}
`)

// TestUnlockStalePendingReleases leaves releases pending as a killed process
// would, then checks autox recovers the stale ones and leaves the young one.
// A release's age is the time since its record was last written, as the API
// server recorded it, so ages cannot be faked: the records are written a few
// seconds apart and the reconciler's clock is frozen between the two
// moments, one stale age after the first writes.
func TestUnlockStalePendingReleases(t *testing.T) {
	h := newHarness(t)
	h.Deployment("web", v("1.0.0"))
	cfg := h.config(threeReleases)
	h.start(cfg, time.Hour)
	for _, r := range []string{"web-upgrading", "web-installing", "web-young"} {
		h.WaitRelease(r, "installed", deployedAt(1))
	}
	h.halt()

	store := driver.NewSecrets(cluster.Client.CoreV1().Secrets(h.NS))
	// A killed upgrade: revision 2 pending-upgrade, revision 1 still deployed.
	// LastDeployed is long ago: it must not count.
	longAgo := time.Now().Add(-24 * time.Hour)
	pendingRevision := func(name string) {
		rel := releasetest.Record(t, store, "sh.helm.release.v1."+name+".v1")
		rel.Version = 2
		rel.Info.Status = common.StatusPendingUpgrade
		rel.Info.LastDeployed = longAgo
		if err := store.Create("sh.helm.release.v1."+name+".v2", rel); err != nil {
			t.Fatal(err)
		}
	}
	oldWrites := time.Now()
	pendingRevision("web-upgrading")
	// A killed install: the only revision pending-install.
	inst := releasetest.Record(t, store, "sh.helm.release.v1.web-installing.v1")
	firstInstall := inst.Info.FirstDeployed
	inst.Info.Status = common.StatusPendingInstall
	inst.Info.LastDeployed = longAgo
	if err := store.Update("sh.helm.release.v1.web-installing.v1", inst); err != nil {
		t.Fatal(err)
	}
	// The API server records write times in whole seconds: 3s apart keeps
	// the two groups of records on either side of the frozen clock.
	time.Sleep(3 * time.Second)
	pendingRevision("web-young")

	const staleAfter = time.Minute + 30*time.Second // the harness's
	frozen := oldWrites.Add(staleAfter + 1500*time.Millisecond)
	h.now = func() time.Time { return frozen }
	h.start(cfg, 300*time.Millisecond)
	h.WaitRelease("web-upgrading", "rolled back to its deployed revision", deployedAt(3))
	h.WaitRelease("web-installing", "reinstalled", func(r *format.Release) bool {
		return r != nil && r.Status == common.StatusDeployed && r.Revision == 1 && r.FirstDeployed.After(firstInstall)
	})
	// Several passes later (each reconciles the spec in full: a pending
	// release is never proven in sync) the young release is still pending.
	h.waitReconciles("web", resultSuccess, h.reconciles("web", resultSuccess)+3)
	if r := h.Release("web-young"); r.Status != common.StatusPendingUpgrade || r.Revision != 2 {
		t.Errorf("a young pending release was touched: %+v", r)
	}
	if r := h.Release("web-upgrading"); r.Revision != 3 {
		t.Errorf("after unlock and sync, revision %d, want 3 (rollback only: values were in sync)", r.Revision)
	}
}
