package config

import (
	"strings"
	"testing"
)

const pin = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// trustBase is base with the release spec's fields replaced by fields.
func trustBase(fields string) string {
	return strings.Replace(base, "{chart: {path: charts/x}}", "{"+fields+"}", 1)
}

func TestTrustValid(t *testing.T) {
	cfg, err := Parse([]byte(strings.Replace(trustBase(`chart: {repo: oci://r.example.com/c, name: x, version: 1.0.0, digest: `+pin+`, verify: true, keyring: {secretName: keys}}, serviceAccountName: team-a`),
		"    releaseSpecs:", "    serviceAccountName: spec-account\n    releaseSpecs:", 1)), "/cfg")
	if err != nil {
		t.Fatal(err)
	}
	a := cfg.Specs["a"]
	x := a.ReleaseSpecs["x"]
	if x.Chart.Digest != pin || !x.Chart.Verify || x.Chart.Trust() != "pinned,verified" {
		t.Errorf("chart = %+v, trust %q", x.Chart, x.Chart.Trust())
	}
	if k := x.Chart.Keyring; k == nil || k.Key != DefaultKeyringKey || k.Namespace != "default" {
		t.Errorf("keyring defaults = %+v", k)
	}
	if got := RunsAs(a, x, "lockdown"); got != "team-a" {
		t.Errorf("the release spec's account must win: %q", got)
	}
	for _, tc := range []struct {
		spec *Spec
		rs   *ReleaseSpec
		def  string
		want string
	}{
		{a, &ReleaseSpec{}, "lockdown", "spec-account"}, // the spec's, over the default
		{a, nil, "lockdown", "spec-account"},            // a removed release spec of a spec that names one
		{nil, nil, "lockdown", "lockdown"},              // a removed spec: the default
		{nil, nil, "", ""},                              // ... else autox's own identity
		{&Spec{}, &ReleaseSpec{}, "", ""},               // nothing set anywhere
		{&Spec{}, &ReleaseSpec{}, "lockdown", "lockdown"} /* the lockdown */} {
		if got := RunsAs(tc.spec, tc.rs, tc.def); got != tc.want {
			t.Errorf("RunsAs(%v, %v, %q) = %q, want %q", tc.spec != nil, tc.rs != nil, tc.def, got, tc.want)
		}
	}

	// A plain-HTTP registry, said explicitly.
	plain, err := Parse([]byte(trustBase(`chart: {repo: oci://registry.local:5000/c, name: x, version: 1.0.0, plainHTTP: true}`)), "/cfg")
	if err != nil || !plain.Specs["a"].ReleaseSpecs["x"].Chart.PlainHTTP {
		t.Errorf("plainHTTP on an oci:// chart: %v", err)
	}
	// A local archive may be pinned and verified.
	if _, err := Parse([]byte(trustBase(`chart: {path: charts/x-1.0.0.tgz, digest: `+pin+`, verify: true}`)), "/cfg"); err != nil {
		t.Errorf("a pinned, verified local .tgz: %v", err)
	}
}

func TestTrustInvalid(t *testing.T) {
	p := "specs.a.releaseSpecs.x."
	cases := []struct {
		name, yaml string
		want       []string
	}{
		{"digest form", trustBase(`chart: {repo: https://c.example.com, name: x, version: 1.0.0, digest: "sha256:ABC"}`),
			[]string{p + "chart.digest: must be sha256: and 64 lower-case hex digits"}},
		{"digest without algorithm", trustBase(`chart: {repo: https://c.example.com, name: x, version: 1.0.0, digest: "` + pin[len("sha256:"):] + `"}`),
			[]string{p + "chart.digest: must be sha256:"}},
		{"digest of a directory", trustBase(`chart: {path: charts/x, digest: ` + pin + `}`),
			[]string{p + "chart.digest: pins a .tgz archive: package the chart directory"}},
		{"verify a directory", trustBase(`chart: {path: charts/x, verify: true}`),
			[]string{p + "chart.verify: needs a .tgz archive with its .prov file"}},
		{"keyring without verify", trustBase(`chart: {path: charts/x.tgz, keyring: {secretName: keys}}`),
			[]string{p + "chart.keyring: is only used with `verify: true`"}},
		{"keyring without a Secret", trustBase(`chart: {path: charts/x.tgz, verify: true, keyring: {key: ring}}`),
			[]string{p + "chart.keyring.secretName: required"}},
		{"keyring key", trustBase(`chart: {path: charts/x.tgz, verify: true, keyring: {secretName: keys, key: "a/b"}}`),
			[]string{p + "chart.keyring.key: must be a valid Secret key"}},
		{"verify not a bool", trustBase(`chart: {path: charts/x.tgz, verify: "yes please"}`),
			[]string{p + "chart.verify: must be true or false"}},
		{"account name", trustBase(`chart: {path: charts/x}, serviceAccountName: Team_A`),
			[]string{p + "serviceAccountName: service account name must be a DNS-1123 subdomain"}},
		{"spec account name", strings.Replace(base, "    releaseSpecs:", "    serviceAccountName: Team_A\n    releaseSpecs:", 1),
			[]string{"specs.a.serviceAccountName: service account name must be a DNS-1123 subdomain"}},
		// An identity or a pin a template left empty would silently widen
		// what the release may do, or pin nothing.
		{"account with no value", trustBase(`chart: {path: charts/x}, serviceAccountName: `),
			[]string{p + "serviceAccountName: has no value; write the name of a service account"}},
		{"account empty", trustBase(`chart: {path: charts/x}, serviceAccountName: ""`),
			[]string{p + "serviceAccountName: is empty; write the name of a service account"}},
		{"spec account empty", strings.Replace(base, "    releaseSpecs:", "    serviceAccountName: \"\"\n    releaseSpecs:", 1),
			[]string{"specs.a.serviceAccountName: is empty"}},
		{"digest with no value", trustBase(`chart: {repo: https://c.example.com, name: x, version: 1.0.0, digest: }`),
			[]string{p + "chart.digest: has no value; write the chart's digest"}},
		{"digest empty", trustBase(`chart: {repo: https://c.example.com, name: x, version: 1.0.0, digest: ""}`),
			[]string{p + "chart.digest: is empty"}},
		{"plainHTTP for an http repository", trustBase(`chart: {repo: http://c.example.com, name: x, version: 1.0.0, plainHTTP: true}`),
			[]string{p + "chart.plainHTTP: is only for oci:// registries"}},
		{"plainHTTP for a path", trustBase(`chart: {path: charts/x, plainHTTP: true}`),
			[]string{p + "chart.plainHTTP: is only for oci:// registries, not a chart path"}},
		{"plainHTTP not a bool", trustBase(`chart: {repo: oci://r.example.com/c, name: x, version: 1.0.0, plainHTTP: "yes"}`),
			[]string{p + "chart.plainHTTP: must be true or false"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { wantProblems(t, tc.yaml, tc.want) })
	}
}

// TestForObjectKeepsTrust: a selector spec's per-object form keeps the
// accounts and reads a keyring in each object's release namespace.
func TestForObjectKeepsTrust(t *testing.T) {
	cfg, err := Parse([]byte(`
namespaces: [default, exp]
specs:
  s:
    serviceAccountName: team
    trigger: {group: apps, version: v1, resource: deployments, selector: {matchLabels: {a: b}}}
    releaseSpecs:
      x: {chart: {path: x.tgz, verify: true, keyring: {secretName: keys}}, serviceAccountName: runner}
`), "/cfg")
	if err != nil {
		t.Fatal(err)
	}
	spec := cfg.Specs["s"]
	obj, err := spec.ForObject("s", "exp", "o")
	if err != nil {
		t.Fatal(err)
	}
	x := obj.ReleaseSpecs["x"]
	if obj.ServiceAccountName != "team" || x.ServiceAccountName != "runner" {
		t.Errorf("accounts lost: spec %q, release spec %q", obj.ServiceAccountName, x.ServiceAccountName)
	}
	if x.Chart.Keyring.Namespace != "exp" || spec.ReleaseSpecs["x"].Chart.Keyring.Namespace != "" {
		t.Errorf("keyring namespace: per object %q, config's %q", x.Chart.Keyring.Namespace, spec.ReleaseSpecs["x"].Chart.Keyring.Namespace)
	}
}
