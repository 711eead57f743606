package plan

import (
	"fmt"
	"slices"
	"strings"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/internal/format"
)

// TriggerRead is what a live read of a trigger object found: whether it exists,
// and its labels. A read error is not an observation: nothing is decided.
type TriggerRead struct {
	Found  bool
	Labels map[string]string
	// Version and UID name what was read (resourceVersion, uid); no
	// decision uses them: a pass's LIST is checked with Version before it
	// stands in for a GET, and Events name the object by its UID.
	Version, UID string
}

// Evaluate turns an observation into a trigger state and its reason.
func Evaluate(t config.Trigger, obs TriggerRead) (TriggerState, string) {
	if !obs.Found {
		return TriggerAbsent, "trigger not found"
	}
	if t.IsSelector() && !t.Matches(obs.Labels) {
		return TriggerUnlabelled, "object no longer matches the selector"
	}
	var missing []string
	for _, l := range t.Labels {
		if obs.Labels[l] == "" {
			missing = append(missing, l)
		}
	}
	if len(missing) > 0 {
		return TriggerUnlabelled, "label " + strings.Join(missing, ", ") + " missing"
	}
	return TriggerWanted, "trigger labelled"
}

// InjectedValues returns the `autox` values key for a wanted trigger (the
// format's InjectedValues for trigger t, with the object's labels).
func InjectedValues(t config.Trigger, labels map[string]string) map[string]interface{} {
	return format.InjectedValues(format.TriggerRef{Group: t.Group, Version: t.Version, Resource: t.Resource, Name: t.Name, Namespace: t.Namespace},
		t.Labels, labels)
}

// DesiredValues is the spec's values plus the injected `autox` key. The user's
// map is copied, never modified, because the config is shared.
func DesiredValues(rs *config.ReleaseSpec, t config.Trigger, labels map[string]string) map[string]interface{} {
	out := make(map[string]interface{}, len(rs.Values)+1)
	for k, v := range rs.Values {
		out[k] = v
	}
	out[format.InjectedValuesKey] = InjectedValues(t, labels)
	return out
}

// TriggerOf is the trigger's state in an observation and why: as the live
// read found it, unless another spec claims the object or it is past its
// spec's maxObjects; TriggerSpecRemoved for a removed spec.
func TriggerOf(o Observation) (TriggerState, string) {
	if o.Config == nil {
		return TriggerSpecRemoved, "spec removed from config"
	}
	if o.OutOfScope {
		// Decided from the config alone: the object need not be readable.
		return TriggerUnlabelled, "object is in a namespace the selector no longer covers"
	}
	state, reason := Evaluate(o.Config.Trigger, o.Trigger)
	return claimed(o, state, reason)
}

// claimed turns a wanted trigger into a conflict when other specs claim the
// object too, and into over-limit when its selector spec serves enough
// objects already. Neither is a reason to remove anything.
func claimed(o Observation, state TriggerState, reason string) (TriggerState, string) {
	if !o.Trigger.Found {
		return state, reason
	}
	// A conflict needs this spec among the claimants: an object this spec
	// no longer selects is simply not its object any more, whoever else
	// claims it.
	if len(o.Claimants) > 1 && slices.Contains(o.Claimants, o.Spec) {
		return TriggerConflict, fmt.Sprintf("trigger object is claimed by specs %s: one object may serve one spec only; autox installs, upgrades and removes nothing for it until one spec lets it go",
			strings.Join(o.Claimants, ", "))
	}
	if state.Wanted() && o.OverLimit {
		return TriggerOverLimit, fmt.Sprintf("past maxObjects (%d) of the spec: objects before it in namespace/name order are served first; it keeps what it has and gets nothing new", o.Config.Trigger.MaxObjects)
	}
	return state, reason
}
