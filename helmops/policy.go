package helmops

import (
	"time"

	"helm.sh/helm/v3/pkg/action"

	"github.com/autox-dev/autox/config"
)

// How a release policy (config.Policy, DESIGN §3) sets Helm's actions up.
// The zero Policy runs an operation as autox always has: the Manager's
// Timeout and MaxHistory, no wait for readiness, hooks on, and Helm's own
// handling of the chart's crds/ directory (created on install, left alone
// on upgrade).

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

// installWith sets an install (or its dry run) up for p. With
// CreateReplace, Install applies the CRDs itself first, so Helm skips them.
func (m *Manager) installWith(in *action.Install, p config.Policy) {
	in.Timeout = m.timeout(p)
	in.Wait, in.WaitForJobs, in.DisableHooks = p.Wait, p.WaitForJobs, p.DisableHooks
	in.SkipCRDs = p.CRDs == config.CRDsSkip || p.CRDs == config.CRDsCreateReplace
}

// upgradeWith sets an upgrade up for p; Helm's upgrade never touches CRDs,
// Upgrade applies them itself first for Create and CreateReplace.
func (m *Manager) upgradeWith(up *action.Upgrade, p config.Policy) {
	up.Timeout, up.MaxHistory = m.timeout(p), m.maxHistory(p)
	up.Wait, up.WaitForJobs, up.DisableHooks = p.Wait, p.WaitForJobs, p.DisableHooks
}

// rollbackWith sets a rollback up for p: it waits for what it restores as
// an upgrade would.
func (m *Manager) rollbackWith(rb *action.Rollback, p config.Policy) {
	rb.Timeout, rb.MaxHistory = m.timeout(p), m.maxHistory(p)
	rb.Wait, rb.WaitForJobs, rb.DisableHooks = p.Wait, p.WaitForJobs, p.DisableHooks
}

// crdsOnUpgrade says whether and how an upgrade applies the chart's CRDs.
func crdsOnUpgrade(p config.Policy) (apply, replace bool) {
	return p.CRDs == config.CRDsCreate || p.CRDs == config.CRDsCreateReplace, p.CRDs == config.CRDsCreateReplace
}
