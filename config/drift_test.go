package config

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// TestDriftValid: a spec's drift policy is the default of its release
// specs (the same value), a release spec's own wins; unset is off.
func TestDriftValid(t *testing.T) {
	spec := "    drift: {mode: warn, ignore: [{paths: [/spec/replicas], target: {group: apps, kind: Deployment}}]}\n"
	yaml := strings.Replace(policyConfig(", drift: {mode: correct, ignore: [{managers: [kube-controller-manager], paths: ['', /metadata/annotations/example.com~1note], target: {group: core, kind: ConfigMap, name: c, namespace: default, labelSelector: 'app=web,tier in (front)'}}]}", "", ""),
		"  a:\n", "  a:\n"+spec, 1)
	cfg, err := Parse([]byte(yaml), "/cfg")
	if err != nil {
		t.Fatal(err)
	}
	s := cfg.Specs["a"]
	crd, app := s.ReleaseSpecs["crd"], s.ReleaseSpecs["app"]
	if crd.Drift.ModeOrOff() != DriftCorrect || len(crd.Drift.Ignore) != 1 || crd.Drift.Ignore[0].Target.LabelSelector != "app=web,tier in (front)" ||
		!reflect.DeepEqual(crd.Drift.Ignore[0].Paths, []string{"", "/metadata/annotations/example.com~1note"}) {
		t.Errorf("crd's own drift policy = %+v", crd.Drift)
	}
	if app.Drift != s.Drift || app.Drift.ModeOrOff() != DriftWarn || !app.Drift.Enabled() {
		t.Errorf("app's drift policy = %+v, want its spec's", app.Drift)
	}
	if p := (PolicyDefaults{}).Of(app); p.Drift != s.Drift {
		t.Errorf("policy drift = %+v, want the spec's", p.Drift)
	}

	cfg, err = Parse([]byte(policyConfig("", ", drift: {mode: \"off\"}", "")), "/cfg")
	if err != nil {
		t.Fatal(err)
	}
	if d := cfg.Specs["a"].ReleaseSpecs["web"].Drift; d != nil || d.ModeOrOff() != DriftOff || d.Enabled() {
		t.Errorf("unset drift = %+v, want nil (off)", d)
	}
	if d := cfg.Specs["a"].ReleaseSpecs["app"].Drift; d.ModeOrOff() != DriftOff || d.Enabled() {
		t.Errorf("drift: {} = %+v, want off", d)
	}
}

func TestDriftInvalid(t *testing.T) {
	cases := []struct {
		name string
		spec string // the spec's drift, "" for none
		b    string
		want []string
	}{
		{"mode", "", ", drift: {mode: enabled}", []string{`specs.a.releaseSpecs.app.drift.mode: must be off, warn or correct, got "enabled"`}},
		{"mode off unquoted", "", ", drift: {mode: off}", []string{"specs.a.releaseSpecs.app.drift.mode: must be a string, got the boolean false: YAML reads unquoted"}},
		{"mode on the spec, once", "{mode: on}", "", []string{`specs.a.drift.mode: must be a string, got the boolean true`}},
		{"spec mode, reported once", "{mode: enabled}", "", []string{`specs.a.drift.mode: must be off, warn or correct, got "enabled"`}},
		{"unknown field", "", ", drift: {mode: warn, ignores: []}", []string{"specs.a.releaseSpecs.app.drift.ignores: unknown field"}},
		{"empty rule", "", ", drift: {mode: warn, ignore: [{target: {kind: Deployment}}]}", []string{"specs.a.releaseSpecs.app.drift.ignore[0]: ignores nothing"}},
		{"not a pointer", "", ", drift: {ignore: [{paths: [spec/replicas]}]}", []string{`specs.a.releaseSpecs.app.drift.ignore[0].paths[0]: "spec/replicas" is not a JSON pointer`}},
		{"bad escape", "", ", drift: {ignore: [{paths: [/metadata/annotations/a~2b]}]}", []string{`specs.a.releaseSpecs.app.drift.ignore[0].paths[0]: "/metadata/annotations/a~2b" has a ~`}},
		{"empty manager", "", ", drift: {ignore: [{managers: ['']}]}", []string{"specs.a.releaseSpecs.app.drift.ignore[0].managers[0]: must be a field manager's name"}},
		{"selector", "", ", drift: {ignore: [{paths: [/data], target: {labelSelector: 'a in b'}}]}", []string{"specs.a.releaseSpecs.app.drift.ignore[0].target.labelSelector: is not a label selector"}},
		{"group", "", ", drift: {ignore: [{paths: [/data], target: {group: Apps}}]}", []string{"specs.a.releaseSpecs.app.drift.ignore[0].target.group: API group"}},
		{"kind", "", ", drift: {ignore: [{paths: [/data], target: {kind: apps/Deployment}}]}", []string{`specs.a.releaseSpecs.app.drift.ignore[0].target.kind: "apps/Deployment" is not a kind`}},
		{"namespace", "", ", drift: {ignore: [{paths: [/data], target: {namespace: Default}}]}", []string{"specs.a.releaseSpecs.app.drift.ignore[0].target.namespace: must be a DNS-1123 label"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			yaml := policyConfig("", tc.b, "")
			if tc.spec != "" {
				yaml = strings.Replace(yaml, "  a:\n", "  a:\n    drift: "+tc.spec+"\n", 1)
			}
			_, err := Parse([]byte(yaml), "/cfg")
			var cerr *Error
			if !errors.As(err, &cerr) {
				t.Fatalf("want a config error, got %v", err)
			}
			lines := cerr.Lines()
			for _, w := range tc.want {
				if !containsLine(lines, w) {
					t.Errorf("no line contains %q; lines:\n%s", w, strings.Join(lines, "\n"))
				}
			}
			if len(lines) != len(tc.want) {
				t.Errorf("%d lines, want %d:\n%s", len(lines), len(tc.want), strings.Join(lines, "\n"))
			}
		})
	}
}
