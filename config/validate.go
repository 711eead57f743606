package config

import (
	"fmt"
	"net/url"
	"sort"
	"strings"
	"sync"

	"github.com/go-playground/validator/v10"
	"helm.sh/helm/v3/pkg/chartutil"
	k8svalidation "k8s.io/apimachinery/pkg/util/validation"
)

// applyDefaults fills in what the user may omit (DESIGN §2).
func applyDefaults(cfg *Config) {
	if cfg.Specs == nil {
		cfg.Specs = map[string]*Spec{}
	}
	for name, spec := range cfg.Specs {
		if spec == nil {
			continue // reported by validate
		}
		if spec.Trigger.Labels == nil {
			spec.Trigger.Labels = []string{DefaultTriggerLabel}
		}
		for id, rs := range spec.ReleaseSpecs {
			if rs == nil {
				continue
			}
			if rs.ReleaseName == "" {
				rs.ReleaseName = name + "-" + id
			}
			if rs.Namespace == "" {
				rs.Namespace = spec.Trigger.Namespace
			}
			if rs.OnChange == "" {
				rs.OnChange = OnChangeUpgrade
			}
			defaultValuesFrom(rs)
		}
	}
}

var (
	validatorOnce sync.Once
	theValidator  *validator.Validate
)

// fieldValidator returns the shared validator with autox's Kubernetes- and
// Helm-specific tags registered.
func fieldValidator() *validator.Validate {
	validatorOnce.Do(func() {
		v := validator.New()
		reg := func(tag string, ok func(string) bool) {
			// RegisterValidation only fails on an empty tag or nil func.
			_ = v.RegisterValidation(tag, func(fl validator.FieldLevel) bool { return ok(fl.Field().String()) })
		}
		reg("dns1123label", func(s string) bool { return len(k8svalidation.IsDNS1123Label(s)) == 0 })
		reg("dns1123subdomain", func(s string) bool { return len(k8svalidation.IsDNS1123Subdomain(s)) == 0 })
		reg("labelkey", func(s string) bool { return len(k8svalidation.IsQualifiedName(s)) == 0 })
		reg("helmrelease", func(s string) bool { return chartutil.ValidateReleaseName(s) == nil })
		reg("onchange", func(s string) bool { return s == OnChangeUpgrade || s == OnChangeReinstall })
		theValidator = v
	})
	return theValidator
}

// checker collects problems; each check names the YAML path it is about.
type checker struct {
	problems []Problem
}

func (c *checker) add(path, format string, args ...interface{}) {
	c.problems = append(c.problems, Problem{path, fmt.Sprintf(format, args...)})
}

// field runs validator tags on one value and, when they fail, records msg.
func (c *checker) field(path string, value interface{}, tags, msg string) bool {
	if err := fieldValidator().Var(value, tags); err != nil {
		c.problems = append(c.problems, Problem{path, msg})
		return false
	}
	return true
}

const (
	msgDNSLabel     = "must be a DNS-1123 label: lower-case letters, digits and '-', starting and ending with a letter or digit, at most 63 characters"
	msgDNSSubdomain = "must be a DNS-1123 subdomain: lower-case letters, digits, '-' and '.', at most 253 characters"
)

// validate checks a defaulted config and returns every problem, sorted by path.
func validate(cfg *Config) []Problem {
	c := &checker{}

	if len(cfg.Namespaces) == 0 {
		c.add("namespaces", "must list at least one namespace that autox manages releases in")
	}
	seenNS := map[string]bool{}
	for i, ns := range cfg.Namespaces {
		p := fmt.Sprintf("namespaces[%d]", i)
		c.field(p, ns, "required,dns1123label", msgDNSLabel)
		if seenNS[ns] {
			c.add(p, "namespace %q is listed twice", ns)
		}
		seenNS[ns] = true
	}

	triggerOwner := map[string]string{} // trigger identity -> first spec using it
	releaseOwner := map[string]string{} // namespace/release -> path of the first release spec
	for _, name := range cfg.SpecNames() {
		spec := cfg.Specs[name]
		sp := "specs." + name
		c.field(sp, name, "dns1123label", "spec name "+msgDNSLabel)
		if spec == nil {
			c.add(sp, "must be a map with `trigger` and `releaseSpecs`")
			continue
		}
		validateTrigger(c, sp+".trigger", &spec.Trigger)

		// Two specs on one object would fight over its releases; the version is
		// only the API version, the object is the same.
		t := spec.Trigger
		key := strings.Join([]string{t.Group, t.Resource, t.Namespace, t.Name}, "/")
		if first, dup := triggerOwner[key]; dup {
			c.add(sp+".trigger", "the same trigger object (group %q, resource %q, namespace %q, name %q) is already used by spec %q; specs %q and %q must name different objects, merge them into one spec",
				t.Group, t.Resource, t.Namespace, t.Name, first, first, name)
		} else {
			triggerOwner[key] = name
		}

		if len(spec.ReleaseSpecs) == 0 {
			c.add(sp+".releaseSpecs", "required: at least one release spec")
		}
		for _, id := range spec.ReleaseSpecIDs() {
			rp := sp + ".releaseSpecs." + id
			c.field(rp, id, "dns1123label", "release spec id "+msgDNSLabel)
			rs := spec.ReleaseSpecs[id]
			if rs == nil {
				c.add(rp, "must be a map with at least `chart`")
				continue
			}
			validateReleaseSpec(c, rp, rs, cfg)
			rk := rs.Namespace + "/" + rs.ReleaseName
			if first, dup := releaseOwner[rk]; dup {
				c.add(rp+".releaseName", "release %q in namespace %q is already used by %s; give one of them another releaseName", rs.ReleaseName, rs.Namespace, first)
			} else {
				releaseOwner[rk] = rp
			}
		}
	}
	sort.SliceStable(c.problems, func(i, j int) bool { return c.problems[i].Path < c.problems[j].Path })
	return c.problems
}

func validateTrigger(c *checker, p string, t *Trigger) {
	if t.Group != "" {
		c.field(p+".group", t.Group, "dns1123subdomain", "API group "+msgDNSSubdomain+` (use "" or omit it for the core group)`)
	}
	if c.field(p+".version", t.Version, "required", "required, e.g. v1") {
		c.field(p+".version", t.Version, "dns1123label", "must be an API version such as v1 or v1beta1")
	}
	if c.field(p+".resource", t.Resource, "required", "required: the plural resource name, e.g. deployments") {
		c.field(p+".resource", t.Resource, "dns1123label", "must be a plural resource name in lower case, e.g. deployments")
	}
	if c.field(p+".name", t.Name, "required", "required: the trigger object's name") {
		c.field(p+".name", t.Name, "dns1123subdomain", "object name "+msgDNSSubdomain)
	}
	if c.field(p+".namespace", t.Namespace, "required", "required: the trigger object's namespace") {
		c.field(p+".namespace", t.Namespace, "dns1123label", msgDNSLabel)
	}
	seen := map[string]bool{}
	for i, l := range t.Labels {
		lp := fmt.Sprintf("%s.labels[%d]", p, i)
		c.field(lp, l, "required,labelkey", "must be a label key such as app.kubernetes.io/version")
		if seen[l] {
			c.add(lp, "label %q is listed twice", l)
		}
		seen[l] = true
	}
}

func validateReleaseSpec(c *checker, p string, rs *ReleaseSpec, cfg *Config) {
	c.field(p+".releaseName", rs.ReleaseName, "helmrelease",
		fmt.Sprintf("%q is not a valid Helm release name: lower-case letters, digits, '-' and '.', at most 53 characters (the default is <spec>-<id>; set releaseName to a shorter one)", rs.ReleaseName))
	if c.field(p+".namespace", rs.Namespace, "dns1123label", msgDNSLabel) && !cfg.Manages(rs.Namespace) {
		c.add(p+".namespace", "release namespace %q is not listed in `namespaces`; add it there or set another namespace", rs.Namespace)
	}
	c.field(p+".onChange", rs.OnChange, "onchange", fmt.Sprintf("must be %q or %q, got %q", OnChangeUpgrade, OnChangeReinstall, rs.OnChange))
	if _, has := rs.Values[InjectedValuesKey]; has {
		c.add(p+".values."+InjectedValuesKey, "is reserved: autox sets it to the trigger's identity and labels; rename your key")
	}
	validateValuesFrom(c, p+".valuesFrom", rs.ValuesFrom)

	ch := rs.Chart
	cp := p + ".chart"
	switch {
	case ch.Path != "" && (ch.Repo != "" || ch.Name != "" || ch.Version != ""):
		c.add(cp, "set either `path`, or `repo` with `name` and `version`, not both")
	case ch.Path != "":
		// The chart itself is loaded when it is used; a missing file is an
		// error of that release spec, not of the whole config.
	case ch.Repo == "":
		c.add(cp, "required: `path` (a chart directory or .tgz relative to the config file), or `repo` with `name` and `version`")
	default:
		if u, err := url.Parse(ch.Repo); err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https" && u.Scheme != "oci") {
			c.add(cp+".repo", "must be an http://, https:// or oci:// URL with a host")
		}
		c.field(cp+".name", ch.Name, "required", "required when chart.repo is set")
		c.field(cp+".version", ch.Version, "required", "required when chart.repo is set: an exact chart version")
	}
}
