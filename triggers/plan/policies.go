package plan

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/internal/format"
)

// The release policies in the decision (DESIGN §3): what holds a step
// (suspend, used-up retries, a dependency not deployed yet), what a step
// waits for in its plan (dependsOn), and what remediation does once the
// retries are used up. Like the rest of the plan they decide from the
// observation alone.

const (
	// ActionSuspended holds the step of a suspended spec or release spec:
	// no Helm write; Step.Pending says what it would do.
	ActionSuspended Action = "suspended"
	// ActionExhausted holds the step of a release spec whose remediation
	// retries are used up for what it would install: no Helm write until
	// its config, chart or trigger changes; Step.Pending says what it
	// would do.
	ActionExhausted Action = "exhausted"
)

// StaleGrace is what a pending release's age must exceed beyond its
// operations' timeout before it counts as left by a dead process.
const StaleGrace = 30 * time.Second

// StaleAfterFor is how old a pending release of release spec rs (nil: a
// release no release spec wants) must be before it is unlocked: its
// timeout plus StaleGrace, def (--helm-timeout plus StaleGrace) when it
// sets none.
func StaleAfterFor(rs *config.ReleaseSpec, def time.Duration) time.Duration {
	if rs == nil || rs.Timeout == "" {
		return def
	}
	return rs.TimeoutOr(def-StaleGrace) + StaleGrace
}

// Attempts are the failed attempts recorded for one release: how many
// failed in a row for what Fingerprint names (see Fingerprint).
type Attempts struct {
	Fingerprint string
	Failures    int
}

// Policies are a release spec's policies as a step shows them (plan -o
// json): only what the release spec sets, and its remediation state.
type Policies struct {
	Timeout      string       `json:"timeout,omitempty"`
	Wait         bool         `json:"wait,omitempty"`
	WaitForJobs  bool         `json:"waitForJobs,omitempty"`
	DisableHooks bool         `json:"disableHooks,omitempty"`
	CRDs         string       `json:"crds,omitempty"`
	MaxHistory   int          `json:"maxHistory,omitempty"`
	DependsOn    []string     `json:"dependsOn,omitempty"`
	Remediation  *Remediation `json:"remediation,omitempty"`
	// ServerSideApply is shown when the release spec (or its spec) sets it.
	ServerSideApply *bool `json:"serverSideApply,omitempty"`
}

// Remediation is a release spec's bound of attempts and where it stands.
type Remediation struct {
	Retries   int    `json:"retries"`
	OnFailure string `json:"onFailure"`
	// Failures are the failed attempts recorded for what the step would
	// install; Exhausted says they exceed Retries.
	Failures  int  `json:"failures"`
	Exhausted bool `json:"exhausted,omitempty"`

	// Fingerprint names what the step would install and how (Fingerprint);
	// Recorded says attempts are recorded for the release, for this or an
	// older fingerprint; Forget says the record goes (the trigger is not
	// wanted, or the release is in sync): the next attempt starts afresh.
	Fingerprint string `json:"-"`
	Recorded    bool   `json:"-"`
	Forget      bool   `json:"-"`
}

// Fingerprint names what an attempt of release spec rs installs and how:
// the digest of chart and values (trigger labels included) and the
// policies an operation runs with. A new fingerprint is a new start: the
// failures of another one do not count. It is autox's own bookkeeping,
// not part of the release format.
//
// serverSideApply counts when set: an operation applied the other way is
// another attempt (a conflict that failed server-side may pass client-side).
// It is added only when set, so that the fingerprints of release specs
// without it, and the failures recorded for them, stay as they were.
func Fingerprint(digest string, rs *config.ReleaseSpec) string {
	how, _ := json.Marshal(struct {
		Timeout             string
		Wait, Jobs, NoHooks bool
		CRDs                string
		Remediation         *config.Remediation
	}{rs.Timeout, rs.Wait, rs.WaitForJobs, rs.DisableHooks, rs.CRDs, rs.Remediation})
	if rs.ServerSideApply != nil {
		how = append(how, fmt.Sprintf("\nserverSideApply=%t", *rs.ServerSideApply)...)
	}
	sum := sha256.Sum256([]byte(digest + "\n" + string(how)))
	return hex.EncodeToString(sum[:16])
}

// policiesOf shows the policies rs sets; nil when it sets none.
func policiesOf(rs *config.ReleaseSpec) *Policies {
	p := &Policies{Timeout: rs.Timeout, Wait: rs.Wait, WaitForJobs: rs.WaitForJobs, DisableHooks: rs.DisableHooks,
		CRDs: rs.CRDs, MaxHistory: rs.MaxHistory, DependsOn: rs.DependsOn, ServerSideApply: rs.ServerSideApply}
	if retries, limited := rs.Limited(); limited {
		p.Remediation = &Remediation{Retries: retries, OnFailure: rs.Remediation.OnFailure}
	}
	if p.Timeout == "" && !p.Wait && !p.WaitForJobs && !p.DisableHooks && p.CRDs == "" && p.MaxHistory == 0 &&
		len(p.DependsOn) == 0 && p.Remediation == nil && p.ServerSideApply == nil {
		return nil
	}
	return p
}

// Decide plans one spec from its observation: the one decision of autox,
// which run, plan and the quiet pass share. The steps of a suspended spec
// or release spec are held; then steps wait for the release specs they
// depend on (installs and upgrades) or that depend on them (uninstalls).
func Decide(o Observation) Plan {
	p := decide(o)
	hold(&p, o)
	order(&p, o.Config)
	return p
}

// forward reports whether a is an operation that makes the release spec's
// release: what dependsOn orders and retries count.
func forward(a Action) bool {
	return a == ActionInstall || a == ActionUpgrade || a == ActionReinstall
}

// remediate applies release spec rs's remediation to its step: the
// failures recorded for what the step would install, and once they exceed
// the retries, onFailure instead of another attempt — a rollback of a
// failed upgrade to the last deployed revision, an uninstall of a failed
// install never deployed, else nothing. rel is the release the step is
// about (nil: none), state the trigger's.
func remediate(s *Step, rs *config.ReleaseSpec, ro ReleaseSpecObservation, rel *format.Release, state TriggerState) {
	retries, limited := rs.Limited()
	if !limited || s.Policies == nil || s.Policies.Remediation == nil {
		return
	}
	r := s.Policies.Remediation
	r.Recorded = ro.Attempts != nil
	if !state.Wanted() || s.Desired == nil {
		// The trigger went: when it is wanted again, that is a new start.
		r.Forget = r.Recorded
		return
	}
	r.Fingerprint = Fingerprint(s.Desired.Digest, rs)
	if ro.Attempts != nil && ro.Attempts.Fingerprint == r.Fingerprint {
		r.Failures = ro.Attempts.Failures
	}
	r.Exhausted = r.Failures > retries
	if s.Action == ActionNone && s.state == ReleaseInSync {
		r.Forget = r.Recorded // in sync, whoever made it so
		return
	}
	if !r.Exhausted || !forward(s.Action) {
		return
	}
	used := fmt.Sprintf("retries used up: %d failed attempts of this config, chart and trigger (retries %d)", r.Failures, retries)
	switch {
	case r.OnFailure == config.OnFailureRollback && s.state == ReleaseFailedAfterDeployed && rel.LastDeployedRevision > 0:
		s.Action, s.RollbackTo = ActionRollback, rel.LastDeployedRevision
		s.Reason = fmt.Sprintf("%s; onFailure rollback: back to revision %d, the last deployed", used, rel.LastDeployedRevision)
	case r.OnFailure == config.OnFailureUninstall && s.state == ReleaseFailedNeverDeployed && !rel.DeployedBefore && rel.LastDeployedRevision == 0:
		s.Action = ActionUninstall
		s.Reason = used + "; onFailure uninstall: the release was never deployed"
	default:
		s.Pending, s.Action = s.Action, ActionExhausted
		s.Reason = fmt.Sprintf("%s; onFailure %s%s; no further attempt until the config, the chart or the trigger changes; otherwise: %s (%s)",
			used, r.OnFailure, remedyNote(r.OnFailure, s.state), s.Pending, s.Reason)
	}
}

// remedyNote says why onFailure did nothing (more) for a release in state.
func remedyNote(onFailure string, state ReleaseState) string {
	switch {
	case state == ReleaseInSync || state == ReleaseOutOfSync:
		return ", the release runs its last deployed revision"
	case state == ReleaseAbsent:
		return ", no release"
	case onFailure == config.OnFailureRollback:
		return " does not apply: no revision was deployed to go back to"
	case onFailure == config.OnFailureUninstall:
		return " does not apply: a release that was once deployed is never uninstalled by remediation"
	}
	return ", the release is left as it is"
}

// hold suspends every step of a suspended spec, and of a suspended
// release spec: no Helm write of any kind, and what it would do is kept.
func hold(p *Plan, o Observation) {
	for i := range p.Steps {
		s := &p.Steps[i]
		who := config.SuspendedBySpec
		switch {
		case o.SpecSuspended:
		case o.Config != nil:
			who = o.Config.Suspended(s.ReleaseSpec)
		default:
			who = ""
		}
		if who == "" {
			continue
		}
		s.Suspended, s.Pending, s.Action = who, s.Action, ActionSuspended
		if who == config.SuspendedBySpec {
			s.Reason = fmt.Sprintf("spec suspended; otherwise: %s (%s)", s.Pending, s.Reason)
		} else {
			s.Reason = fmt.Sprintf("release spec suspended; otherwise: %s (%s)", s.Pending, s.Reason)
		}
	}
}

// deployed reports whether a step leaves its release deployed as it is.
func (s Step) deployed() bool {
	return s.Action != ActionUninstall && (s.state == ReleaseInSync || s.state == ReleaseOutOfSync)
}

// order makes the steps of spec's release specs wait for their
// dependencies: an install, upgrade or reinstall runs after the write
// steps of the release specs it depends on (After), or waits when one of
// them is neither deployed nor made so by this plan; an uninstall runs
// after the uninstalls of the release specs that depend on it, or waits
// while one of them keeps its release.
func order(p *Plan, spec *config.Spec) {
	if spec == nil {
		return
	}
	idx := map[string]int{}
	for i, s := range p.Steps {
		if !s.removal {
			idx[s.ReleaseSpec] = i
		}
	}
	ids := spec.DependencyOrder()
	for _, id := range ids {
		i, ok := idx[id]
		if !ok || !forward(p.Steps[i].Action) {
			continue
		}
		s := &p.Steps[i]
		for _, dep := range spec.ReleaseSpecs[id].DependsOn {
			j, ok := idx[dep]
			switch {
			case !ok:
				waitFor(s, dep, "it could not be decided")
			case forward(p.Steps[j].Action) || p.Steps[j].Action == ActionRollback:
				s.After = append(s.After, dep)
				continue
			case p.Steps[j].deployed():
				continue
			default:
				waitFor(s, dep, fmt.Sprintf("release %s/%s is not deployed: %s (%s)", p.Steps[j].Namespace, p.Steps[j].Release, p.Steps[j].Action, p.Steps[j].Reason))
			}
			break
		}
	}
	for k := len(ids) - 1; k >= 0; k-- {
		i, ok := idx[ids[k]]
		if !ok || p.Steps[i].Action != ActionUninstall {
			continue
		}
		s := &p.Steps[i]
		for _, user := range spec.Dependents(ids[k]) {
			j, ok := idx[user]
			switch {
			case !ok:
				waitFor(s, user, "it depends on this one and could not be decided")
			case p.Steps[j].Action == ActionUninstall:
				s.After = append(s.After, user)
				continue
			case p.Steps[j].state == ReleaseAbsent || p.Steps[j].state == ReleaseConflict:
				continue // it has no release of ours
			default:
				waitFor(s, user, fmt.Sprintf("it depends on this one and keeps release %s/%s: %s (%s)", p.Steps[j].Namespace, p.Steps[j].Release, p.Steps[j].Action, p.Steps[j].Reason))
			}
			break
		}
	}
}

// waitFor holds step s for release spec id: nothing is done for it in this
// plan; a later reconcile (an event, the pass) tries again.
func waitFor(s *Step, id, why string) {
	s.Pending, s.Action, s.After = s.Action, ActionWait, nil
	s.Reason = fmt.Sprintf("waits for release spec %s: %s", id, why)
}

// Active is spec without its suspended release specs (spec itself when it
// has none): what a pass must prove in sync, since nothing is done for
// the others. A suspended spec has no active release spec.
func Active(spec *config.Spec) *config.Spec {
	if !spec.Suspend && !slices.ContainsFunc(spec.ReleaseSpecIDs(), func(id string) bool { return spec.ReleaseSpecs[id].Suspend }) {
		return spec
	}
	out := *spec
	out.ReleaseSpecs = map[string]*config.ReleaseSpec{}
	for id, rs := range spec.ReleaseSpecs {
		if !spec.Suspend && !rs.Suspend {
			out.ReleaseSpecs[id] = rs
		}
	}
	return &out
}

// ActiveRecords are the records of recs that spec's suspended release
// specs do not hold: every record of a release spec that is not suspended
// or no longer in the config.
func ActiveRecords(spec *config.Spec, recs []format.Record) []format.Record {
	if spec.Suspend {
		return nil
	}
	var out []format.Record
	for _, r := range recs {
		if rs := spec.ReleaseSpecs[r.ReleaseSpec]; rs == nil || !rs.Suspend {
			out = append(out, r)
		}
	}
	return out
}

// SuspendedChanges lists what the suspended steps of p would write, one
// entry per step, for the Event that says a suspended spec has pending
// changes; none when nothing is pending.
func SuspendedChanges(p Plan) []string {
	var out []string
	for _, s := range p.Steps {
		if s.Action == ActionSuspended && (Step{Action: s.Pending}).Changes() {
			out = append(out, fmt.Sprintf("%s %s/%s", s.Pending, s.Namespace, s.Release))
		}
	}
	return out
}

// The pass and suspended specs: a key whose only differences are in
// suspended release specs is queued once per leadership term (for the
// Event that says changes are pending), then left to events and config
// changes, as a key in conflict is.

// SuspendedNotice is the Survey.Noticed entry of a key queued once because
// its suspended release specs have pending changes; ParseNotice returns
// the key of a notice.
func SuspendedNotice(key string) string { return suspendedNotice + key }

// ParseNotice returns the queue key a Noticed entry is about.
func ParseNotice(notice string) string { return strings.TrimPrefix(notice, suspendedNotice) }

// suspendedNotice marks a suspended key's notice; keys hold no ":".
const suspendedNotice = "suspended:"

// syncState is what a pass can say of a key from its records.
type syncState int

const (
	unsure   syncState = iota // it needs the full reconcile
	synced                    // InSync: no Helm call
	heldOnly                  // in sync but for suspended release specs, which get no Helm call either
)

// inSync is InSync for the pass, which tells apart a key that differs only
// in its suspended release specs.
func inSync(name string, spec *config.Spec, obj format.Object, trig TriggerRead, recs []format.Record, s Survey) syncState {
	if InSync(name, spec, obj, trig, recs, s.Charts[name], s.Sources) {
		return synced
	}
	if active := Active(spec); active != spec && InSync(name, active, obj, trig, ActiveRecords(spec, recs), s.Charts[name], s.Sources) {
		return heldOnly
	}
	return unsure
}

// Held reports whether cfg suspends record r's release: its spec is
// suspended, or its release spec is.
func Held(cfg *config.Config, r format.Record) bool {
	spec := cfg.Specs[r.Spec]
	return spec != nil && spec.Suspended(r.ReleaseSpec) != ""
}

// splitHeld splits recs into the records of releases cfg does not suspend
// and those it does.
func splitHeld(cfg *config.Config, recs []format.Record) (active, held []format.Record) {
	for _, r := range recs {
		if Held(cfg, r) {
			held = append(held, r)
		} else {
			active = append(active, r)
		}
	}
	return active, held
}

// allHeld reports whether cfg suspends every release of recs (some).
func allHeld(cfg *config.Config, recs []format.Record) bool {
	for _, r := range recs {
		if !Held(cfg, r) {
			return false
		}
	}
	return len(recs) > 0
}
