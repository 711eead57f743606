package config

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const selBase = `
namespaces: [default, exp]
specs:
  s:
    trigger: {group: apps, version: v1, resource: deployments, selector: {matchLabels: {team: a}}}
    releaseSpecs:
      x: {chart: {path: charts/x}}
`

const (
	selLine = "selector: {matchLabels: {team: a}}"
	rsLine  = "x: {chart: {path: charts/x}}"
)

// sel returns selBase with one replacement of old by new (each must occur).
func sel(t *testing.T, pairs ...string) string {
	t.Helper()
	s := selBase
	for i := 0; i+1 < len(pairs); i += 2 {
		if !strings.Contains(s, pairs[i]) {
			t.Fatalf("selBase has no %q", pairs[i])
		}
		s = strings.Replace(s, pairs[i], pairs[i+1], 1)
	}
	return s
}

func mustParse(t *testing.T, yaml string) *Config {
	t.Helper()
	cfg, err := Parse([]byte(yaml), "/cfg")
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return cfg
}

func TestSelectorDefaults(t *testing.T) {
	s := mustParse(t, selBase).Specs["s"]
	tr := s.Trigger
	if !tr.IsSelector() || tr.Name != "" || tr.Namespace != "" {
		t.Errorf("trigger = %+v", tr)
	}
	if tr.MaxObjects != DefaultMaxObjects || s.MaxObjects != 0 {
		t.Errorf("maxObjects: trigger %d, spec %d", tr.MaxObjects, s.MaxObjects)
	}
	if !reflect.DeepEqual(tr.Labels, []string{DefaultTriggerLabel}) {
		t.Errorf("labels = %v", tr.Labels)
	}
	x := s.ReleaseSpecs["x"]
	if x.ReleaseName != DefaultSelectorReleaseName || x.Namespace != "" || x.OnChange != OnChangeUpgrade {
		t.Errorf("x = %+v", x)
	}

	// A trigger namespace is the releases' default namespace, as for a named trigger.
	s = mustParse(t, sel(t, selLine, selLine+", namespace: exp")).Specs["s"]
	if got := s.ReleaseSpecs["x"].Namespace; got != "exp" {
		t.Errorf("release namespace = %q, want the trigger's", got)
	}

	// maxObjects at spec level is an alias: it ends up on the trigger.
	s = mustParse(t, sel(t, "    trigger:", "    maxObjects: 7\n    trigger:")).Specs["s"]
	if s.Trigger.MaxObjects != 7 || s.MaxObjects != 0 {
		t.Errorf("alias: trigger %d, spec %d", s.Trigger.MaxObjects, s.MaxObjects)
	}
	s = mustParse(t, sel(t, selLine, selLine+", maxObjects: 1")).Specs["s"]
	if s.Trigger.MaxObjects != 1 {
		t.Errorf("maxObjects = %d", s.Trigger.MaxObjects)
	}

	// A named trigger has no bound.
	if n := mustParse(t, base).Specs["a"].Trigger; n.IsSelector() || n.MaxObjects != 0 {
		t.Errorf("named trigger = %+v", n)
	}
}

func TestSelectorValid(t *testing.T) {
	for name, yaml := range map[string]string{
		"expressions only":  sel(t, selLine, "selector: {matchExpressions: [{key: tier, operator: Exists}, {key: env, operator: NotIn, values: [prod]}]}"),
		"empty label value": sel(t, selLine, `selector: {matchLabels: {team: ""}}`),
		"same name, other namespaces": sel(t, rsLine, `x: {chart: {path: charts/x}, releaseName: "{{.Name}}", namespace: default}
      z: {chart: {path: charts/x}, releaseName: "{{.Name}}", namespace: exp}`),
		"$.Name and functions":     sel(t, rsLine, `x: {chart: {path: charts/x}, releaseName: "{{printf \"%s-%s\" $.Name .ReleaseSpec}}"}`),
		"name in a branch":         sel(t, rsLine, `x: {chart: {path: charts/x}, releaseName: "{{if .Name}}{{.Name}}{{else}}none{{end}}-x"}`),
		"long names are shortened": sel(t, rsLine, `x: {chart: {path: charts/x}, releaseName: "{{.Name}}-`+strings.Repeat("z", 60)+`"}`),
		// Objects that selectors match are only known at run time: two
		// selector specs alike, or a selector spec whose release names look
		// like a named spec's, are left to the run-time conflict check.
		"two selector specs alike": selBase + `  t:
    trigger: {group: apps, version: v1, resource: deployments, selector: {matchLabels: {team: a}}}
    releaseSpecs:
      x: {chart: {path: charts/x}, releaseName: "{{.Name}}-x"}
`,
		"named and selector": base + `  s:
    trigger: {group: apps, version: v1, resource: deployments, selector: {matchLabels: {team: a}}}
    releaseSpecs:
      x: {chart: {path: charts/x}, releaseName: "a-{{.Name}}"}
`,
	} {
		t.Run(name, func(t *testing.T) { mustParse(t, yaml) })
	}
}

// TestSelectorInvalid checks each selector rule: the YAML path and what to write.
func TestSelectorInvalid(t *testing.T) {
	cases := []struct {
		name string
		yaml string
		want []string
	}{
		{"name and selector", sel(t, selLine, selLine+", name: web, namespace: default"),
			[]string{"specs.s.trigger: set either `name` (one trigger object) or `selector`"}},
		{"neither", sel(t, selLine, "namespace: default"),
			[]string{"specs.s.trigger: required: `name` of the trigger object, or `selector`"}},
		{"empty selector", sel(t, selLine, "selector: {}"),
			[]string{"specs.s.trigger.selector: is empty and would match every object"}},
		{"empty lists", sel(t, selLine, "selector: {matchLabels: {}, matchExpressions: []}"),
			[]string{"specs.s.trigger.selector: is empty"}},
		{"selector null", sel(t, selLine, "selector: "),
			[]string{"specs.s.trigger.selector: has no value; write `matchLabels` and/or `matchExpressions`"}},
		{"unknown selector field", sel(t, selLine, "selector: {matchLabel: {team: a}}"),
			[]string{"specs.s.trigger.selector.matchLabel: unknown field; known fields here: matchLabels, matchExpressions"}},
		{"unknown expression field", sel(t, selLine, "selector: {matchExpressions: [{key: a, operator: Exists, value: x}]}"),
			[]string{"specs.s.trigger.selector.matchExpressions[0].value: unknown field"}},
		{"selector not a map", sel(t, selLine, "selector: team=a"),
			[]string{"specs.s.trigger.selector: must be a map, got a string"}},
		{"label value a boolean", sel(t, selLine, "selector: {matchLabels: {enabled: yes}}"),
			[]string{"specs.s.trigger.selector.matchLabels.enabled: must be a string, got the boolean true", "quote"}},
		{"label key a boolean", sel(t, selLine, "selector: {matchLabels: {on: x}}"),
			[]string{"specs.s.trigger.selector.matchLabels: the key true is read as a bool"}},
		{"label value null", sel(t, selLine, "selector: {matchLabels: {team: }}"),
			[]string{"specs.s.trigger.selector.matchLabels.team: has no value; write the label value, quoted"}},
		{"expression values a number", sel(t, selLine, "selector: {matchExpressions: [{key: v, operator: In, values: [1.10]}]}"),
			[]string{"specs.s.trigger.selector.matchExpressions[0].values[0]: must be a string, got the number 1.1"}},
		{"bad label key", sel(t, selLine, "selector: {matchLabels: {Bad Key: a}}"),
			[]string{`specs.s.trigger.selector.matchLabels.Bad Key: Invalid value: "Bad Key"`}},
		{"bad label value", sel(t, selLine, "selector: {matchLabels: {team: -a-}}"),
			[]string{`specs.s.trigger.selector.matchLabels.team: Invalid value: "-a-"`}},
		{"bad operator", sel(t, selLine, "selector: {matchExpressions: [{key: a, operator: Equals, values: [x]}]}"),
			[]string{`specs.s.trigger.selector.matchExpressions[0].operator: Invalid value: "Equals": not a valid selector operator; write In, NotIn, Exists or DoesNotExist`}},
		{"In without values", sel(t, selLine, "selector: {matchExpressions: [{key: a, operator: In}]}"),
			[]string{"specs.s.trigger.selector.matchExpressions[0].values: Required value", "list the label values"}},
		{"Exists with values", sel(t, selLine, "selector: {matchExpressions: [{key: a, operator: Exists, values: [x]}]}"),
			[]string{"specs.s.trigger.selector.matchExpressions[0].values: Forbidden", "remove `values`"}},
		{"bad expression key", sel(t, selLine, "selector: {matchExpressions: [{key: '-a', operator: Exists}]}"),
			[]string{`specs.s.trigger.selector.matchExpressions[0].key: Invalid value: "-a"`}},
		{"bad expression value", sel(t, selLine, "selector: {matchExpressions: [{key: a, operator: In, values: [ok, 'a b']}]}"),
			[]string{`specs.s.trigger.selector.matchExpressions[0].values[1]: Invalid value: "a b"`}},
		{"bad trigger namespace", sel(t, selLine, selLine+", namespace: Exp_1"),
			[]string{"specs.s.trigger.namespace: must be a DNS-1123 label"}},

		{"maxObjects 0", sel(t, selLine, selLine+", maxObjects: 0"),
			[]string{"specs.s.trigger.maxObjects: must be at least 1, got 0; omit it for the default 100"}},
		{"maxObjects negative", sel(t, selLine, selLine+", maxObjects: -3"),
			[]string{"specs.s.trigger.maxObjects: must be at least 1, got -3"}},
		{"maxObjects a string", sel(t, selLine, selLine+`, maxObjects: "5"`),
			[]string{"specs.s.trigger.maxObjects: must be a whole number, got a string"}},
		{"maxObjects a fraction", sel(t, selLine, selLine+", maxObjects: 1.5"),
			[]string{"specs.s.trigger.maxObjects: must be a whole number such as 100, got 1.5"}},
		{"maxObjects too large", sel(t, selLine, selLine+", maxObjects: 99999999999999999999"),
			[]string{"specs.s.trigger.maxObjects: must be a whole number"}},
		{"spec maxObjects 0", sel(t, "    trigger:", "    maxObjects: 0\n    trigger:"),
			[]string{"specs.s.maxObjects: must be at least 1"}},
		{"maxObjects twice", sel(t, "    trigger:", "    maxObjects: 5\n    trigger:", selLine, selLine+", maxObjects: 5"),
			[]string{"specs.s.maxObjects: is set here and at specs.s.trigger.maxObjects; set it in one place only"}},
		{"maxObjects on a named trigger", strings.Replace(base, "namespace: default}", "namespace: default, maxObjects: 5}", 1),
			[]string{"specs.a.trigger.maxObjects: is only for a selector trigger"}},
		{"spec maxObjects on a named trigger", strings.Replace(base, "    trigger:", "    maxObjects: 5\n    trigger:", 1),
			[]string{"specs.a.maxObjects: is only for a selector trigger"}},

		{"template does not parse", sel(t, rsLine, `x: {chart: {path: charts/x}, releaseName: "{{.Name"}`),
			[]string{`specs.s.releaseSpecs.x.releaseName: template "{{.Name" does not parse`, `write a Go template such as "{{.Name}}-{{.ReleaseSpec}}"`}},
		{"template without .Name", sel(t, rsLine, `x: {chart: {path: charts/x}, releaseName: "{{.Spec}}-{{.ReleaseSpec}}"}`),
			[]string{"specs.s.releaseSpecs.x.releaseName: template \"{{.Spec}}-{{.ReleaseSpec}}\" does not use .Name", "put {{.Name}} in it"}},
		{".Name only in a comment", sel(t, rsLine, `x: {chart: {path: charts/x}, releaseName: "{{/* .Name */}}x"}`),
			[]string{"does not use .Name"}},
		{"define", sel(t, rsLine, `x: {chart: {path: charts/x}, releaseName: "{{define \"n\"}}{{.Name}}{{end}}{{template \"n\" .}}-x"}`),
			[]string{"specs.s.releaseSpecs.x.releaseName: template", "defines templates ({{define}} or {{block}})"}},
		{"block", sel(t, rsLine, `x: {chart: {path: charts/x}, releaseName: "{{block \"n\" .}}{{.Name}}{{end}}"}`),
			[]string{"defines templates"}},
		{"undefined template", sel(t, rsLine, `x: {chart: {path: charts/x}, releaseName: "{{.Name}}{{template \"n\" .}}"}`),
			[]string{"cannot be rendered for object default/sample"}},
		{"plain name", sel(t, rsLine, `x: {chart: {path: charts/x}, releaseName: web-x}`),
			[]string{"specs.s.releaseSpecs.x.releaseName: template \"web-x\" does not use .Name"}},
		{"misspelt field", sel(t, rsLine, `x: {chart: {path: charts/x}, releaseName: "{{.Name}}-{{.namespace}}"}`),
			[]string{"specs.s.releaseSpecs.x.releaseName: template \"{{.Name}}-{{.namespace}}\" cannot be rendered for object default/sample", "use only .Spec, .ReleaseSpec, .Name and .Namespace", "(checked with a sample object)"}},
		{"renders an invalid name", sel(t, rsLine, `x: {chart: {path: charts/x}, releaseName: "{{.Name}}_X"}`),
			[]string{`specs.s.releaseSpecs.x.releaseName: template "{{.Name}}_X" gives "sample_X" for object default/sample, not a valid Helm release name`}},
		{"same name for two release specs", sel(t, rsLine, `x: {chart: {path: charts/x}, releaseName: "{{.Name}}"}
      z: {chart: {path: charts/x}, releaseName: "{{.Name}}"}`),
			[]string{`specs.s.releaseSpecs.z.releaseName: template "{{.Name}}" gives release "sample" in namespace "default" for object default/sample, as release spec "x" does`}},
		{"same name once the object's namespace is in", sel(t, rsLine, `x: {chart: {path: charts/x}, releaseName: "{{.Name}}"}
      z: {chart: {path: charts/x}, releaseName: "{{.Name}}", namespace: exp}`),
			[]string{`specs.s.releaseSpecs.z.releaseName: template "{{.Name}}" gives release "sample" in namespace "exp" for object exp/sample, as release spec "x" does`}},
		{"template in a named spec", strings.Replace(base, "{chart: {path: charts/x}}", `{chart: {path: charts/x}, releaseName: "{{.Name}}-x"}`, 1),
			[]string{"specs.a.releaseSpecs.x.releaseName: \"{{.Name}}-x\" is a template, but templates are only for selector triggers"}},
		{"release namespace not managed", sel(t, rsLine, `x: {chart: {path: charts/x}, namespace: other}`),
			[]string{"specs.s.releaseSpecs.x.namespace: release namespace \"other\" is not listed in `namespaces`"}},
		{"trigger namespace not managed", sel(t, selLine, selLine+", namespace: other"),
			[]string{"specs.s.releaseSpecs.x.namespace: release namespace \"other\" is not listed in `namespaces`"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { wantProblems(t, tc.yaml, tc.want) })
	}
}

func TestRenderReleaseName(t *testing.T) {
	got, err := RenderReleaseName(DefaultSelectorReleaseName, "web", "iter8", "default", "httpbin")
	if err != nil || got != "httpbin-iter8" {
		t.Errorf("default template: %q, %v", got, err)
	}
	got, err = RenderReleaseName("{{.Spec}}.{{.Namespace}}.{{.Name}}.{{.ReleaseSpec}}", "web", "iter8", "ns", "obj")
	if err != nil || got != "web.ns.obj.iter8" {
		t.Errorf("all fields: %q, %v", got, err)
	}

	// 53 characters is Helm's limit and stays as it is.
	n53 := strings.Repeat("a", 53)
	if got, err := RenderReleaseName("{{.Name}}", "s", "x", "ns", n53); err != nil || got != n53 {
		t.Errorf("53 characters: %q, %v", got, err)
	}
	// Longer: the first 40, "-", 12 hex digits of sha256 of the whole name.
	// The digits are part of config format v1 (a restart must find the same
	// releases), so they are written out here, not computed by the test.
	n54 := strings.Repeat("a", 54)
	want := strings.Repeat("a", 40) + "-a3f01b693925"
	got, err = RenderReleaseName("{{.Name}}", "s", "x", "ns", n54)
	if err != nil || got != want || len(got) != 53 {
		t.Errorf("54 characters: %q (%d), %v; want %q", got, len(got), err, want)
	}
	// Names that share their first 40 characters still differ.
	other, err := RenderReleaseName("{{.Name}}", "s", "x", "ns", strings.Repeat("a", 53)+"b")
	if err != nil || other == got || other[:41] != got[:41] {
		t.Errorf("other long name: %q, %v", other, err)
	}

	for _, tc := range []struct {
		name, tmpl, object string
		want               []string
	}{
		{"parse", "{{.Name", "obj", []string{"specs.web.releaseSpecs.iter8.releaseName: ", `template "{{.Name" does not parse`, "write a Go template"}},
		{"missing key", "{{.Name}}-{{.Nmae}}", "obj", []string{"specs.web.releaseSpecs.iter8.releaseName: ", "cannot be rendered for object ns/obj", "use only .Spec"}},
		{"invalid name", "{{.Name}}", "Obj", []string{`gives "Obj" for object ns/Obj, not a valid Helm release name`, "lower-case letters"}},
		{"empty", "{{.Name}}", "", []string{`gives "" for object ns/, not a valid Helm release name`}},
		{"prefix ends in a dot", "{{.Name}}", strings.Repeat("a", 39) + "." + strings.Repeat("b", 20), []string{"not a valid Helm release name"}},
		{"huge output", `{{printf "%0999999d" 0}}{{.Name}}`, "obj", []string{"cannot be rendered", "more than 4096 characters"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := RenderReleaseName(tc.tmpl, "web", "iter8", "ns", tc.object)
			if err == nil {
				t.Fatalf("want an error, got %q", got)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
	if _, err := RenderReleaseName("{{.Name}}", "web", "iter8", "ns", "Obj"); errors.Unwrap(err) == nil {
		t.Errorf("error does not wrap its cause: %v", err)
	}
}

func TestMatchesAndSelects(t *testing.T) {
	cfg := mustParse(t, sel(t, selLine, "selector: {matchLabels: {team: a}, matchExpressions: [{key: tier, operator: NotIn, values: [db]}]}"))
	tr := cfg.Specs["s"].Trigger
	for _, tc := range []struct {
		labels map[string]string
		want   bool
	}{
		{map[string]string{"team": "a"}, true},
		{map[string]string{"team": "a", "tier": "web"}, true},
		{map[string]string{"team": "a", "tier": "db"}, false},
		{map[string]string{"team": "b"}, false},
		{nil, false},
	} {
		if got := tr.Matches(tc.labels); got != tc.want {
			t.Errorf("Matches(%v) = %v", tc.labels, got)
		}
		if got := cfg.Selects(tr, "exp", tc.labels); got != tc.want {
			t.Errorf("Selects(exp, %v) = %v", tc.labels, got)
		}
	}
	if cfg.Selects(tr, "other", map[string]string{"team": "a"}) {
		t.Error("Selects an object in an unmanaged namespace")
	}
	if got := cfg.TriggerNamespaces(tr); !reflect.DeepEqual(got, []string{"default", "exp"}) {
		t.Errorf("TriggerNamespaces = %v", got)
	}
	cfg.TriggerNamespaces(tr)[0] = "changed"
	if cfg.Namespaces[0] != "default" {
		t.Error("TriggerNamespaces returned the config's own slice")
	}

	withNS := tr
	withNS.Namespace = "exp"
	if got := cfg.TriggerNamespaces(withNS); !reflect.DeepEqual(got, []string{"exp"}) {
		t.Errorf("TriggerNamespaces with a namespace = %v", got)
	}
	if cfg.Selects(withNS, "default", map[string]string{"team": "a"}) || !cfg.Selects(withNS, "exp", map[string]string{"team": "a"}) {
		t.Error("Selects ignores the trigger namespace")
	}

	named := mustParse(t, base)
	nt := named.Specs["a"].Trigger
	if nt.Matches(map[string]string{"team": "a"}) || named.Selects(nt, "default", nil) {
		t.Error("a named trigger matches by labels")
	}

	// Triggers built by hand (other packages' tests) match without Load.
	hand := Trigger{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}}
	if !hand.Matches(map[string]string{"team": "a"}) || hand.Matches(map[string]string{"team": "b"}) {
		t.Error("hand-built selector trigger")
	}
	if (Trigger{Selector: &metav1.LabelSelector{}}).Matches(map[string]string{"x": "y"}) {
		t.Error("an empty selector must match nothing")
	}
	bad := Trigger{Selector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Bad"}}}}
	if bad.Matches(map[string]string{"a": "x"}) {
		t.Error("an invalid selector must match nothing")
	}
}

func TestForObject(t *testing.T) {
	cfg := mustParse(t, sel(t, rsLine, `x: {chart: {path: charts/x}, values: {a: 1}}
      z: {chart: {path: charts/y}, releaseName: "{{.Spec}}-{{.Name}}-`+strings.Repeat("y", 50)+`", namespace: default, onChange: reinstall}`))
	s := cfg.Specs["s"]
	before := mustParse(t, sel(t, rsLine, `x: {chart: {path: charts/x}, values: {a: 1}}
      z: {chart: {path: charts/y}, releaseName: "{{.Spec}}-{{.Name}}-`+strings.Repeat("y", 50)+`", namespace: default, onChange: reinstall}`)).Specs["s"]

	o, err := s.ForObject("s", "exp", "web")
	if err != nil {
		t.Fatal(err)
	}
	tr := o.Trigger
	if tr.Name != "web" || tr.Namespace != "exp" || !tr.IsSelector() || tr.MaxObjects != DefaultMaxObjects ||
		!reflect.DeepEqual(tr.Labels, []string{DefaultTriggerLabel}) || tr.Group != "apps" || tr.Resource != "deployments" {
		t.Errorf("trigger = %+v", tr)
	}
	if !tr.Matches(map[string]string{"team": "a"}) {
		t.Error("the per-object trigger lost its selector")
	}
	x, y := o.ReleaseSpecs["x"], o.ReleaseSpecs["z"]
	if x.ReleaseName != "web-x" || x.Namespace != "exp" || x.OnChange != OnChangeUpgrade || x.Chart.Path != "charts/x" {
		t.Errorf("x = %+v", x)
	}
	if !reflect.DeepEqual(x.Values, map[string]interface{}{"a": float64(1)}) {
		t.Errorf("x values = %#v", x.Values)
	}
	wantY, _ := RenderReleaseName("{{.Spec}}-{{.Name}}-"+strings.Repeat("y", 50), "s", "z", "exp", "web")
	if y.ReleaseName != wantY || len(y.ReleaseName) != 53 || y.Namespace != "default" || y.OnChange != OnChangeReinstall {
		t.Errorf("y = %+v", y)
	}
	// The selector spec itself is unchanged: it serves every object.
	if !reflect.DeepEqual(s, before) || s.ReleaseSpecs["x"].ReleaseName != DefaultSelectorReleaseName || s.Trigger.Name != "" {
		t.Errorf("ForObject changed the spec: %+v", s)
	}
	o.Trigger.Labels[0] = "changed"
	if s.Trigger.Labels[0] != DefaultTriggerLabel {
		t.Error("ForObject shares the labels slice")
	}

	// An explicit empty labels list keeps meaning "existence is enough".
	e := mustParse(t, sel(t, selLine, selLine+", labels: []")).Specs["s"]
	if eo, err := e.ForObject("s", "default", "web"); err != nil || eo.Trigger.Labels == nil || len(eo.Trigger.Labels) != 0 {
		t.Errorf("empty labels: %#v, %v", eo, err)
	}

	if _, err := mustParse(t, base).Specs["a"].ForObject("a", "default", "a"); err == nil || !strings.Contains(err.Error(), `spec "a" has a named trigger`) {
		t.Errorf("named spec: %v", err)
	}
	_, err = s.ForObject("s", "exp", "Web")
	for _, w := range []string{`spec "s"`, `release spec "x"`, "object exp/Web", "specs.s.releaseSpecs.x.releaseName", "not a valid Helm release name"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("error %v does not contain %q", err, w)
		}
	}
	if _, err := s.ForObject("s", "", "web"); err == nil {
		t.Error("an object without a namespace")
	}
}

func TestDiffSelector(t *testing.T) {
	old := mustParse(t, selBase)
	if d := Diff(old, mustParse(t, selBase)); !d.Empty() {
		t.Errorf("the same selector config loaded twice differs: %+v", d)
	}
	// Empty lists are omitted ones; spec-level maxObjects is the trigger's.
	for name, same := range map[string]string{
		"empty expressions":   sel(t, selLine, "selector: {matchLabels: {team: a}, matchExpressions: []}"),
		"default maxObjects":  sel(t, selLine, selLine+", maxObjects: 100"),
		"spec-level default":  sel(t, "    trigger:", "    maxObjects: 100\n    trigger:"),
		"default releaseName": sel(t, rsLine, `x: {chart: {path: charts/x}, releaseName: "{{.Name}}-{{.ReleaseSpec}}"}`),
	} {
		if d := Diff(old, mustParse(t, same)); !d.Empty() {
			t.Errorf("%s: Diff = %+v", name, d)
		}
	}
	for name, changed := range map[string]string{
		"selector":    sel(t, selLine, "selector: {matchLabels: {team: b}}"),
		"expression":  sel(t, selLine, "selector: {matchLabels: {team: a}, matchExpressions: [{key: x, operator: Exists}]}"),
		"maxObjects":  sel(t, selLine, selLine+", maxObjects: 5"),
		"namespace":   sel(t, selLine, selLine+", namespace: exp"),
		"releaseName": sel(t, rsLine, `x: {chart: {path: charts/x}, releaseName: "{{.Name}}-y"}`),
	} {
		if d := Diff(old, mustParse(t, changed)); !reflect.DeepEqual(d.ChangedSpecs, []string{"s"}) {
			t.Errorf("%s: Diff = %+v", name, d)
		}
	}
	// A spec from a config and the same spec built by hand (no parsed
	// selector) are the same spec.
	hand := *old.Specs["s"]
	hand.Trigger.selector = nil
	if !sameSpec(old.Specs["s"], &hand) {
		t.Error("the parsed selector makes equal specs differ")
	}
}

func TestLoadSelectorExample(t *testing.T) {
	cfg, err := Load("../testdata/config/selector.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s := cfg.Specs["experiments"]
	if !s.Trigger.IsSelector() || s.Trigger.MaxObjects != 20 || s.ReleaseSpecs["iter8"].ReleaseName != DefaultSelectorReleaseName {
		t.Errorf("spec = %+v", s)
	}
	o, err := s.ForObject("experiments", "default", "httpbin")
	if err != nil {
		t.Fatal(err)
	}
	if o.ReleaseSpecs["iter8"].ReleaseName != "httpbin-iter8" || o.ReleaseSpecs["iter8"].Namespace != "default" ||
		o.ReleaseSpecs["load"].ReleaseName != "httpbin-load" || o.ReleaseSpecs["load"].Namespace != "experiments" {
		t.Errorf("per object: %+v %+v", o.ReleaseSpecs["iter8"], o.ReleaseSpecs["load"])
	}
}
