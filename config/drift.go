package config

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
	k8svalidation "k8s.io/apimachinery/pkg/util/validation"
)

// The drift policy (DESIGN §2): whether autox looks for changes made to a
// release's objects behind its back, and undoes them. Like the release
// policies it is not part of the release format: it is in neither the
// digest nor the injected values nor the remediation fingerprint, so
// setting or changing it makes no Helm write.

// Values of Drift.Mode.
const (
	// DriftOff: the release's objects are not checked (the default).
	DriftOff = "off"
	// DriftWarn: drift is reported, never corrected.
	DriftWarn = "warn"
	// DriftCorrect: drift is reported and the drifted fields are put back
	// (a missing object created again), without a Helm revision.
	DriftCorrect = "correct"
)

// Drift is the drift policy of a spec (the default of its release specs)
// or of a release spec.
type Drift struct {
	// Mode is DriftOff, DriftWarn or DriftCorrect; "" is DriftOff.
	Mode string `json:"mode,omitempty"`
	// Ignore are the fields that never count as drift, nor are written by
	// a correction.
	Ignore []DriftIgnore `json:"ignore,omitempty"`
}

// DriftIgnore is one ignore rule: the fields at Paths, and the fields
// Managers own, of the objects Target matches (every object without one).
type DriftIgnore struct {
	// Paths are RFC 6901 JSON pointers into an object, e.g. /spec/replicas
	// or /metadata/annotations/example.com~1note; "" is the whole object.
	Paths []string `json:"paths,omitempty"`
	// Managers are field managers (as in an object's managedFields, e.g.
	// kube-controller-manager): a field one of them owns is not drift.
	Managers []string     `json:"managers,omitempty"`
	Target   *DriftTarget `json:"target,omitempty"`
}

// DriftTarget says which objects an ignore rule is about; an empty field
// matches every object.
type DriftTarget struct {
	// Group is the API group ("" also matches the core group: write
	// group: core to mean the core group alone).
	Group     string `json:"group,omitempty"`
	Kind      string `json:"kind,omitempty"`
	Name      string `json:"name,omitempty"`
	Namespace string `json:"namespace,omitempty"`
	// LabelSelector is a label selector in kubectl's form, e.g.
	// "app=web,tier in (front)", matched on the object's manifest labels.
	LabelSelector string `json:"labelSelector,omitempty"`
}

// ModeOrOff is d's mode, DriftOff when d is nil or sets none.
func (d *Drift) ModeOrOff() string {
	if d == nil || d.Mode == "" {
		return DriftOff
	}
	return d.Mode
}

// Enabled reports whether the release's objects are checked at all.
func (d *Drift) Enabled() bool { return d.ModeOrOff() != DriftOff }

// defaultDrift gives a release spec without a drift policy its spec's: the
// same value, so that validation reports a problem of it once, at the spec.
func defaultDrift(spec *Spec, rs *ReleaseSpec) {
	if rs.Drift == nil {
		rs.Drift = spec.Drift
	}
}

// validateDrift checks the drift policy d at path p.
func validateDrift(c *checker, p string, d *Drift) {
	if d == nil {
		return
	}
	switch d.Mode {
	case "", DriftOff, DriftWarn, DriftCorrect:
	default:
		c.add(p+".mode", "must be %s, %s or %s, got %q", DriftOff, DriftWarn, DriftCorrect, d.Mode)
	}
	for i, r := range d.Ignore {
		rp := fmt.Sprintf("%s.ignore[%d]", p, i)
		if len(r.Paths) == 0 && len(r.Managers) == 0 {
			c.add(rp, "ignores nothing: give `paths` (JSON pointers such as /spec/replicas) or `managers` (field managers such as kube-controller-manager), or both")
		}
		for j, ptr := range r.Paths {
			if msg := checkPointer(ptr); msg != "" {
				c.add(fmt.Sprintf("%s.paths[%d]", rp, j), "%q %s", ptr, msg)
			}
		}
		for j, m := range r.Managers {
			if strings.TrimSpace(m) == "" {
				c.add(fmt.Sprintf("%s.managers[%d]", rp, j), "must be a field manager's name, as the objects' managedFields show it (e.g. kube-controller-manager)")
			}
		}
		if t := r.Target; t != nil {
			tp := rp + ".target"
			if t.Group != "" && t.Group != "core" {
				c.field(tp+".group", t.Group, "dns1123subdomain", "API group "+msgDNSSubdomain+" (core for the core group)")
			}
			if t.Namespace != "" {
				c.field(tp+".namespace", t.Namespace, "dns1123label", msgDNSLabel)
			}
			if t.Name != "" {
				c.field(tp+".name", t.Name, "dns1123subdomain", "object name "+msgDNSSubdomain)
			}
			if t.Kind != "" && len(k8svalidation.IsCIdentifier(t.Kind)) > 0 {
				c.add(tp+".kind", "%q is not a kind: write it as in the object's `kind`, e.g. Deployment", t.Kind)
			}
			if t.LabelSelector != "" {
				if _, err := labels.Parse(t.LabelSelector); err != nil {
					c.add(tp+".labelSelector", "is not a label selector (write it as kubectl's -l, e.g. app=web,tier in (front)): %v", err)
				}
			}
		}
	}
}

// checkPointer says what is wrong with ptr as an RFC 6901 JSON pointer, ""
// when nothing is.
func checkPointer(ptr string) string {
	if ptr == "" {
		return ""
	}
	if !strings.HasPrefix(ptr, "/") {
		return "is not a JSON pointer: it starts with /, e.g. /spec/replicas (\"\" is the whole object)"
	}
	for _, tok := range strings.Split(ptr[1:], "/") {
		for i := 0; i < len(tok); i++ {
			if tok[i] == '~' && (i+1 == len(tok) || (tok[i+1] != '0' && tok[i+1] != '1')) {
				return "has a ~ that is not ~0 (a ~) or ~1 (a /): write a / inside a key as ~1, e.g. /metadata/annotations/example.com~1note"
			}
		}
	}
	return ""
}
