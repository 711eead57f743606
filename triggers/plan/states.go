package plan

import (
	"fmt"
	"time"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/internal/format"
	"helm.sh/helm/v4/pkg/release/common"
)

// TriggerState is what the live read of a trigger object found. A read error
// is not a state: it stops the reconcile before anything is decided.
type TriggerState int

const (
	// TriggerAbsent: the API server answered NotFound for the object.
	TriggerAbsent TriggerState = iota
	// TriggerUnlabelled: the object exists but a trigger label is missing or empty.
	TriggerUnlabelled
	// TriggerSpecRemoved: the spec is no longer in the (valid) config.
	TriggerSpecRemoved
	// TriggerWanted: the object exists with every trigger label set.
	TriggerWanted
	// TriggerConflict: the object is wanted, but another spec claims it too
	// (a named trigger of one spec matched by another's selector, or two
	// selectors): nothing is installed or upgraded for it, and nothing it
	// has is removed for that reason.
	TriggerConflict
	// TriggerOverLimit: the object is wanted, but its selector spec already
	// serves maxObjects objects that come before it in name order: it gets
	// nothing new, and keeps what it has.
	TriggerOverLimit
)

var triggerStateNames = map[TriggerState]string{
	TriggerAbsent: "absent", TriggerUnlabelled: "unlabelled", TriggerSpecRemoved: "spec-removed", TriggerWanted: "wanted",
	TriggerConflict: "conflict", TriggerOverLimit: "over-limit",
}

func (s TriggerState) String() string { return triggerStateNames[s] }

// Wanted reports whether releases should exist in this state.
func (s TriggerState) Wanted() bool { return s == TriggerWanted }

// ReleaseState is the state of one desired release name as Helm records it.
type ReleaseState int

const (
	ReleaseAbsent ReleaseState = iota
	// ReleaseConflict: a release of that name exists without this release
	// spec's autox labels; autox never touches it.
	ReleaseConflict
	ReleaseInSync
	// ReleaseOutOfSync: deployed, but chart name, version or values differ.
	ReleaseOutOfSync
	// ReleaseFailedAfterDeployed: the latest revision failed; an earlier one was deployed.
	ReleaseFailedAfterDeployed
	// ReleaseFailedNeverDeployed: the latest revision failed and none was ever deployed.
	ReleaseFailedNeverDeployed
	// ReleaseLocked: pending-* or uninstalling, younger than the stale age:
	// an operation (ours, or a previous process's) may still be running.
	ReleaseLocked
	// ReleaseStaleUpgrade: pending-upgrade or pending-rollback left by a dead process.
	ReleaseStaleUpgrade
	// ReleaseStaleInstall: pending-install or uninstalling left by a dead process.
	ReleaseStaleInstall
)

var releaseStateNames = map[ReleaseState]string{
	ReleaseAbsent: "absent", ReleaseConflict: "conflict", ReleaseInSync: "in-sync", ReleaseOutOfSync: "out-of-sync",
	ReleaseFailedAfterDeployed: "failed-after-deployed", ReleaseFailedNeverDeployed: "failed-never-deployed",
	ReleaseLocked: "locked", ReleaseStaleUpgrade: "stale-upgrade", ReleaseStaleInstall: "stale-install",
}

func (s ReleaseState) String() string { return releaseStateNames[s] }

// Action is the one thing reconcile does for one release.
type Action string

const (
	ActionNone      Action = "unchanged"
	ActionInstall   Action = "install"
	ActionUpgrade   Action = "upgrade"
	ActionReinstall Action = "reinstall"
	ActionUninstall Action = "uninstall"
	// ActionRollback unlocks a stale pending-upgrade/rollback release by rolling
	// back to its last deployed revision (DESIGN §5).
	ActionRollback Action = "rollback"
	// ActionConflict reports a foreign release of the wanted name; no Helm call.
	ActionConflict Action = "conflict"
	// ActionWait leaves a locked release alone until it is stale or done.
	ActionWait Action = "wait"
	// ActionAdopt hands an in-sync release whose owner left the config over
	// to the release spec that wants its name and namespace now: its
	// ownership labels change, no revision is made and no hook runs
	// (adopt.go).
	ActionAdopt Action = "adopt"
)

// Decide maps a trigger state and a release state to one action. It is the
// only place where that choice is made; run and plan both use it.
func ActionFor(trigger TriggerState, rel ReleaseState, onChange string) Action {
	switch trigger {
	case TriggerConflict:
		return ActionConflict
	case TriggerOverLimit:
		return ActionNone
	}
	if !trigger.Wanted() {
		switch rel {
		case ReleaseAbsent, ReleaseConflict:
			return ActionNone
		case ReleaseLocked:
			return ActionWait
		default:
			return ActionUninstall
		}
	}
	switch rel {
	case ReleaseAbsent:
		return ActionInstall
	case ReleaseConflict:
		return ActionConflict
	case ReleaseInSync:
		return ActionNone
	case ReleaseOutOfSync, ReleaseFailedAfterDeployed:
		if onChange == config.OnChangeReinstall {
			return ActionReinstall
		}
		return ActionUpgrade
	case ReleaseFailedNeverDeployed, ReleaseStaleInstall:
		return ActionReinstall
	case ReleaseLocked:
		return ActionWait
	case ReleaseStaleUpgrade:
		return ActionRollback
	}
	return ActionNone
}

// ClassifyRelease says what state rel is in relative to want, for the
// release spec, instance and object of owner. rel may be nil
// (no release of that name). want may be nil when the trigger is not wanted;
// then a managed deployed release is reported in sync (nothing to compare).
// staleAfter is how old a pending release must be before it counts as left
// behind by a dead process; its age is the time since its record was last
// written, and an unknown time means it may still be worked on.
func ClassifyRelease(rel *format.Release, owner format.Owner, want *Desired, now time.Time, staleAfter time.Duration) (ReleaseState, string, error) {
	if rel == nil {
		return ReleaseAbsent, "release not found", nil
	}
	if !rel.Managed() {
		return ReleaseConflict, "a release of this name exists without autox labels; remove or rename it", nil
	}
	if rel.Instance != owner.Instance {
		return ReleaseConflict, fmt.Sprintf("a release of this name belongs to autox instance %q", rel.Instance), nil
	}
	if rel.Spec != owner.Spec || rel.ReleaseSpec != owner.ReleaseSpec {
		return ReleaseConflict, fmt.Sprintf("a release of this name belongs to spec %q, release spec %q", rel.Spec, rel.ReleaseSpec), nil
	}
	if !owner.Object.Labelled(rel.ObjectNamespace, rel.ObjectName) {
		// Two objects whose names render the same release name (the same
		// name in two namespaces, releases in one): the first keeps it.
		if rel.ObjectName == "" {
			return ReleaseConflict, "a release of this name belongs to this spec from before it had a selector", nil
		}
		return ReleaseConflict, fmt.Sprintf("a release of this name belongs to object %s/%s of this spec", rel.ObjectNamespace, rel.ObjectName), nil
	}
	switch {
	case rel.Status.IsPending() || rel.Status == common.StatusUninstalling:
		if rel.Modified.IsZero() {
			return ReleaseLocked, fmt.Sprintf("release is %s and when its record was last written is unknown", rel.Status), nil
		}
		age := now.Sub(rel.Modified)
		if age < staleAfter {
			return ReleaseLocked, fmt.Sprintf("release is %s since %s", rel.Status, age.Round(time.Second)), nil
		}
		reason := fmt.Sprintf("release left %s for %s", rel.Status, age.Round(time.Second))
		if rel.Status == common.StatusPendingInstall || rel.Status == common.StatusUninstalling || rel.LastDeployedRevision == 0 {
			return ReleaseStaleInstall, reason, nil
		}
		return ReleaseStaleUpgrade, reason, nil
	case rel.Status != common.StatusDeployed:
		// failed, and statuses a healthy release never ends on (unknown,
		// superseded, uninstalled): repair it the way a failure is repaired.
		if rel.DeployedBefore {
			return ReleaseFailedAfterDeployed, fmt.Sprintf("revision %d is %s", rel.Revision, rel.Status), nil
		}
		return ReleaseFailedNeverDeployed, fmt.Sprintf("revision %d is %s and none was deployed", rel.Revision, rel.Status), nil
	}
	if want == nil {
		return ReleaseInSync, "deployed", nil
	}
	if rel.ChartName != want.ChartName || rel.ChartVersion != want.ChartVersion {
		return ReleaseOutOfSync, fmt.Sprintf("chart %s %s -> %s %s", rel.ChartName, rel.ChartVersion, want.ChartName, want.ChartVersion), nil
	}
	segs, differ, err := valuesDiff(want.Values, rel.Values)
	if err != nil {
		return 0, "", err
	}
	if differ {
		path := pathString(segs)
		shown := path
		if want.Mask != nil {
			shown = want.Mask(segs)
		}
		reason := "values changed: " + shown
		if want.From != nil {
			if from := want.From(path); from != "" {
				reason += " (from " + from + ")"
			}
		}
		return ReleaseOutOfSync, reason, nil
	}
	return ReleaseInSync, "chart and values match", nil
}
