package plan

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/internal/format"
)

// TestMergeOrder: entries in order (maps deeply, a later entry wins), then
// the inline values on top, then the autox key.
func TestMergeOrder(t *testing.T) {
	m := mustMerge(t, map[string]interface{}{"db": map[string]interface{}{"host": "inline-host"}, "replicas": 3.0},
		configMap("base", "values.yaml", "db: {host: cm-host, port: 5432, user: cm-user}\nlist: [1, 2]\nreplicas: 1\n"),
		secret("creds", "values.yaml", "db: {user: app, password: hunter22}\nlist: [3]\n"),
	)
	want := map[string]interface{}{
		"db":       map[string]interface{}{"host": "inline-host", "port": 5432.0, "user": "app", "password": "hunter22"},
		"list":     []interface{}{3.0},
		"replicas": 3.0,
		"autox":    InjectedValues(srcTrigger, map[string]string{"v": "2"}),
	}
	if d, _ := ValuesDiff(want, m.Values); d != "" {
		t.Errorf("merged values differ at %s: %v", d, m.Values)
	}
	for path, from := range map[string]string{
		".db.password": "Secret creds", ".db.user": "Secret creds", ".list[0]": "Secret creds", ".list": "Secret creds",
		".db.port": "ConfigMap base", ".db.host": "", ".replicas": "", ".db": "Secret creds", ".other": "",
	} {
		if got := m.From(path); got != from {
			t.Errorf("From(%s) = %q, want %q", path, got, from)
		}
	}
}

// TestMergeTargetPath: the key's content as one string at a dotted path,
// maps created on the way, replacing a value of another kind; a later map
// entry and the inline values still win over it.
func TestMergeTargetPath(t *testing.T) {
	token := secret("creds", "token", "tok-123\n")
	token.Ref.TargetPath = "notify.slack.token"
	list := configMap("urls", "urls", "- not\n- a map\n")
	list.Ref.TargetPath = "notify.urls"
	m := mustMerge(t, map[string]interface{}{"notify": map[string]interface{}{"channel": "exp"}},
		configMap("base", "values.yaml", "notify: {slack: plain, urls: x}"), token, list)
	want := map[string]interface{}{
		"notify": map[string]interface{}{"channel": "exp", "urls": "- not\n- a map\n", "slack": map[string]interface{}{"token": "tok-123\n"}},
		"autox":  InjectedValues(srcTrigger, map[string]string{"v": "2"}),
	}
	if d, _ := ValuesDiff(want, m.Values); d != "" {
		t.Errorf("merged values differ at %s: %#v", d, m.Values)
	}
	if got := m.From(".notify.slack.token"); got != "Secret creds" {
		t.Errorf("From = %q", got)
	}
	if got := m.From(".notify.slack"); got != "Secret creds" {
		t.Errorf("From(.notify.slack) = %q: the map holding a Secret's value", got)
	}
	// The inline values replace a Secret's value: no longer its.
	m = mustMerge(t, map[string]interface{}{"notify": map[string]interface{}{"slack": map[string]interface{}{"token": "inline"}}}, token)
	if got := m.From(".notify.slack.token"); got != "" {
		t.Errorf("From after inline override = %q", got)
	}
}

// TestMergeAutoxKeyWins: a source cannot set what autox injects.
func TestMergeAutoxKeyWins(t *testing.T) {
	m := mustMerge(t, nil, secret("creds", "values.yaml", "autox: {trigger: {name: forged}}\nkeep: yes"))
	if d, _ := ValuesDiff(map[string]interface{}{"keep": true, "autox": InjectedValues(srcTrigger, map[string]string{"v": "2"})}, m.Values); d != "" {
		t.Errorf("values differ at %s", d)
	}
	if got := m.From(".autox.trigger.name"); got != "" {
		t.Errorf("the autox key is attributed to %q", got)
	}
}

// TestMergeWithoutSourcesIsDesiredValues: releases without valuesFrom keep
// their digest (DESIGN §5: an upgrade of autox relaunches nothing).
func TestMergeWithoutSourcesIsDesiredValues(t *testing.T) {
	rs := &config.ReleaseSpec{Values: map[string]interface{}{"a": map[string]interface{}{"b": 1.0}}}
	m, err := MergeValues(rs, nil, srcTrigger, map[string]string{"v": "2"})
	if err != nil {
		t.Fatal(err)
	}
	want := DesiredValues(rs, srcTrigger, map[string]string{"v": "2"})
	d1, _ := format.Digest("c", "1", want)
	d2, _ := format.Digest("c", "1", m.Values)
	if d1 != d2 {
		t.Errorf("digest changed: %s vs %s", d1, d2)
	}
}

// TestMergeFailures: a required object or key missing, or content that is
// not a map, names the reference and never the content; optional skips.
func TestMergeFailures(t *testing.T) {
	missing := secret("creds", "values.yaml", "")
	missing.Found, missing.Data = false, nil
	noKey := secret("creds", "values.yaml", "")
	noKey.Data = map[string]string{"other": "hunter22"}
	cases := []struct {
		name string
		src  SourceValue
		want string
	}{
		{"object missing", missing, "values from Secret ns/creds, key values.yaml: Secret not found"},
		{"key missing", noKey, "values from Secret ns/creds, key values.yaml: the Secret has no such key"},
		{"a list", secret("creds", "values.yaml", "- hunter22\n"), "values from Secret ns/creds, key values.yaml: not a YAML map (got a list)"},
		{"a string", configMap("cm", "values.yaml", "hunter22"), "values from ConfigMap ns/cm, key values.yaml: not a YAML map (got a string)"},
		{"not YAML", secret("creds", "values.yaml", "a: [hunter22\n"), "values from Secret ns/creds, key values.yaml: not a valid YAML map"},
		{"not YAML in a ConfigMap", configMap("cm", "values.yaml", "a: [hunter22\n"), "values from ConfigMap ns/cm, key values.yaml: not valid YAML"},
		// The YAML library quotes what it cannot read: of a Secret, nothing.
		{"wrong tag", secret("creds", "values.yaml", "password: !!int hunter2secret\n"), "not a valid YAML map"},
		{"list key", secret("creds", "values.yaml", "[s3cr3tToken]: x\n"), "not a valid YAML map"},
	}
	for _, tc := range cases {
		_, err := merge(t, nil, tc.src)
		var se *SourceError
		if !errors.As(err, &se) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want a SourceError with %q", tc.name, err, tc.want)
		}
		if tc.src.Ref.Kind == config.KindSecret && err != nil {
			for _, secretText := range []string{"hunter2", "s3cr3tToken"} {
				if strings.Contains(err.Error(), secretText) {
					t.Errorf("%s: the error quotes the Secret: %v", tc.name, err)
				}
			}
		}
		tc.src.Ref.Optional = true
		m, err := merge(t, map[string]interface{}{"x": "y"}, tc.src)
		switch tc.name {
		case "object missing", "key missing":
			if err != nil || !reflect.DeepEqual(m.Values["x"], "y") {
				t.Errorf("%s, optional: %v, %v", tc.name, m.Values, err)
			}
		default: // optional covers absence only, not bad content
			if err == nil {
				t.Errorf("%s, optional: no error", tc.name)
			}
		}
	}
}

// TestMergeLeavesInputsAlone: the config and the reads are shared.
func TestMergeLeavesInputsAlone(t *testing.T) {
	values := map[string]interface{}{"db": map[string]interface{}{"host": "h"}}
	target := secret("creds", "pw", "hunter22")
	target.Ref.TargetPath = "db.password"
	mustMerge(t, values, configMap("base", "values.yaml", "db: {port: 1}"), target)
	if !reflect.DeepEqual(values, map[string]interface{}{"db": map[string]interface{}{"host": "h"}}) {
		t.Errorf("inline values modified: %v", values)
	}
}

// sourcedObservation is the plan observation with release spec a's values
// partly from Secret creds.
func TestPlanValuesFromSecret(t *testing.T) {
	res := Decide(sourcedObservation("hunter22", nil))
	install := res.Steps[0]
	if install.Action != ActionInstall || install.Desired.Values["db"].(map[string]interface{})["password"] != "hunter22" {
		t.Fatalf("install step %+v", install)
	}
	if got := install.Hide.String("error: hunter22 rejected"); strings.Contains(got, "hunter22") {
		t.Errorf("the Secret's value is not hidden: %q", got)
	}
	rel := with(deployed("a"), func(r *format.Release) { r.Values = install.Desired.Values })
	res = Decide(sourcedObservation("hunter22", func(o *Observation) { o.Current = []*format.Release{rel, deployed("b")} }))
	if s := res.Steps[0]; s.Action != ActionNone {
		t.Errorf("same Secret content: %s %q", s.Action, s.Reason)
	}
	res = Decide(sourcedObservation("changed-pw", func(o *Observation) { o.Current = []*format.Release{rel, deployed("b")} }))
	s := res.Steps[0]
	if s.Action != ActionUpgrade || s.Reason != "values changed: .*** (from Secret creds)" {
		t.Errorf("changed Secret: %s %q", s.Action, s.Reason)
	}
	if got := s.Hide.String("changed-pw and hunter22"); strings.Contains(got, "changed-pw") || strings.Contains(got, "hunter22") {
		t.Errorf("new or old Secret value not hidden: %q", got)
	}
	// The digest is that of the merged values, as a quiet pass computes it.
	d, _ := format.Digest("hello", "1.0.0", s.Desired.Values)
	if s.Desired.Digest != d || s.Desired.Values["db"].(map[string]interface{})["password"] != "changed-pw" {
		t.Errorf("digest or values not of the merged values")
	}
}

// TestPlanValuesSourceFails: a missing required Secret fails its release
// spec only — no step for it, above all no uninstall — and the error names
// the reference, hiding what the Secret held.
func TestPlanValuesSourceFails(t *testing.T) {
	res := Decide(sourcedObservation("", func(o *Observation) {
		o.Current = []*format.Release{deployed("a"), deployed("b")}
		src := &o.ReleaseSpecs["a"].Sources[0]
		src.Found, src.Data = false, nil
	}))
	if len(res.Steps) != 1 || res.Steps[0].Release != "web-b" || len(res.Failed) != 1 || res.Failed[0].ReleaseSpec != "a" {
		t.Fatalf("steps %+v, failed %+v", res.Steps, res.Failed)
	}
	var se *SourceError
	if err := res.Failed[0].Err; !errors.As(err, &se) || !strings.Contains(err.Error(), "Secret ns/creds, key values.yaml") {
		t.Errorf("failure %v", err)
	}
	// A read error reported by the reader fails it the same way, redacted.
	res = Decide(sourcedObservation("hunter22", func(o *Observation) {
		o.Current = []*format.Release{deployed("a")}
		ro := o.ReleaseSpecs["a"]
		ro.Err = NewSourceError(ro.Sources[0].Ref, "ns", errors.New(`forbidden: "hunter22"`))
		o.ReleaseSpecs["a"] = ro
	}))
	for _, s := range res.Steps {
		if s.Release == "web-a" {
			t.Errorf("a step for the failed release spec: %+v", s)
		}
	}
	if len(res.Failed) != 1 || strings.Contains(res.Failed[0].Err.Error(), "hunter22") {
		t.Errorf("failure %+v", res.Failed)
	}
	// Bad YAML in a Secret: the parser's message is redacted too.
	res = Decide(sourcedObservation("[hunter22", nil))
	if len(res.Failed) != 1 || strings.Contains(res.Failed[0].Err.Error(), "hunter22") {
		t.Errorf("failure %+v", res.Failed)
	}
	// An unwanted trigger reads no source and uninstalls as ever.
	res = Decide(sourcedObservation("", func(o *Observation) {
		o.Trigger = TriggerRead{}
		o.Current = []*format.Release{deployed("a")}
		o.ReleaseSpecs["a"] = ReleaseSpecObservation{}
	}))
	if len(res.Failed) != 0 || res.Steps[0].Action != ActionUninstall {
		t.Errorf("trigger gone: %+v %+v", res.Steps, res.Failed)
	}
}

// TestInSyncWithSources: the quiet pass proves a release in sync from its
// record and the sources it read; a changed or unread source is doubt.
func TestInSyncWithSources(t *testing.T) {
	spec := &config.Spec{Trigger: srcTrigger, ReleaseSpecs: map[string]*config.ReleaseSpec{
		"a": {Chart: config.Chart{Repo: "https://c", Name: "hello", Version: "1.0.0"}, ReleaseName: "web-a", Namespace: "ns",
			ValuesFrom: []config.ValuesFrom{{Kind: config.KindSecret, Name: "creds", Key: "values.yaml"}}},
	}}
	labelled := TriggerRead{Found: true, Labels: map[string]string{"v": "2"}}
	read := []SourceValue{secret("creds", "values.yaml", "pw: one")}
	m, err := MergeValues(spec.ReleaseSpecs["a"], read, spec.Trigger, labelled.Labels)
	if err != nil {
		t.Fatal(err)
	}
	digest, _ := format.Digest("hello", "1.0.0", m.Values)
	rec := []format.Record{{Name: "web-a", Namespace: "ns", Spec: "web", ReleaseSpec: "a", Revision: 2, Status: "deployed", Digest: digest, AutoxRevision: 2}}
	ids := map[string]ChartID{"a": {"hello", "1.0.0"}}
	creds := SourceKey{Kind: config.KindSecret, Namespace: "ns", Name: "creds"}
	of := func(r SourceRead) Sources { return Sources{creds: r} }
	for _, tc := range []struct {
		name    string
		sources Sources
		want    bool
	}{
		{"same sources", of(SourceRead{Found: true, Data: map[string]string{"values.yaml": "pw: one"}}), true},
		{"changed Secret", of(SourceRead{Found: true, Data: map[string]string{"values.yaml": "pw: two"}}), false},
		{"unreadable Secret", of(SourceRead{Err: errors.New("forbidden")}), false},
		{"unread sources", nil, false},
		{"missing Secret", of(SourceRead{}), false},
	} {
		if got := InSync("web", spec, format.Object{}, labelled, rec, ids, tc.sources); got != tc.want {
			t.Errorf("%s: InSync = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestPlanRedactsWhatTheReleaseGets: the step's redactor hides every value
// the release gets — a ConfigMap's at a targetPath too, on install as on
// upgrade — and every value of a Secret whatever its type once its text
// has 4 characters; a ConfigMap's number is no secret, nor is the `autox`
// key, which names the trigger.
func TestPlanRedactsWhatTheReleaseGets(t *testing.T) {
	cases := []struct {
		name          string
		sources       []SourceValue
		hidden, shown []string
	}{
		{"a ConfigMap value at a targetPath", []SourceValue{at(configMap("settings", "greeting", "cm-greeting-7781"), "greeting")},
			[]string{"cm-greeting-7781"}, nil},
		{"a Secret number at a targetPath", []SourceValue{at(secret("creds", "pin", "86420"), "auth.pin")}, []string{"86420"}, nil},
		{"a Secret number in its values", []SourceValue{secret("creds", "values.yaml", "db: {port: 54321}\n")}, []string{"54321"}, nil},
		{"a big Secret number, as printed", []SourceValue{secret("creds", "values.yaml", "limit: 1000000\n")}, []string{"1000000", "1e+06"}, nil},
		{"a Secret boolean", []SourceValue{secret("creds", "values.yaml", "tls: {verify: false}\n")}, []string{"false"}, nil},
		{"a short Secret number", []SourceValue{secret("creds", "values.yaml", "n: 123\n")}, nil, []string{"123"}},
		{"a ConfigMap number", []SourceValue{configMap("settings", "values.yaml", "replicas: 12345\n")}, nil, []string{"12345"}},
		{"a ConfigMap string in its values", []SourceValue{configMap("settings", "values.yaml", "host: cm-host-4242\n")}, []string{"cm-host-4242"}, nil},
		{"inline values and the autox key", []SourceValue{configMap("settings", "values.yaml", "x: y\n")},
			[]string{"s3cret-token"}, []string{"2.0.0"}},
	}
	for _, tc := range cases {
		for _, installed := range []bool{false, true} {
			res := Decide(fromSources(installed, tc.sources...))
			if len(res.Steps) < 1 || res.Steps[0].Release != "web-a" || res.Steps[0].Desired == nil {
				t.Fatalf("%s: steps %+v, failed %+v", tc.name, res.Steps, res.Failed)
			}
			s := res.Steps[0]
			if want := map[bool]Action{false: ActionInstall, true: ActionUpgrade}[installed]; s.Action != want {
				t.Fatalf("%s: %s, want %s", tc.name, s.Action, want)
			}
			for _, v := range tc.hidden {
				if got := s.Hide.String("refused: " + v + "!"); got != "refused: ***!" {
					t.Errorf("%s, %s: %q is not hidden: %q", tc.name, s.Action, v, got)
				}
			}
			for _, v := range tc.shown {
				if got := s.Hide.String("refused: " + v + "!"); got != "refused: "+v+"!" {
					t.Errorf("%s, %s: %q is hidden: %q", tc.name, s.Action, v, got)
				}
			}
		}
	}
}

// TestStepSecretsHidesSecretSourcesOnly: a step's Secrets redactor hides
// what Secret sources set — their content now, and what the current
// release holds where they set it (a Secret changed since) — and nothing
// of the inline values or a ConfigMap's, which a reviewer's diff shows.
func TestStepSecretsHidesSecretSourcesOnly(t *testing.T) {
	sources := []SourceValue{secret("creds", "values.yaml", "db:\n  password: new-pass-1\n"),
		at(secret("tokens", "api", "new-token-1"), "auth.token"), configMap("base", "values.yaml", "replicas: 3\nmode: configured-mode\n")}
	o := fromSources(true, sources...)
	o.Current[0].Values = map[string]interface{}{"token": "s3cret-token", "mode": "configured-mode",
		"db": map[string]interface{}{"password": "old-pass-1"}, "auth": map[string]interface{}{"token": "old-token-1"}}
	o.Current[0].DeployedValues = map[string]interface{}{"db": map[string]interface{}{"password": "older-pass-0"}}
	s := Decide(o).Steps[0]
	if s.Action != ActionUpgrade || s.Secrets == nil {
		t.Fatalf("step %s %q, Secrets %v", s.Action, s.Reason, s.Secrets)
	}
	for _, v := range []string{"new-pass-1", "new-token-1", "old-pass-1", "old-token-1", "older-pass-0"} {
		if got := s.Secrets.String("value: " + v); got != "value: ***" {
			t.Errorf("%s from a Secret source not hidden: %q", v, got)
		}
	}
	for _, v := range []string{"s3cret-token", "configured-mode"} {
		if got := s.Secrets.String("value: " + v); got != "value: "+v {
			t.Errorf("%s, not from a Secret, hidden: %q", v, got)
		}
	}
}

// TestSecretKeysMasked: the keys of a Secret's YAML are as secret as its
// values (API keys by user name): a values diff names the path up to the
// first key that only a Secret names, then "***", whether the key was
// added to the Secret or removed from it; keys of the inline values, of a
// ConfigMap and of a targetPath are named as before.
func TestSecretKeysMasked(t *testing.T) {
	const before = "apiKeys:\n  alice-4f9a: key-one-1234\n"
	obs := func(content string, current *format.Release, sources ...SourceValue) Observation {
		return observation(func(o *Observation) {
			rs := o.Config.ReleaseSpecs["a"]
			rs.Values = map[string]interface{}{"apiKeys": map[string]interface{}{"shared": "key-zero-1234"}, "token": "s3cret-token"}
			sources = append(sources, secret("creds", "values.yaml", content))
			rs.ValuesFrom = refsOf(sources)
			o.ReleaseSpecs["a"] = ReleaseSpecObservation{Chart: ChartID{"hello", "1.0.0"}, Sources: sources}
			if current != nil {
				o.Current = []*format.Release{current, deployed("b")}
			}
		})
	}
	install := Decide(obs(before, nil)).Steps[0]
	if install.Action != ActionInstall {
		t.Fatalf("install step %+v", install)
	}
	rel := with(deployed("a"), func(r *format.Release) { r.Values = install.Desired.Values })
	for _, tc := range []struct {
		name, content string
		sources       []SourceValue
		want          string
	}{
		{"a key added", before + "  bob-77c1: key-two-1234\n", nil, "values changed: .apiKeys.*** (from Secret creds)"},
		{"a key removed", "apiKeys: {}\n", nil, "values changed: .apiKeys.***"},
		{"a top-level key added", before + "carol-9d2e: x\n", nil, "values changed: .*** (from Secret creds)"},
		{"a ConfigMap's key", before, []SourceValue{configMap("base", "values.yaml", "greeting: hi\n")}, "values changed: .greeting (from ConfigMap base)"},
	} {
		s := Decide(obs(tc.content, rel, tc.sources...)).Steps[0]
		if s.Action != ActionUpgrade || s.Reason != tc.want {
			t.Errorf("%s: %s %q, want upgrade %q", tc.name, s.Action, s.Reason, tc.want)
		}
		for _, key := range []string{"alice", "bob", "carol"} {
			if strings.Contains(s.Reason, key) {
				t.Errorf("%s: the reason names a key of the Secret: %q", tc.name, s.Reason)
			}
		}
	}
}
