package apply

import (
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/autox-dev/autox/triggers/plan"
)

// Report turns the failures of a plan into errors and Events: a release
// spec that could not be decided (ReleaseFailed, or ValuesSourceFailed for a
// values source missing or unreadable: the release runs on as it is), a
// removed spec whose releases could not all be seen, and a trigger in
// conflict or past maxObjects.
func (a *Applier) Report(p plan.Plan) error {
	errs := []error{p.Incomplete}
	if p.Incomplete != nil {
		errs[0] = fmt.Errorf("%w: %w", ErrStepFailed, p.Incomplete)
	}
	for _, f := range p.Failed {
		err := fmt.Errorf("%w: release spec %s (release %s/%s): %w", ErrStepFailed, f.ReleaseSpec, f.Namespace, f.Release, f.Err)
		if !p.Object.IsZero() {
			err = fmt.Errorf("%w: object %s, release spec %s (release %s/%s): %w", ErrStepFailed, p.Object, f.ReleaseSpec, f.Namespace, f.Release, f.Err)
		}
		errs = append(errs, err)
		reason := "ReleaseFailed"
		var source *plan.SourceError
		if errors.As(f.Err, &source) {
			reason = "ValuesSourceFailed"
		}
		a.event(p.Ref, corev1.EventTypeWarning, reason, "%s", err.Error())
	}
	switch p.Trigger {
	case plan.TriggerConflict:
		a.event(p.Ref, corev1.EventTypeWarning, "TriggerConflict", "%s", p.TriggerReason)
	case plan.TriggerOverLimit:
		a.event(p.Ref, corev1.EventTypeWarning, "TriggerOverLimit", "spec %s: %s", p.Spec, p.TriggerReason)
	}
	a.reportSuspended(p)
	return errors.Join(errs...)
}

// reportSuspended says, with an Event on the trigger object, that a
// suspended spec or release spec has pending changes autox does not make.
func (a *Applier) reportSuspended(p plan.Plan) {
	pending := plan.SuspendedChanges(p)
	if len(pending) == 0 {
		return
	}
	a.opts.Log.Info().Str("spec", p.Spec).Str("object", p.Object.String()).Strs("pending", pending).Msg("suspended: changes pending, no Helm write")
	a.event(p.Ref, corev1.EventTypeNormal, "SuspendedChangesPending", "spec %s: suspended, autox makes no Helm write; pending: %s; set suspend: false to apply them",
		p.Spec, strings.Join(pending, ", "))
}

var eventReasons = map[plan.Action]string{
	plan.ActionInstall: "ReleaseInstalled", plan.ActionUpgrade: "ReleaseUpgraded", plan.ActionReinstall: "ReleaseReinstalled",
	plan.ActionUninstall: "ReleaseUninstalled", plan.ActionRollback: "ReleaseRolledBack", plan.ActionAdopt: "ReleaseAdopted",
}

var pastTense = map[plan.Action]string{
	plan.ActionInstall: "installed", plan.ActionUpgrade: "upgraded", plan.ActionReinstall: "reinstalled",
	plan.ActionUninstall: "uninstalled", plan.ActionRollback: "rolled back", plan.ActionAdopt: "adopted",
}

// event records a Kubernetes Event on the trigger object, when there is one:
// a removed trigger has nothing to attach to, and logs cover it. Messages
// name releases and reasons, never values.
func (a *Applier) event(ref *corev1.ObjectReference, eventType, reason, format string, args ...interface{}) {
	if a.opts.Events == nil || ref == nil {
		return
	}
	a.opts.Events.Eventf(ref, eventType, reason, format, args...)
}
