package plan

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/internal/format"
)

// Remediation in the decision (DESIGN §3): the failures recorded for what
// a step would install, and once they exceed the retries, onFailure
// instead of another attempt.

// Attempts are the failed attempts recorded for one release: how many
// failed in a row for what Fingerprint names (see Fingerprint).
type Attempts struct {
	Fingerprint string
	Failures    int
	// Remedied says onFailure's remedy was started for Fingerprint.
	Remedied bool
}

// Retries is where a release spec's bounded attempts stand for its step
// (the bound itself is the step's Policy.Remediation).
type Retries struct {
	// Failures are the failed attempts recorded for what the step would
	// install; Exhausted says they exceed the retries.
	Failures  int
	Exhausted bool
	// Remedied says onFailure's remedy (rollback, uninstall) was started
	// for this fingerprint: one remedy per desired state, then exhausted
	// until the config, the chart or the trigger changes.
	Remedied bool
	// Remedy says the step is onFailure's remedy (its rollback or
	// uninstall), which applying records as started before it runs.
	Remedy bool
	// Fingerprint names what the step would install and how (Fingerprint);
	// Recorded says attempts are recorded for the release, for this or an
	// older fingerprint; Forget says the record goes (the trigger is not
	// wanted, or the release is in sync): the next attempt starts afresh.
	Fingerprint string
	Recorded    bool
	Forget      bool
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

// remediate applies release spec rs's remediation to its step: the
// failures recorded for what the step would install, and once they exceed
// the retries, onFailure instead of another attempt — a rollback of a
// failed upgrade to the last deployed revision, an uninstall of a failed
// install never deployed, else nothing. rel is the release the step is
// about (nil: none), state the trigger's.
func remediate(s *Step, rs *config.ReleaseSpec, ro ReleaseSpecObservation, rel *format.Release, state TriggerState) {
	retries, limited := s.Policy.Retries()
	if !limited {
		return
	}
	onFailure := s.Policy.Remediation.OnFailure
	r := &Retries{}
	s.Retries = r
	r.Recorded = ro.Attempts != nil
	if !state.Wanted() || s.Desired == nil {
		// The trigger went: when it is wanted again, that is a new start.
		r.Forget = r.Recorded
		return
	}
	r.Fingerprint = Fingerprint(s.Desired.Digest, rs)
	if ro.Attempts != nil && ro.Attempts.Fingerprint == r.Fingerprint {
		r.Failures, r.Remedied = ro.Attempts.Failures, ro.Attempts.Remedied
	}
	r.Exhausted = r.Failures > retries
	if s.Action == ActionNone && s.State == ReleaseInSync {
		r.Forget = r.Recorded // in sync, whoever made it so
		return
	}
	if r.Exhausted && r.Remedied && s.State == ReleaseStaleUpgrade && s.Action == ActionRollback {
		// The remedy was left pending (its hook never completed): its
		// recovery is the same rollback again, with the same hook.
		s.Pending, s.Action = s.Action, ActionExhausted
		s.Reason = fmt.Sprintf("retries used up and onFailure %s already ran for this config, chart and trigger; the release it left pending is not recovered again until one of them changes; otherwise: %s (%s)",
			onFailure, s.Pending, s.Reason)
		return
	}
	if !r.Exhausted || !forward(s.Action) {
		return
	}
	used := fmt.Sprintf("retries used up: %d failed attempts of this config, chart and trigger (retries %d)", r.Failures, retries)
	switch {
	case r.Remedied && onFailure != config.OnFailureKeep:
		// A remedy that did not bring the release back (its hook fails, it
		// was cut off) is not repeated at every backoff.
		s.Pending, s.Action = s.Action, ActionExhausted
		s.Reason = fmt.Sprintf("%s; onFailure %s already ran for this config, chart and trigger%s; no further attempt nor remedy until the config, the chart or the trigger changes; otherwise: %s (%s)",
			used, onFailure, remediedNote(s.State), s.Pending, s.Reason)
	case onFailure == config.OnFailureRollback && s.State == ReleaseFailedAfterDeployed && rel.LastDeployedRevision > 0:
		s.Action, s.RollbackTo, r.Remedy = ActionRollback, rel.LastDeployedRevision, true
		s.Reason = fmt.Sprintf("%s; onFailure rollback: back to revision %d, the last deployed", used, rel.LastDeployedRevision)
	case onFailure == config.OnFailureUninstall && s.State == ReleaseFailedNeverDeployed && !rel.DeployedBefore && rel.LastDeployedRevision == 0:
		s.Action, r.Remedy = ActionUninstall, true
		s.Reason = used + "; onFailure uninstall: the release was never deployed"
	default:
		s.Pending, s.Action = s.Action, ActionExhausted
		s.Reason = fmt.Sprintf("%s; onFailure %s%s; no further attempt until the config, the chart or the trigger changes; otherwise: %s (%s)",
			used, onFailure, remedyNote(onFailure, s.State), s.Pending, s.Reason)
	}
}

// remediedNote says where a release in state stands after its remedy ran.
func remediedNote(state ReleaseState) string {
	switch state {
	case ReleaseInSync, ReleaseOutOfSync:
		return ", the release runs its last deployed revision"
	case ReleaseAbsent:
		return ", no release"
	}
	return " and did not bring the release back: it is left as it is"
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
