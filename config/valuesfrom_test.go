package config

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// vfBase is base with release spec x's valuesFrom set to the list given.
func vfBase(list string) string {
	return strings.Replace(base, "{chart: {path: charts/x}}", "{chart: {path: charts/x}, valuesFrom: "+list+"}", 1)
}

func TestValuesFromDefaultsAndCopies(t *testing.T) {
	cfg, err := Parse([]byte(vfBase(`[{kind: Secret, name: creds}, {kind: ConfigMap, name: settings, key: extra.yaml, targetPath: notify.url, optional: true}]`)), "/cfg")
	if err != nil {
		t.Fatal(err)
	}
	got := cfg.Specs["a"].ReleaseSpecs["x"].ValuesFrom
	want := []ValuesFrom{
		{Kind: KindSecret, Name: "creds", Key: DefaultValuesKey},
		{Kind: KindConfigMap, Name: "settings", Key: "extra.yaml", TargetPath: "notify.url", Optional: true},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("valuesFrom = %+v, want %+v", got, want)
	}
	if p := got[1].Path(); !reflect.DeepEqual(p, []string{"notify", "url"}) {
		t.Errorf("Path = %v", p)
	}
	// A selector spec applies per object: the entries carry over.
	sel := *cfg.Specs["a"]
	sel.Trigger.Name, sel.Trigger.Selector = "", &metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}}
	forObj, err := sel.ForObject("a", "default", "obj")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(forObj.ReleaseSpecs["x"].ValuesFrom, want) {
		t.Errorf("ForObject lost valuesFrom: %+v", forObj.ReleaseSpecs["x"].ValuesFrom)
	}
	// A changed entry is a changed spec.
	cfg2, err := Parse([]byte(vfBase(`[{kind: Secret, name: other}]`)), "/cfg")
	if err != nil {
		t.Fatal(err)
	}
	if ch := Diff(cfg, cfg2); len(ch.ChangedSpecs) != 1 {
		t.Errorf("Diff = %+v, want spec a changed", ch)
	}
}

func TestValuesFromInvalid(t *testing.T) {
	p := "specs.a.releaseSpecs.x.valuesFrom"
	cases := []struct {
		name, list string
		want       []string
	}{
		{"kind case", `[{kind: secret, name: creds}]`, []string{p + `[0].kind: must be "Secret" or "ConfigMap" (exact case), got "secret"`}},
		{"kind missing", `[{name: creds}]`, []string{p + `[0].kind: must be "Secret" or "ConfigMap"`}},
		{"name empty", `[{kind: Secret}]`, []string{p + "[0].name: required: the name of the Secret"}},
		{"name not a subdomain", `[{kind: ConfigMap, name: Creds_1}]`, []string{p + "[0].name: object name must be a DNS-1123 subdomain"}},
		{"bad key", `[{kind: Secret, name: creds, key: "a/b"}]`, []string{p + `[0].key: "a/b" is not a valid key`}},
		{"empty path segment", `[{kind: Secret, name: creds, targetPath: notify..token}]`, []string{p + `[0].targetPath: "notify..token" must be a dotted path of non-empty keys`}},
		{"trailing dot", `[{kind: Secret, name: creds, targetPath: "notify."}]`, []string{p + "[0].targetPath: "}},
		{"autox path", `[{kind: Secret, name: creds, targetPath: autox.trigger}]`, []string{p + `[0].targetPath: must not start with "autox"`}},
		{"duplicate", `[{kind: Secret, name: creds}, {kind: ConfigMap, name: creds}, {kind: Secret, name: creds, key: values.yaml, optional: true}]`,
			[]string{p + "[2]: the same source as " + p + "[0]", "remove one of entries 0 and 2"}},
		{"optional not a bool", `[{kind: Secret, name: creds, optional: "maybe"}]`, []string{p + "[0].optional: must be true or false, got a string"}},
		{"unknown field", `[{kind: Secret, name: creds, path: x}]`, []string{p + "[0].path: unknown field"}},
		{"not a list", `{kind: Secret}`, []string{p + ": must be a list"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(vfBase(tc.list)), "/cfg")
			var cerr *Error
			if !errors.As(err, &cerr) {
				t.Fatalf("want *config.Error, got %v", err)
			}
			all := strings.Join(cerr.Lines(), "\n")
			for _, w := range tc.want {
				if !strings.Contains(all, w) {
					t.Errorf("no line contains %q; lines:\n%s", w, all)
				}
			}
		})
	}
	// A source may appear twice with another key or target path.
	if _, err := Parse([]byte(vfBase(`[{kind: Secret, name: creds}, {kind: Secret, name: creds, targetPath: token, key: token}]`)), "/cfg"); err != nil {
		t.Errorf("two keys of one Secret rejected: %v", err)
	}
}
