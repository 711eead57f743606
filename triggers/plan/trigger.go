package plan

import (
	"strings"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/internal/format"
)

// TriggerRead is what a live read of a trigger object found: whether it exists,
// and its labels. A read error is not an observation: nothing is decided.
type TriggerRead struct {
	Found  bool
	Labels map[string]string
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
