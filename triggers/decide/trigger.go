package decide

import (
	"strings"

	"github.com/autox-dev/autox/config"
)

// Trigger is what a live read of a trigger object found: whether it exists,
// and its labels. A read error is not an observation: nothing is decided.
type Trigger struct {
	Found  bool
	Labels map[string]string
}

// Evaluate turns an observation into a trigger state and its reason.
func Evaluate(t config.Trigger, obs Trigger) (TriggerState, string) {
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

// InjectedValues returns the `autox` values key for a wanted trigger: its
// identity and the values of its trigger labels only.
func InjectedValues(t config.Trigger, labels map[string]string) map[string]interface{} {
	l := make(map[string]interface{}, len(t.Labels))
	for _, k := range t.Labels {
		l[k] = labels[k]
	}
	return map[string]interface{}{
		"trigger": map[string]interface{}{
			"group": t.Group, "version": t.Version, "resource": t.Resource,
			"name": t.Name, "namespace": t.Namespace, "labels": l,
		},
	}
}

// DesiredValues is the spec's values plus the injected `autox` key. The user's
// map is copied, never modified, because the config is shared.
func DesiredValues(rs *config.ReleaseSpec, t config.Trigger, labels map[string]string) map[string]interface{} {
	out := make(map[string]interface{}, len(rs.Values)+1)
	for k, v := range rs.Values {
		out[k] = v
	}
	out[config.InjectedValuesKey] = InjectedValues(t, labels)
	return out
}
