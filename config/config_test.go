package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestLoadExample(t *testing.T) {
	cfg, err := Load("../testdata/config/example.yaml")
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	spec := cfg.Specs["httpbin"]
	if spec == nil {
		t.Fatal("spec httpbin missing")
	}
	if got := spec.Trigger.Group; got != "apps" {
		t.Errorf("group = %q", got)
	}
	iter8 := spec.ReleaseSpecs["iter8"]
	if iter8.ReleaseName != "httpbin-iter8" || iter8.Chart.Version != "1.1.0" {
		t.Errorf("iter8 = %+v", iter8)
	}
	if !reflect.DeepEqual(iter8.Values["tasks"], []interface{}{"ready", "http"}) {
		t.Errorf("values = %#v", iter8.Values)
	}
	load := spec.ReleaseSpecs["load"]
	if load.ReleaseName != "httpbin-load" || load.Namespace != "default" || load.OnChange != OnChangeUpgrade {
		t.Errorf("defaults not applied: %+v", load)
	}
	abs, _ := filepath.Abs("../testdata/config")
	if cfg.Dir != abs {
		t.Errorf("Dir = %q, want %q", cfg.Dir, abs)
	}
}

const base = `
namespaces: [default, exp]
specs:
  a:
    trigger: {group: apps, version: v1, resource: deployments, name: a, namespace: default}
    releaseSpecs:
      x: {chart: {path: charts/x}}
`

func TestDefaults(t *testing.T) {
	cfg, err := Parse([]byte(base), "/cfg")
	if err != nil {
		t.Fatal(err)
	}
	a := cfg.Specs["a"]
	if !reflect.DeepEqual(a.Trigger.Labels, []string{DefaultTriggerLabel}) {
		t.Errorf("labels = %v", a.Trigger.Labels)
	}
	x := a.ReleaseSpecs["x"]
	if x.ReleaseName != "a-x" || x.Namespace != "default" || x.OnChange != "upgrade" {
		t.Errorf("x = %+v", x)
	}

	cfg, err = Parse([]byte(strings.Replace(base, "namespace: default}", "namespace: default, labels: []}", 1)), "/cfg")
	if err != nil {
		t.Fatal(err)
	}
	if l := cfg.Specs["a"].Trigger.Labels; l == nil || len(l) != 0 {
		t.Errorf("explicit empty labels must stay empty, got %#v", l)
	}

	cfg, err = Parse([]byte("namespaces: [default]\nspecs: {}\n"), "/cfg")
	if err != nil || len(cfg.Specs) != 0 {
		t.Errorf("specs: {} must be valid and empty, got %v, %v", cfg, err)
	}
}

// TestInvalid checks that each kind of bad input is reported with its YAML path
// and a message that says what to do.
func TestInvalid(t *testing.T) {
	cases := []struct {
		name string
		yaml string
		want []string // substrings, each must appear in one line
	}{
		{"empty file", "", []string{"the file is empty"}},
		{"only a comment", "# nothing\n", []string{"holds no document"}},
		{"not yaml", "specs: [\n", []string{"not valid YAML"}},
		{"missing specs", "namespaces: [default]\n", []string{"specs: required"}},
		{"missing namespaces", "specs: {}\n", []string{"namespaces: required"}},
		{"unknown top field", "namespaces: [default]\nspecs: {}\nspec: {}\n", []string{"spec: unknown field"}},
		{"duplicate key", "namespaces: [default]\nspecs: {}\nspecs: {}\n", []string{"not valid YAML"}},
		{"unknown nested field", strings.Replace(base, "path: charts/x", "path: charts/x, repository: x", 1),
			[]string{"specs.a.releaseSpecs.x.chart.repository: unknown field"}},
		{"unquoted yes as name", strings.Replace(base, "name: a,", "name: yes,", 1),
			[]string{"specs.a.trigger.name: must be a string, got the boolean true", "quote the value"}},
		{"unquoted 1.10 version", strings.Replace(base, "path: charts/x", "repo: https://c.example.com, name: x, version: 1.10", 1),
			[]string{"specs.a.releaseSpecs.x.chart.version: must be a string, got the number 1.1", "quote"}},
		{"unquoted on as label", strings.Replace(base, "namespace: default}", "namespace: default, labels: [on]}", 1),
			[]string{"specs.a.trigger.labels[0]: must be a string, got the boolean true"}},
		{"namespaces empty", strings.Replace(base, "[default, exp]", "[]", 1), []string{"namespaces: must list at least one"}},
		{"namespace twice", strings.Replace(base, "[default, exp]", "[default, default]", 1), []string{"namespaces[1]: namespace \"default\" is listed twice"}},
		{"bad namespace", strings.Replace(base, "[default, exp]", "[default, Exp_1]", 1), []string{"namespaces[1]: must be a DNS-1123 label"}},
		{"trigger fields required", strings.Replace(base, "{group: apps, version: v1, resource: deployments, name: a, namespace: default}", "{group: apps}", 1),
			[]string{"specs.a.trigger.version: required", "specs.a.trigger.resource: required", "specs.a.trigger: required: `name` of the trigger object, or `selector`", "specs.a.trigger.namespace: required"}},
		{"spec name", strings.Replace(base, "  a:\n", "  A_b:\n", 1), []string{"specs.A_b: spec name must be a DNS-1123 label"}},
		{"release name too long", strings.Replace(base, "{chart: {path: charts/x}}", "{chart: {path: charts/x}, releaseName: "+strings.Repeat("r", 54)+"}", 1),
			[]string{"specs.a.releaseSpecs.x.releaseName: ", "at most 53 characters"}},
		{"namespace not managed", strings.Replace(base, "{chart: {path: charts/x}}", "{chart: {path: charts/x}, namespace: other}", 1),
			[]string{"specs.a.releaseSpecs.x.namespace: release namespace \"other\" is not listed in `namespaces`"}},
		{"onChange", strings.Replace(base, "{chart: {path: charts/x}}", "{chart: {path: charts/x}, onChange: replace}", 1),
			[]string{"specs.a.releaseSpecs.x.onChange: must be \"upgrade\" or \"reinstall\""}},
		{"autox values key", strings.Replace(base, "{chart: {path: charts/x}}", "{chart: {path: charts/x}, values: {autox: 1}}", 1),
			[]string{"specs.a.releaseSpecs.x.values.autox: is reserved"}},
		{"chart both", strings.Replace(base, "path: charts/x", "path: charts/x, repo: https://c.example.com", 1), []string{"specs.a.releaseSpecs.x.chart: set either `path`"}},
		{"chart none", strings.Replace(base, "{chart: {path: charts/x}}", "{chart: {}}", 1), []string{"specs.a.releaseSpecs.x.chart: required"}},
		{"repo without version", strings.Replace(base, "path: charts/x", "repo: https://c.example.com, name: x", 1),
			[]string{"specs.a.releaseSpecs.x.chart.version: required when chart.repo is set"}},
		{"repo scheme", strings.Replace(base, "path: charts/x", "repo: ftp://c.example.com, name: x, version: 1.0.0", 1),
			[]string{"specs.a.releaseSpecs.x.chart.repo: must be an http://, https:// or oci:// URL"}},
		{"no release specs", strings.Replace(base, "    releaseSpecs:\n      x: {chart: {path: charts/x}}\n", "    releaseSpecs: {}\n", 1),
			[]string{"specs.a.releaseSpecs: required: at least one release spec"}},
		{"same trigger in two specs, other version", base + `  b:
    trigger: {group: apps, version: v1beta1, resource: deployments, name: a, namespace: default}
    releaseSpecs:
      w: {chart: {path: charts/y}}
`, []string{`specs.b.trigger: the same trigger object`, `already used by spec "a"`, `specs "a" and "b"`}},
		{"same release twice", base + `  b:
    trigger: {group: apps, version: v1, resource: deployments, name: b, namespace: default}
    releaseSpecs:
      w: {chart: {path: charts/y}, releaseName: a-x}
`, []string{`specs.b.releaseSpecs.w.releaseName: release "a-x" in namespace "default" is already used by specs.a.releaseSpecs.x`}},
		{"unquoted y as an id", strings.Replace(base, "      x: {chart", "      y: {chart", 1),
			[]string{"specs.a.releaseSpecs: the key true is read as a bool", "quote the key"}},
		{"unquoted number as an id", strings.Replace(base, "      x: {chart", "      1.10: {chart", 1),
			[]string{"specs.a.releaseSpecs: the key 1.1 is read as a float64", "quote the key"}},
		{"wrong type", "namespaces: default\nspecs: []\n", []string{"namespaces: must be a list", "specs: must be a map"}},

		// A key with no value (YAML null) where a value is required: a file cut
		// short looks like this, and "omitted" would mean "uninstall".
		{"specs with no value", "namespaces: [default]\nspecs:\n",
			[]string{"specs: has no value; write the specs as a map, or `specs: {}` for no releases"}},
		{"specs null", "namespaces: [default]\nspecs: null\n", []string{"specs: has no value"}},
		{"cut after specs, comment left", "namespaces: [default]\nspecs:\n# httpbin:\n", []string{"specs: has no value"}},
		{"namespaces with no value", "namespaces:\nspecs: {}\n",
			[]string{"namespaces: has no value; list the namespaces autox manages releases in"}},
		{"empty namespaces item", "namespaces:\n  - default\n  -\nspecs: {}\n",
			[]string{"namespaces[1]: has no value; write a namespace name"}},
		{"spec with no value", "namespaces: [default]\nspecs:\n  web:\n",
			[]string{"specs.web: has no value; write the spec as a map with `trigger` and `releaseSpecs`"}},
		{"trigger with no value", strings.Replace(base, "trigger: {group: apps, version: v1, resource: deployments, name: a, namespace: default}", "trigger:", 1),
			[]string{"specs.a.trigger: has no value; write the trigger object as a map"}},
		{"releaseSpecs with no value", strings.Replace(base, "    releaseSpecs:\n      x: {chart: {path: charts/x}}\n", "    releaseSpecs:\n", 1),
			[]string{"specs.a.releaseSpecs: has no value; write the release specs as a map"}},
		{"release spec with no value", strings.Replace(base, "x: {chart: {path: charts/x}}", "x:", 1),
			[]string{"specs.a.releaseSpecs.x: has no value; write the release spec as a map with at least `chart`"}},
		{"chart with no value", strings.Replace(base, "{chart: {path: charts/x}}", "{chart: }", 1),
			[]string{"specs.a.releaseSpecs.x.chart: has no value; write `path`"}},
		{"trigger name with no value", strings.Replace(base, "name: a,", "name: ,", 1),
			[]string{"specs.a.trigger.name: has no value; write the trigger object's name"}},
		{"trigger version null", strings.Replace(base, "version: v1,", "version: ~,", 1),
			[]string{"specs.a.trigger.version: has no value; write the API version"}},
		{"trigger resource and namespace with no value", strings.Replace(strings.Replace(base, "resource: deployments,", "resource: ,", 1), "namespace: default}", "namespace: }", 1),
			[]string{"specs.a.trigger.resource: has no value", "specs.a.trigger.namespace: has no value"}},
		{"labels with no value", strings.Replace(base, "namespace: default}", "namespace: default, labels: }", 1),
			[]string{"specs.a.trigger.labels: has no value; write a list of label keys, `labels: []` if the object's existence is enough, or omit the key for the default [app.kubernetes.io/version]"}},
		{"empty label item", strings.Replace(base, "namespace: default}", "namespace: default, labels: [example.com/x, ~]}", 1),
			[]string{"specs.a.trigger.labels[1]: has no value; write a label key"}},
		{"chart version with no value", strings.Replace(base, "path: charts/x", "repo: https://c.example.com, name: x, version: ", 1),
			[]string{"specs.a.releaseSpecs.x.chart.version: has no value; write the exact chart version"}},
		{"chart name and path with no value", strings.Replace(base, "path: charts/x", "path: , name: ", 1),
			[]string{"specs.a.releaseSpecs.x.chart.path: has no value", "specs.a.releaseSpecs.x.chart.name: has no value"}},
		{"every missing value at once", "namespaces:\nspecs:\n  a:\n    trigger:\n    releaseSpecs:\n      x:\n  b:\n",
			[]string{"namespaces: has no value", "specs.a.trigger: has no value", "specs.a.releaseSpecs.x: has no value", "specs.b: has no value"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { wantProblems(t, tc.yaml, tc.want) })
	}
}

// wantProblems parses yaml, which must be invalid, and checks that each of
// want is a substring of one problem line.
func wantProblems(t *testing.T, yaml string, want []string) {
	t.Helper()
	_, err := Parse([]byte(yaml), "/cfg")
	var cerr *Error
	if !errors.As(err, &cerr) {
		t.Fatalf("want *config.Error, got %v", err)
	}
	lines := cerr.Lines()
	for _, w := range want {
		found := false
		for _, l := range lines {
			if strings.Contains(l, w) {
				found = true
			}
		}
		if !found {
			t.Errorf("no line contains %q; lines:\n%s", w, strings.Join(lines, "\n"))
		}
	}
}

// TestNullMeansOmitted checks the keys where no value keeps the meaning of
// an omitted key: free-form values, and optional strings that have a default.
func TestNullMeansOmitted(t *testing.T) {
	yaml := strings.Replace(strings.Replace(base, "group: apps,", "group: ,", 1),
		"{chart: {path: charts/x}}", "{chart: {path: charts/x}, releaseName: , namespace: , onChange: , values: }", 1)
	cfg, err := Parse([]byte(yaml), "/cfg")
	if err != nil {
		t.Fatal(err)
	}
	a := cfg.Specs["a"]
	if a.Trigger.Group != "" {
		t.Errorf("group = %q, want the core group", a.Trigger.Group)
	}
	x := a.ReleaseSpecs["x"]
	if x.ReleaseName != "a-x" || x.Namespace != "default" || x.OnChange != OnChangeUpgrade || len(x.Values) != 0 {
		t.Errorf("null must mean omitted (defaults, no values), got %+v", x)
	}
}

func TestLoadErrorNamesFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(p, []byte("specs: {}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Load(p)
	if err == nil || !strings.Contains(err.Error(), p) {
		t.Fatalf("error must name the file %s: %v", p, err)
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing.yaml")); err == nil || !strings.Contains(err.Error(), "cannot read config file") {
		t.Fatalf("missing file: %v", err)
	}
}

func TestDiff(t *testing.T) {
	parse := func(s string) *Config {
		t.Helper()
		c, err := Parse([]byte(s), "/cfg")
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	old := parse(base + `  b:
    trigger: {version: v1, resource: configmaps, name: b, namespace: default}
    releaseSpecs:
      w: {chart: {path: charts/y}}
      z: {chart: {path: charts/z}}
  c:
    trigger: {version: v1, resource: configmaps, name: c, namespace: default}
    releaseSpecs:
      w: {chart: {path: charts/y}}
`)
	new := parse(base + `  b:
    trigger: {version: v1, resource: configmaps, name: b, namespace: default}
    releaseSpecs:
      w: {chart: {path: charts/y}, values: {a: 1}}
  d:
    trigger: {version: v1, resource: configmaps, name: d, namespace: default}
    releaseSpecs:
      w: {chart: {path: charts/y}}
`)
	got := Diff(old, new)
	want := Changes{
		RemovedSpecs:        []string{"c"},
		RemovedReleaseSpecs: []ReleaseSpecRef{{Spec: "b", ID: "z"}},
		AddedSpecs:          []string{"d"},
		ChangedSpecs:        []string{"b"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Diff = %+v, want %+v", got, want)
	}
	if d := Diff(old, old); !d.Empty() {
		t.Errorf("Diff(old, old) = %+v", d)
	}
	if d := Diff(nil, old); !reflect.DeepEqual(d.AddedSpecs, []string{"a", "b", "c"}) {
		t.Errorf("Diff(nil, old) = %+v", d)
	}
}
