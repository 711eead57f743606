package helmops

import (
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/kube"

	"github.com/autox-dev/autox/config"
)

// TestEveryActionHasAWaitStrategy: Helm 4 fails an action whose wait
// strategy is empty only after it has written (a failed revision, a rollback
// left pending-rollback), so every action autox sets up, for every policy,
// has one; and conflicts are forced exactly when the action applies
// server-side (Helm refuses ForceConflicts with client-side apply), which
// installs do only when asked and upgrades and rollbacks when asked or when
// the revision they start from was applied server-side.
func TestEveryActionHasAWaitStrategy(t *testing.T) {
	yes, no := true, false
	m := &Manager{opts: Options{Timeout: time.Minute, MaxHistory: 3}}
	for _, p := range []config.Policy{
		{}, {Wait: true}, {Wait: true, WaitForJobs: true}, {DisableHooks: true}, {CRDs: config.CRDsCreateReplace},
		{ServerSideApply: &yes}, {ServerSideApply: &no}, {Wait: true, ServerSideApply: &yes},
	} {
		want := kube.HookOnlyStrategy
		if p.Wait {
			want = kube.StatusWatcherStrategy
		}
		asked := p.ServerSideApply != nil && *p.ServerSideApply
		in := action.NewInstall(&action.Configuration{})
		m.installWith(in, p)
		if in.WaitStrategy != want || in.ServerSideApply != asked || in.ForceConflicts != in.ServerSideApply {
			t.Errorf("install with %+v: strategy %q, server-side %v, force %v; want %q, %v, forced as server-side",
				p, in.WaitStrategy, in.ServerSideApply, in.ForceConflicts, want, asked)
		}
		for _, recorded := range []string{"", "csa", "ssa"} {
			ssa := asked || (p.ServerSideApply == nil && recorded == "ssa")
			up := action.NewUpgrade(&action.Configuration{})
			m.upgradeWith(up, p, recorded)
			if up.WaitStrategy != want || up.ServerSideApply != boolString(ssa) || up.ForceConflicts != ssa {
				t.Errorf("upgrade with %+v from a %q revision: strategy %q, server-side %q, force %v; want %q, %v, %v",
					p, recorded, up.WaitStrategy, up.ServerSideApply, up.ForceConflicts, want, ssa, ssa)
			}
			rb := action.NewRollback(&action.Configuration{})
			m.rollbackWith(rb, p, recorded)
			if rb.WaitStrategy != want || rb.ServerSideApply != boolString(ssa) || rb.ForceConflicts != ssa {
				t.Errorf("rollback with %+v to a %q revision: strategy %q, server-side %q, force %v; want %q, %v, %v",
					p, recorded, rb.WaitStrategy, rb.ServerSideApply, rb.ForceConflicts, want, ssa, ssa)
			}
		}
		for _, waitDeleted := range []bool{false, true} {
			un := action.NewUninstall(&action.Configuration{})
			m.uninstallWith(un, p, waitDeleted)
			if un.WaitStrategy == "" || (un.WaitStrategy == kube.LegacyStrategy) != waitDeleted {
				t.Errorf("uninstall with %+v, waiting for deletions %v: strategy %q", p, waitDeleted, un.WaitStrategy)
			}
		}
	}
}

func boolString(b bool) string {
	if b {
		return "true"
	}
	return "false"
}
