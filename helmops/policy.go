package helmops

import (
	"strconv"
	"time"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/kube"
	release "helm.sh/helm/v4/pkg/release/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/autox-dev/autox/config"
)

// How a release policy (config.Policy, DESIGN §3) sets Helm's actions up.
// The zero Policy runs an operation as autox always has: the Manager's
// Timeout and MaxHistory, no wait for readiness, hooks on, and Helm's own
// handling of the chart's crds/ directory (created on install, left alone
// on upgrade), and client-side apply unless the release was last written
// server-side.

func (m *Manager) timeout(p config.Policy) time.Duration {
	if p.Timeout > 0 {
		return p.Timeout
	}
	return m.opts.Timeout
}

func (m *Manager) maxHistory(p config.Policy) int {
	if p.MaxHistory > 0 {
		return p.MaxHistory
	}
	return m.opts.MaxHistory
}

// waitStrategy is the kube.WaitStrategy of every action of p, never empty:
// Helm 4 fails an action with an empty one after it has written (waiter.go).
func waitStrategy(p config.Policy) kube.WaitStrategy {
	if p.Wait {
		return kube.StatusWatcherStrategy
	}
	return kube.HookOnlyStrategy
}

// Apply methods as Helm 4 records them on a release (ApplyMethod).
const applyServerSide = string(release.ApplyMethodServerSideApply)

// serverSide says whether an operation applies server-side: as p says when
// it says, else as recorded says — the apply method recorded on the
// release revision the operation starts from (an upgrade's newest revision,
// a rollback's target), "" (written by Helm 3) or "csa" meaning client-side.
// An install, which starts from none, passes "". This is Helm 4's "auto",
// decided here so that conflicts can be forced exactly when it applies
// server-side (see forceConflicts).
func serverSide(p config.Policy, recorded string) bool {
	if p.ServerSideApply != nil {
		return *p.ServerSideApply
	}
	return recorded == applyServerSide
}

// installWith sets an install (or its dry run) up for p. With
// CreateReplace, Install applies the CRDs itself first, so Helm skips them.
// Client-side apply unless p asks for server-side (Helm 4's install
// default is server-side: autox keeps Helm 3's).
func (m *Manager) installWith(in *action.Install, p config.Policy) {
	in.Timeout = m.timeout(p)
	in.WaitStrategy, in.WaitForJobs, in.DisableHooks = waitStrategy(p), p.WaitForJobs, p.DisableHooks
	in.SkipCRDs = p.CRDs == config.CRDsSkip || p.CRDs == config.CRDsCreateReplace
	in.ServerSideApply = serverSide(p, "")
	in.ForceConflicts = in.ServerSideApply
}

// upgradeWith sets an upgrade up for p, from a newest revision recorded
// with apply method recorded; Helm's upgrade never touches CRDs, Upgrade
// applies them itself first for Create and CreateReplace.
func (m *Manager) upgradeWith(up *action.Upgrade, p config.Policy, recorded string) {
	up.Timeout, up.MaxHistory = m.timeout(p), m.maxHistory(p)
	up.WaitStrategy, up.WaitForJobs, up.DisableHooks = waitStrategy(p), p.WaitForJobs, p.DisableHooks
	ssa := serverSide(p, recorded)
	up.ServerSideApply, up.ForceConflicts = strconv.FormatBool(ssa), ssa
}

// rollbackWith sets a rollback up for p, to a revision recorded with apply
// method recorded: it waits for what it restores as an upgrade would.
func (m *Manager) rollbackWith(rb *action.Rollback, p config.Policy, recorded string) {
	rb.Timeout, rb.MaxHistory = m.timeout(p), m.maxHistory(p)
	rb.WaitStrategy, rb.WaitForJobs, rb.DisableHooks = waitStrategy(p), p.WaitForJobs, p.DisableHooks
	ssa := serverSide(p, recorded)
	rb.ServerSideApply, rb.ForceConflicts = strconv.FormatBool(ssa), ssa
}

// uninstallWith sets an uninstall up for p; with waitDeleted it also waits,
// bounded by the timeout, until the deleted objects are gone (Helm 3's
// polling, as autox did on Helm 3), and deletion propagates in the
// background.
func (m *Manager) uninstallWith(un *action.Uninstall, p config.Policy, waitDeleted bool) {
	un.Timeout, un.DisableHooks = m.timeout(p), p.DisableHooks
	un.WaitStrategy = kube.HookOnlyStrategy
	if waitDeleted {
		un.WaitStrategy = kube.LegacyStrategy
		un.DeletionPropagation = string(metav1.DeletePropagationBackground)
	}
}

// crdsOnUpgrade says whether and how an upgrade applies the chart's CRDs.
func crdsOnUpgrade(p config.Policy) (apply, replace bool) {
	return p.CRDs == config.CRDsCreate || p.CRDs == config.CRDsCreateReplace, p.CRDs == config.CRDsCreateReplace
}
