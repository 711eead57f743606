package config

import (
	"fmt"
	"strings"

	k8svalidation "k8s.io/apimachinery/pkg/util/validation"
)

// Kinds of ValuesFrom.Kind: the API kinds, in their exact case, as a user
// writes them in a manifest.
const (
	KindSecret    = "Secret"
	KindConfigMap = "ConfigMap"
)

// DefaultValuesKey is the key of a values source read when the entry names none.
const DefaultValuesKey = "values.yaml"

// ValuesFrom is one Secret or ConfigMap, in the release's namespace, whose
// content goes into the release's values: the key's content as a YAML map
// merged deeply (a later entry wins), or, with TargetPath, the content as one
// string at that dotted path. They keep secrets out of the config file, which
// lives in Git and in a ConfigMap.
type ValuesFrom struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
	// Key defaults to DefaultValuesKey.
	Key string `json:"key,omitempty"`
	// TargetPath is a dotted path such as notify.token; "" merges the key's
	// content as a map.
	TargetPath string `json:"targetPath,omitempty"`
	// Optional skips a missing object or key instead of failing the release spec.
	Optional bool `json:"optional,omitempty"`
}

// Path returns the segments of TargetPath, nil when it is not set.
func (v ValuesFrom) Path() []string {
	if v.TargetPath == "" {
		return nil
	}
	return strings.Split(v.TargetPath, ".")
}

func defaultValuesFrom(rs *ReleaseSpec) {
	for i := range rs.ValuesFrom {
		if rs.ValuesFrom[i].Key == "" {
			rs.ValuesFrom[i].Key = DefaultValuesKey
		}
	}
}

// validateValuesFrom checks the entries of one release spec. p is the YAML
// path of the list.
func validateValuesFrom(c *checker, p string, list []ValuesFrom) {
	first := map[ValuesFrom]int{} // entry without Optional -> index of its first use
	for i, v := range list {
		ip := fmt.Sprintf("%s[%d]", p, i)
		if v.Kind != KindSecret && v.Kind != KindConfigMap {
			c.add(ip+".kind", "must be %q or %q (exact case), got %q", KindSecret, KindConfigMap, v.Kind)
		}
		if c.field(ip+".name", v.Name, "required", "required: the name of the "+kindOr(v.Kind)+" in the release's namespace") {
			c.field(ip+".name", v.Name, "dns1123subdomain", "object name "+msgDNSSubdomain)
		}
		if errs := k8svalidation.IsConfigMapKey(v.Key); len(errs) > 0 {
			c.add(ip+".key", "%q is not a valid key of a Secret or ConfigMap: %s", v.Key, strings.Join(errs, "; "))
		}
		if v.TargetPath != "" {
			segs := v.Path()
			bad := false
			for _, s := range segs {
				bad = bad || s == ""
			}
			switch {
			case bad:
				c.add(ip+".targetPath", "%q must be a dotted path of non-empty keys, e.g. notify.token", v.TargetPath)
			case segs[0] == InjectedValuesKey:
				c.add(ip+".targetPath", "must not start with %q: autox sets that key itself", InjectedValuesKey)
			}
		}
		same := v
		same.Optional = false
		if j, dup := first[same]; dup {
			c.add(ip, "the same source as %s[%d] (kind %s, name %s, key %s, targetPath %q); remove one of entries %d and %d", p, j, v.Kind, v.Name, v.Key, v.TargetPath, j, i)
		} else {
			first[same] = i
		}
	}
}

func kindOr(kind string) string {
	if kind == KindSecret || kind == KindConfigMap {
		return kind
	}
	return "Secret or ConfigMap"
}
