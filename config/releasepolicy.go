package config

import (
	"time"
)

// Release policies (DESIGN §2): per release spec, how autox runs its Helm
// operations, and per spec or release spec whether it runs them at all.
// What Helm users set with `--wait`, `--timeout`, `--no-hooks`,
// `--skip-crds`, `--history-max` or in a Flux HelmRelease. Each default is
// what autox did before the policy existed, and none of them is part of the
// release format: an autox that knows them computes the same digest and
// injected values, so a config that sets none behaves exactly as before.

// Values of ReleaseSpec.CRDs: what happens to the CustomResourceDefinitions
// of a chart's crds/ directory. "" is Helm's own behaviour: created on
// install (an existing one is left as it is), left alone on upgrade.
const (
	// CRDsSkip: never created nor changed.
	CRDsSkip = "Skip"
	// CRDsCreate: created on install and on upgrade when missing; an
	// existing one is left as it is.
	CRDsCreate = "Create"
	// CRDsCreateReplace: created when missing, replaced by the chart's when
	// present, on install and upgrade. Never deleted.
	CRDsCreateReplace = "CreateReplace"
)

// Values of Remediation.OnFailure: what happens once a release spec's
// retries are used up.
const (
	// OnFailureKeep leaves the failed release as it is and reports it.
	OnFailureKeep = "keep"
	// OnFailureRollback rolls a failed upgrade back to the last deployed
	// revision.
	OnFailureRollback = "rollback"
	// OnFailureUninstall uninstalls a failed install that was never
	// deployed; a release that was once deployed is kept instead.
	OnFailureUninstall = "uninstall"
)

// Remediation bounds the attempts autox makes for a release spec whose
// Helm operations fail.
type Remediation struct {
	// Retries are the attempts after the first failed one; nil means no
	// bound (each failure is retried with backoff). 0 gives up after the
	// first failure.
	Retries *int `json:"retries,omitempty"`
	// OnFailure is what happens once the retries are used up; defaulted to
	// OnFailureKeep when Retries is set.
	OnFailure string `json:"onFailure,omitempty"`
}

// Policy is how autox runs the Helm operations of one release (DESIGN §2,
// §3): its release spec's policies with the defaults resolved. It is the
// one shape of a release policy: the plan decides with it (a pending
// release's unlock age, the bound of its attempts), puts it on each step,
// and helmops sets Helm's actions up from it; PolicyDefaults.Of makes one
// from a release spec's fields, once per decision.
type Policy struct {
	// Timeout bounds each operation: Helm's waits and hooks, a reinstall's
	// wait for deleted objects. A pending release is unlocked once its
	// record is Timeout + StaleGrace old.
	Timeout time.Duration
	// Wait makes Helm wait until the release's objects are ready (and
	// WaitForJobs until its Jobs completed) before the release counts as
	// deployed; failing that within Timeout, the revision is failed.
	Wait, WaitForJobs bool
	// DisableHooks skips the chart's hooks.
	DisableHooks bool
	// CRDs is CRDsSkip, CRDsCreate, CRDsCreateReplace or "" (Helm's own way).
	CRDs string
	// MaxHistory bounds the revisions kept on upgrade and rollback.
	MaxHistory int
	// Remediation bounds the failed attempts (nil: retried for ever) and
	// says what happens once they are used up.
	Remediation *Remediation
	// ServerSideApply, when set, says whether installs, upgrades and
	// rollbacks apply server-side (conflicts then forced: the config is the
	// desired state) or client-side; nil: installs client-side, upgrades and
	// rollbacks as the release's record says (helmops).
	ServerSideApply *bool
	// Drift is the release's drift policy; nil: its objects are not checked.
	Drift *Drift

	// written is the release spec the policy was resolved from, nil for a
	// release no release spec wants (the defaults alone).
	written *ReleaseSpec
}

// StaleGrace is what a pending release's age must exceed beyond its
// operations' timeout before it counts as left by a dead process.
const StaleGrace = 30 * time.Second

// StaleAfter is how old a pending release of this policy must be before
// it counts as left by a dead process: Timeout + StaleGrace.
func (p Policy) StaleAfter() time.Duration { return p.Timeout + StaleGrace }

// Written is the release spec whose fields the policy was resolved from,
// as the config writes them (what a plan shows of it); nil for a release
// no release spec wants.
func (p Policy) Written() *ReleaseSpec { return p.written }

// Retries reports whether the policy bounds the failed attempts, and by
// how many retries.
func (p Policy) Retries() (retries int, limited bool) {
	if p.Remediation == nil || p.Remediation.Retries == nil {
		return 0, false
	}
	return *p.Remediation.Retries, true
}

// PolicyDefaults are the policies of a release spec that sets none: the
// command line's --helm-timeout and --max-history.
type PolicyDefaults struct {
	Timeout    time.Duration
	MaxHistory int
}

// Of is release spec rs's policy, these defaults filling in what it does
// not set; rs nil (a release no release spec wants) gets the defaults.
func (d PolicyDefaults) Of(rs *ReleaseSpec) Policy {
	if rs == nil {
		return Policy{Timeout: d.Timeout, MaxHistory: d.MaxHistory}
	}
	return Policy{Timeout: rs.TimeoutOr(d.Timeout), Wait: rs.Wait, WaitForJobs: rs.WaitForJobs, DisableHooks: rs.DisableHooks,
		CRDs: rs.CRDs, MaxHistory: rs.MaxHistoryOr(d.MaxHistory), Remediation: rs.Remediation, ServerSideApply: rs.ServerSideApply, Drift: rs.Drift, written: rs}
}

// Limited reports whether the release spec's attempts are bounded, and by
// how many retries.
func (rs *ReleaseSpec) Limited() (retries int, limited bool) {
	if rs == nil || rs.Remediation == nil || rs.Remediation.Retries == nil {
		return 0, false
	}
	return *rs.Remediation.Retries, true
}

// TimeoutOr is the release spec's timeout, or def when it sets none.
func (rs *ReleaseSpec) TimeoutOr(def time.Duration) time.Duration {
	if rs == nil || rs.Timeout == "" {
		return def
	}
	d, err := time.ParseDuration(rs.Timeout)
	if err != nil || d <= 0 {
		return def // validation refuses it; a hand-built spec gets the default
	}
	return d
}

// MaxHistoryOr is the release spec's maxHistory, or def when it sets none.
func (rs *ReleaseSpec) MaxHistoryOr(def int) int {
	if rs == nil || rs.MaxHistory <= 0 {
		return def
	}
	return rs.MaxHistory
}

// Suspended says what suspends release spec id of s: "spec" when the spec
// is suspended, "releaseSpec" when only the release spec is, "" when
// neither is.
func (s *Spec) Suspended(id string) string {
	switch {
	case s == nil:
		return ""
	case s.Suspend:
		return SuspendedBySpec
	case s.ReleaseSpecs[id] != nil && s.ReleaseSpecs[id].Suspend:
		return SuspendedByReleaseSpec
	}
	return ""
}

// What Spec.Suspended names.
const (
	SuspendedBySpec        = "spec"
	SuspendedByReleaseSpec = "releaseSpec"
)

// defaultPolicies fills in what a release spec's policies may omit; spec's
// serverSideApply is the default of its release specs'.
func defaultPolicies(spec *Spec, rs *ReleaseSpec) {
	if rs.ServerSideApply == nil && spec.ServerSideApply != nil {
		v := *spec.ServerSideApply
		rs.ServerSideApply = &v
	}
	defaultDrift(spec, rs)
	if rs.Remediation != nil && rs.Remediation.Retries != nil && rs.Remediation.OnFailure == "" {
		rs.Remediation.OnFailure = OnFailureKeep
	}
}

// validatePolicies checks the policies of one release spec at path p.
func validatePolicies(c *checker, p string, rs *ReleaseSpec) {
	if rs.Timeout != "" {
		if d, err := time.ParseDuration(rs.Timeout); err != nil || d <= 0 {
			c.add(p+".timeout", "%q is not a duration: write a number with a unit, such as 30s, 5m or 1h30m", rs.Timeout)
		}
	}
	if rs.WaitForJobs && !rs.Wait {
		c.add(p+".waitForJobs", "needs `wait: true`: Helm waits for Jobs only while it waits for the release's objects")
	}
	switch rs.CRDs {
	case "", CRDsSkip, CRDsCreate, CRDsCreateReplace:
	default:
		c.add(p+".crds", "must be %s, %s or %s (or omitted: Helm's way, create on install and leave on upgrade), got %q",
			CRDsSkip, CRDsCreate, CRDsCreateReplace, rs.CRDs)
	}
	if r := rs.Remediation; r != nil {
		rp := p + ".remediation"
		if r.Retries != nil && *r.Retries < 0 {
			c.add(rp+".retries", "must be 0 or more, got %d; omit it to retry without a bound", *r.Retries)
		}
		switch r.OnFailure {
		case "", OnFailureKeep, OnFailureRollback, OnFailureUninstall:
		default:
			c.add(rp+".onFailure", "must be %s, %s or %s, got %q", OnFailureKeep, OnFailureRollback, OnFailureUninstall, r.OnFailure)
		}
		if r.Retries == nil && r.OnFailure != "" {
			c.add(rp+".onFailure", "applies once the retries are used up: set `retries` too (e.g. `retries: 2`); without it autox retries without a bound")
		}
	}
}
