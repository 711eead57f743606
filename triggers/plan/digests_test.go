package plan

import (
	"maps"
	"slices"
	"testing"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/internal/format"
)

// TestDigestsRememberNothingStale: the passes of a controller remember
// the digests of desired values, and a pass never takes a release for in
// sync from one made of other inputs: other trigger labels, another
// config, other values sources.
func TestDigestsRememberNothingStale(t *testing.T) {
	s := syncedFleet(t, 3)
	s.Digests = NewDigests()
	pass := func(s Survey) []string {
		t.Helper()
		v := Triage(s)
		slices.Sort(v.Keys)
		return v.Keys
	}
	if keys := pass(s); keys != nil {
		t.Fatalf("first pass: %v", keys)
	}
	if keys := pass(s); keys != nil {
		t.Fatalf("second pass, digests remembered: %v", keys)
	}

	// t0001 relabelled, its records as they were: not in sync.
	relabelled := s
	relabelled.Listed = maps.Clone(s.Listed)
	relabelled.Listed["t0001"] = Listing{OK: true, Objects: map[format.Object]TriggerRead{
		{Namespace: "bench", Name: "t0001"}: {Found: true, Labels: map[string]string{"app": "bench", "app.kubernetes.io/version": "2.0.0"}}}}
	if keys := pass(relabelled); !slices.Equal(keys, []string{"t0001"}) {
		t.Errorf("after a relabel: %v, want [t0001]", keys)
	}
	// A label the spec does not inject changes no digest.
	other := s
	other.Listed = maps.Clone(s.Listed)
	other.Listed["t0002"] = Listing{OK: true, Objects: map[format.Object]TriggerRead{
		{Namespace: "bench", Name: "t0002"}: {Found: true, Labels: map[string]string{"app": "other", "app.kubernetes.io/version": "1.0.0"}}}}
	if keys := pass(other); keys != nil {
		t.Errorf("after a change of a label not injected: %v", keys)
	}

	// A local chart's version changed under the same config.
	rechart := s
	rechart.Charts = maps.Clone(s.Charts)
	rechart.Charts["t0000"] = map[string]ChartID{"r0": {"one", "0.2.0"}, "r1": {"one", "0.1.0"}}
	if keys := pass(rechart); !slices.Equal(keys, []string{"t0000"}) {
		t.Errorf("after a chart's version changed: %v, want [t0000]", keys)
	}

	// A new config with t0002's values changed, same names and labels.
	cfg := &config.Config{Specs: maps.Clone(s.Config.Specs)}
	spec := *cfg.Specs["t0002"]
	spec.ReleaseSpecs = maps.Clone(spec.ReleaseSpecs)
	rs := *spec.ReleaseSpecs["r0"]
	rs.Values = map[string]interface{}{"index": float64(7)}
	spec.ReleaseSpecs["r0"] = &rs
	cfg.Specs["t0002"] = &spec
	reconfigured := s
	reconfigured.Config, reconfigured.Claims = cfg, NewClaimIndex(cfg)
	if keys := pass(reconfigured); !slices.Equal(keys, []string{"t0002"}) {
		t.Errorf("after a config change: %v, want [t0002]", keys)
	}

	// Values from a ConfigMap: its content changes between passes.
	cfg = &config.Config{Specs: maps.Clone(s.Config.Specs)}
	spec = *cfg.Specs["t0000"]
	spec.ReleaseSpecs = maps.Clone(spec.ReleaseSpecs)
	rs = *spec.ReleaseSpecs["r1"]
	rs.ValuesFrom = []config.ValuesFrom{{Kind: config.KindConfigMap, Name: "shared", Key: "values.yaml"}}
	spec.ReleaseSpecs["r1"] = &rs
	cfg.Specs["t0000"] = &spec
	sourced := s
	sourced.Config, sourced.Claims = cfg, NewClaimIndex(cfg)
	sourced.Records = slices.Clone(s.Records)
	read := func(content string) Sources {
		return Sources{{Kind: config.KindConfigMap, Namespace: "bench", Name: "shared"}: {Found: true, Data: map[string]string{"values.yaml": content}}}
	}
	merged, err := MergeValues(&rs, []SourceValue{configMap("shared", "values.yaml", "color: blue")}, spec.Trigger, fleetLabels)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range sourced.Records {
		if r.Spec == "t0000" && r.ReleaseSpec == "r1" {
			if sourced.Records[i].Digest, err = format.Digest("one", "0.1.0", merged.Values); err != nil {
				t.Fatal(err)
			}
		}
	}
	sourced.Sources = read("color: blue")
	if keys := pass(sourced); keys != nil {
		t.Errorf("values from a ConfigMap, in sync: %v", keys)
	}
	sourced.Sources = read("color: red")
	if keys := pass(sourced); !slices.Equal(keys, []string{"t0000"}) {
		t.Errorf("after the ConfigMap changed: %v, want [t0000]", keys)
	}
}

// TestDigestsKeepTwoPasses: the memo holds what the last two passes used,
// not every label set it ever saw.
func TestDigestsKeepTwoPasses(t *testing.T) {
	s := syncedFleet(t, 2)
	s.Digests = NewDigests()
	for i, version := range []string{"1", "2", "3", "4", "5"} {
		relabelled := s
		relabelled.Listed = map[string]Listing{}
		for name, l := range s.Listed {
			for obj := range l.Objects {
				relabelled.Listed[name] = Listing{OK: true, Objects: map[format.Object]TriggerRead{
					obj: {Found: true, Labels: map[string]string{"app.kubernetes.io/version": version}}}}
			}
		}
		Triage(relabelled)
		// Each pass makes two digests, one per spec: its first release
		// is out of sync, so InSync reads no further.
		held := len(s.Digests.cur) + len(s.Digests.prev)
		if want := min(i+1, 2) * 2; held != want {
			t.Errorf("after pass %d: %d digests held, want %d", i+1, held, want)
		}
	}
}

// TestDigestsSelectorObjects: the objects of one selector spec with the
// same labels have digests of their own (the injected trigger names the
// object), remembered apart.
func TestDigestsSelectorObjects(t *testing.T) {
	cfg := selectorConfig(t)
	a, b := format.Object{Namespace: "ns", Name: "a"}, format.Object{Namespace: "ns", Name: "b"}
	selected := TriggerRead{Found: true, Labels: labels("autox.dev/experiment", "enabled")}
	recA, recB := recordOf(t, objectRelease(t, cfg, a, selected)), recordOf(t, objectRelease(t, cfg, b, selected))
	if recA.Digest == recB.Digest {
		t.Fatal("two objects' releases have one digest: the test proves nothing")
	}
	s := Survey{Config: cfg, Claims: NewClaimIndex(cfg), Records: []format.Record{recA, recB}, Digests: NewDigests(),
		Listed: map[string]Listing{
			"web":    {OK: true, Objects: map[format.Object]TriggerRead{}},
			"exp":    {OK: true, Objects: map[format.Object]TriggerRead{a: selected, b: selected}},
			"canary": {OK: true, Objects: map[format.Object]TriggerRead{}},
		},
		Charts: map[string]map[string]ChartID{"web": {"a": {"hello", "1.0.0"}}, "exp": {"job": {"hello", "1.0.0"}}, "canary": {"c": {"hello", "1.0.0"}}},
	}
	for pass := 1; pass <= 2; pass++ {
		v := Triage(s)
		slices.Sort(v.Keys)
		if slices.Contains(v.Keys, "exp/ns/a") || slices.Contains(v.Keys, "exp/ns/b") {
			t.Errorf("pass %d: %v", pass, v.Keys)
		}
	}
}

// TestDigestsUnderAnotherConfig: a digest asked for under a config other
// than the pass's is made afresh and not remembered, so a Digests shared by
// mistake between passes of two configs answers rightly for both.
func TestDigestsUnderAnotherConfig(t *testing.T) {
	d := NewDigests()
	one, two := &config.Config{}, &config.Config{}
	d.newPass(one)
	k := digestKey{spec: "web", releaseSpec: "a"}
	calls := 0
	made := func(v string) func() (string, error) {
		return func() (string, error) { calls++; return v, nil }
	}
	if got, _ := d.get(one, k, made("under one")); got != "under one" {
		t.Fatalf("under one: %q", got)
	}
	if got, _ := d.get(two, k, made("under two")); got != "under two" {
		t.Errorf("under two, the pass's config being one: %q", got)
	}
	if got, _ := d.get(one, k, made("again")); got != "under one" || calls != 2 {
		t.Errorf("under one again: %q after %d computations, want the remembered one after 2", got, calls)
	}
	if len(d.cur) != 1 {
		t.Errorf("%d digests held, want 1: the one of config one", len(d.cur))
	}
}
