package config

import (
	"fmt"
	"net/url"
	"sort"
	"strings"
	"sync"

	"github.com/go-playground/validator/v10"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	k8svalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
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
		t := &spec.Trigger
		if t.Labels == nil {
			t.Labels = []string{DefaultTriggerLabel}
		}
		selector := t.IsSelector()
		if selector {
			normalizeSelector(t.Selector)
			// Only when the trigger sets none: both set is reported by
			// validate, which needs to see both.
			if t.MaxObjects == 0 {
				t.MaxObjects, spec.MaxObjects = spec.MaxObjects, 0
			}
			if t.MaxObjects == 0 {
				t.MaxObjects = DefaultMaxObjects
			}
		}
		for id, rs := range spec.ReleaseSpecs {
			if rs == nil {
				continue
			}
			if rs.ReleaseName == "" {
				if selector {
					rs.ReleaseName = DefaultSelectorReleaseName
				} else {
					rs.ReleaseName = name + "-" + id
				}
			}
			// For a selector trigger without a namespace this stays "":
			// ForObject puts in each object's namespace.
			if rs.Namespace == "" {
				rs.Namespace = spec.Trigger.Namespace
			}
			if rs.OnChange == "" {
				rs.OnChange = OnChangeUpgrade
			}
			defaultValuesFrom(rs)
			defaultKeyring(rs)
			defaultPolicies(spec, rs)
		}
	}
}

// normalizeSelector writes an empty list or map as omitted, so that
// `matchLabels: {}` and no matchLabels are the same spec to Diff.
func normalizeSelector(ls *metav1.LabelSelector) {
	if len(ls.MatchLabels) == 0 {
		ls.MatchLabels = nil
	}
	if len(ls.MatchExpressions) == 0 {
		ls.MatchExpressions = nil
	}
	for i := range ls.MatchExpressions {
		if len(ls.MatchExpressions[i].Values) == 0 {
			ls.MatchExpressions[i].Values = nil
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
		validateTrigger(c, sp, spec)
		validateSpecTrust(c, sp, spec)
		validateDrift(c, sp+".drift", spec.Drift)
		selector := spec.Trigger.IsSelector()

		// Two specs on one object would fight over its releases; the version is
		// only the API version, the object is the same. Objects that selectors
		// match are only known at run time, which checks them there.
		t := spec.Trigger
		key := strings.Join([]string{t.Group, t.Resource, t.Namespace, t.Name}, "/")
		if !selector && t.Name != "" { // a missing name is reported by validateTrigger
			if first, dup := triggerOwner[key]; dup {
				c.add(sp+".trigger", "the same trigger object (group %q, resource %q, namespace %q, name %q) is already used by spec %q; specs %q and %q must name different objects, merge them into one spec",
					t.Group, t.Resource, t.Namespace, t.Name, first, first, name)
			} else {
				triggerOwner[key] = name
			}
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
			validateReleaseSpec(c, rp, rs, cfg, selector)
			if rs.Drift != spec.Drift { // inherited: reported at the spec
				validateDrift(c, rp+".drift", rs.Drift)
			}
			if selector {
				continue // names per object: validateSelectorNames, and the run time
			}
			rk := rs.Namespace + "/" + rs.ReleaseName
			if first, dup := releaseOwner[rk]; dup {
				c.add(rp+".releaseName", "release %q in namespace %q is already used by %s; give one of them another releaseName", rs.ReleaseName, rs.Namespace, first)
			} else {
				releaseOwner[rk] = rp
			}
		}
		if selector {
			validateSelectorNames(c, sp, name, spec, cfg)
		}
		validateDependsOn(c, sp, spec)
	}
	sort.SliceStable(c.problems, func(i, j int) bool { return c.problems[i].Path < c.problems[j].Path })
	return c.problems
}

func validateTrigger(c *checker, sp string, spec *Spec) {
	p := sp + ".trigger"
	t := &spec.Trigger
	if t.Group != "" {
		c.field(p+".group", t.Group, "dns1123subdomain", "API group "+msgDNSSubdomain+` (use "" or omit it for the core group)`)
	}
	if c.field(p+".version", t.Version, "required", "required, e.g. v1") {
		c.field(p+".version", t.Version, "dns1123label", "must be an API version such as v1 or v1beta1")
	}
	if c.field(p+".resource", t.Resource, "required", "required: the plural resource name, e.g. deployments") {
		c.field(p+".resource", t.Resource, "dns1123label", "must be a plural resource name in lower case, e.g. deployments")
	}
	switch {
	case t.Name != "" && t.Selector != nil:
		c.add(p, "set either `name` (one trigger object) or `selector` (every object it matches), not both")
	case t.Name == "" && t.Selector == nil:
		c.add(p, "required: `name` of the trigger object, or `selector` with matchLabels or matchExpressions for every object they match")
	}
	if t.Name != "" {
		c.field(p+".name", t.Name, "dns1123subdomain", "object name "+msgDNSSubdomain)
	}
	if t.IsSelector() {
		validateSelector(c, p+".selector", t)
		if t.Namespace != "" {
			c.field(p+".namespace", t.Namespace, "dns1123label", msgDNSLabel)
		}
		// applyDefaults moved a spec-level maxObjects to the trigger unless
		// both were set.
		if spec.MaxObjects != 0 {
			c.add(sp+".maxObjects", "is set here and at %s.maxObjects; set it in one place only", p)
		}
	} else {
		if c.field(p+".namespace", t.Namespace, "required", "required: the trigger object's namespace") {
			c.field(p+".namespace", t.Namespace, "dns1123label", msgDNSLabel)
		}
		const onlySelector = "is only for a selector trigger: a named trigger is one object; remove it"
		if t.MaxObjects != 0 {
			c.add(p+".maxObjects", onlySelector)
		}
		if spec.MaxObjects != 0 {
			c.add(sp+".maxObjects", onlySelector)
		}
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

// validateSelector checks a trigger's label selector as the API server checks
// one, each problem at its YAML path, and keeps the parsed selector on t so
// that Matches never parses or fails.
func validateSelector(c *checker, p string, t *Trigger) {
	ls := t.Selector
	if len(ls.MatchLabels) == 0 && len(ls.MatchExpressions) == 0 {
		c.add(p, "is empty and would match every object; give matchLabels or matchExpressions, or use `name` for one object")
		return
	}
	var errs field.ErrorList
	// One label at a time, in key order, so that each problem names its key
	// and the lines come out in the same order on every run.
	for _, k := range sortedKeys(ls.MatchLabels) {
		errs = append(errs, metav1validation.ValidateLabels(map[string]string{k: ls.MatchLabels[k]}, field.NewPath(p+".matchLabels."+k))...)
	}
	exprs := metav1.LabelSelector{MatchExpressions: ls.MatchExpressions}
	errs = append(errs, metav1validation.ValidateLabelSelector(&exprs, metav1validation.LabelSelectorValidationOptions{}, field.NewPath(p))...)
	for _, e := range errs {
		c.add(e.Field, "%s%s", e.ErrorBody(), selectorHint(e))
	}
	if len(errs) > 0 {
		return
	}
	sel, err := metav1.LabelSelectorAsSelector(ls)
	if err != nil {
		c.add(p, "is not a usable label selector: %v", err)
		return
	}
	t.selector = sel
}

// selectorHint says what to write for an API server selector error, whose
// own text only says what is wrong.
func selectorHint(e *field.Error) string {
	switch {
	case strings.HasSuffix(e.Field, ".operator"):
		return "; write In, NotIn, Exists or DoesNotExist"
	case strings.HasSuffix(e.Field, ".values") && e.Type == field.ErrorTypeRequired:
		return "; list the label values to compare with"
	case strings.HasSuffix(e.Field, ".values") && e.Type == field.ErrorTypeForbidden:
		return "; remove `values`"
	case strings.HasSuffix(e.Field, "]"):
		return "; quote a value that YAML would read as a boolean or a number"
	}
	return ""
}

// sampleObject is the object name a selector spec's releaseName templates are
// rendered for at validation: any real name gives a name of the same form,
// and names over 53 characters are shortened the same way.
const sampleObject = "sample"

// validateSelectorNames checks the releaseName templates of selector spec
// spec: each parses and uses .Name, renders to a valid Helm release name, and
// no two release specs give the same release for one object. Templates can
// still differ per object (an {{if}} on .Name); the run time checks each.
func validateSelectorNames(c *checker, sp, specName string, spec *Spec, cfg *Config) {
	ids := spec.ReleaseSpecIDs()
	usable := map[string]bool{}
	for _, id := range ids {
		rs := spec.ReleaseSpecs[id]
		if rs == nil {
			continue
		}
		p := sp + ".releaseSpecs." + id + ".releaseName"
		t, err := parseReleaseName(rs.ReleaseName)
		if err != nil {
			c.add(p, "%v", err)
			continue
		}
		if !usesName(t) {
			c.add(p, "template %q does not use .Name, so every matching object would get the same release; put {{.Name}} in it, e.g. %q", rs.ReleaseName, DefaultSelectorReleaseName)
			continue
		}
		usable[id] = true
	}
	namespaces := cfg.TriggerNamespaces(spec.Trigger)
	if len(namespaces) == 0 {
		namespaces = []string{"default"} // no managed namespace: reported on `namespaces`
	}
	reported := map[string]bool{}
	for _, ns := range namespaces {
		owner := map[string]string{} // namespace/release -> release spec id
		for _, id := range ids {
			if !usable[id] || reported[id] {
				continue
			}
			rs := spec.ReleaseSpecs[id]
			p := sp + ".releaseSpecs." + id + ".releaseName"
			name, err := renderReleaseName(rs.ReleaseName, specName, id, ns, sampleObject)
			if err != nil {
				c.add(p, "%v (checked with a sample object)", err)
				reported[id] = true
				continue
			}
			rns := rs.Namespace
			if rns == "" {
				rns = ns
			}
			k := rns + "/" + name
			if first, dup := owner[k]; dup {
				c.add(p, "template %q gives release %q in namespace %q for object %s/%s, as release spec %q does: one release cannot serve two release specs; make the names differ, e.g. with {{.ReleaseSpec}}", rs.ReleaseName, name, rns, ns, sampleObject, first)
				reported[id] = true
				continue
			}
			owner[k] = id
		}
	}
}

// validateReleaseSpec checks one release spec; selector says whether its spec
// has a selector trigger, whose release names are templates and whose
// namespace may be left to each object.
func validateReleaseSpec(c *checker, p string, rs *ReleaseSpec, cfg *Config, selector bool) {
	switch {
	case selector:
		// a template: validateSelectorNames
	case strings.Contains(rs.ReleaseName, "{{"):
		c.add(p+".releaseName", "%q is a template, but templates are only for selector triggers (one release per matching object); write a plain release name, or give the trigger a `selector`", rs.ReleaseName)
	default:
		c.field(p+".releaseName", rs.ReleaseName, "helmrelease",
			fmt.Sprintf("%q is not a valid Helm release name: lower-case letters, digits, '-' and '.', at most 53 characters (the default is <spec>-<id>; set releaseName to a shorter one)", rs.ReleaseName))
	}
	if selector && rs.Namespace == "" {
		// each object's own namespace, which is managed: TriggerNamespaces
	} else if c.field(p+".namespace", rs.Namespace, "dns1123label", msgDNSLabel) && !cfg.Manages(rs.Namespace) {
		c.add(p+".namespace", "release namespace %q is not listed in `namespaces`; add it there or set another namespace", rs.Namespace)
	}
	c.field(p+".onChange", rs.OnChange, "onchange", fmt.Sprintf("must be %q or %q, got %q", OnChangeUpgrade, OnChangeReinstall, rs.OnChange))
	if _, has := rs.Values[InjectedValuesKey]; has {
		c.add(p+".values."+InjectedValuesKey, "is reserved: autox sets it to the trigger's identity and labels; rename your key")
	}
	validateValuesFrom(c, p+".valuesFrom", rs.ValuesFrom)
	validateTrust(c, p, rs)
	validatePolicies(c, p, rs)

	ch := rs.Chart
	cp := p + ".chart"
	switch {
	case ch.Path != "" && (ch.Repo != "" || ch.Name != "" || ch.Version != ""):
		c.add(cp, "set either `path`, or `repo` with `name` and `version`, not both")
	case ch.Path != "":
		// The chart itself is loaded when it is used; a missing file is an
		// error of that release spec, not of the whole config.
		if ch.PlainHTTP {
			c.add(cp+".plainHTTP", "is only for oci:// registries, not a chart path: remove plainHTTP")
		}
	case ch.Repo == "":
		c.add(cp, "required: `path` (a chart directory or .tgz relative to the config file), or `repo` with `name` and `version`")
	default:
		if u, err := url.Parse(ch.Repo); err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https" && u.Scheme != "oci") {
			c.add(cp+".repo", "must be an http://, https:// or oci:// URL with a host")
		}
		if ch.PlainHTTP && !strings.HasPrefix(ch.Repo, "oci://") {
			c.add(cp+".plainHTTP", "is only for oci:// registries; an http(s) repository says its scheme in repo: remove plainHTTP")
		}
		c.field(cp+".name", ch.Name, "required", "required when chart.repo is set")
		c.field(cp+".version", ch.Version, "required", "required when chart.repo is set: an exact chart version")
	}
}
