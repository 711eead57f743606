package format

// InjectedValuesKey is the top-level values key autox fills in itself, on
// top of every other value; users must not set it.
const InjectedValuesKey = "autox"

// TriggerRef is the identity of a trigger object as the injected values name
// it: a named trigger's, or one object of a selector spec.
type TriggerRef struct {
	Group, Version, Resource, Name, Namespace string
}

// InjectedValues returns the value of InjectedValuesKey for a wanted
// trigger: {trigger: {group, version, resource, name, namespace, labels}},
// where labels holds the values of the trigger's label keys only.
func InjectedValues(t TriggerRef, labelKeys []string, labels map[string]string) map[string]interface{} {
	l := make(map[string]interface{}, len(labelKeys))
	for _, k := range labelKeys {
		l[k] = labels[k]
	}
	return map[string]interface{}{
		"trigger": map[string]interface{}{
			"group": t.Group, "version": t.Version, "resource": t.Resource,
			"name": t.Name, "namespace": t.Namespace, "labels": l,
		},
	}
}

// InjectedTriggerName is the trigger name a release's values say autox
// injected, "" when they say none.
func InjectedTriggerName(values map[string]interface{}) string {
	autox, _ := values[InjectedValuesKey].(map[string]interface{})
	trig, _ := autox["trigger"].(map[string]interface{})
	name, _ := trig["name"].(string)
	return name
}

// UserValues are the values of a release without InjectedValuesKey: what
// the user (and values sources) gave, which may be secret. The injected key
// holds only the trigger's identity and labels.
func UserValues(values map[string]interface{}) map[string]interface{} {
	if _, ok := values[InjectedValuesKey]; !ok {
		return values
	}
	out := make(map[string]interface{}, len(values))
	for k, v := range values {
		if k != InjectedValuesKey {
			out[k] = v
		}
	}
	return out
}
