package plan

import (
	"slices"
	"strings"
	"testing"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/internal/format"
)

// recordOf is the record autox's labels make of rel: in sync by digest.
func recordOf(t *testing.T, rel *format.Release) format.Record {
	t.Helper()
	digest, err := format.Digest(rel.ChartName, rel.ChartVersion, rel.Values)
	if err != nil {
		t.Fatal(err)
	}
	return format.Record{Name: rel.Name, Namespace: rel.Namespace, Spec: rel.Spec, ReleaseSpec: rel.ReleaseSpec, Instance: rel.Instance,
		ObjectNamespace: rel.ObjectNamespace, ObjectName: rel.ObjectName, Revision: rel.Revision, Status: "deployed",
		Digest: digest, AutoxRevision: rel.Revision}
}

// TestTriage decides a pass from values alone: each row is what the pass
// read, and the keys it must queue for a full reconcile.
func TestTriage(t *testing.T) {
	cfg := selectorConfig(t)
	web := format.Object{Namespace: "ns", Name: "web"}
	a, b, c := format.Object{Namespace: "ns", Name: "a"}, format.Object{Namespace: "ns", Name: "b"}, format.Object{Namespace: "other", Name: "c"}
	selected := TriggerRead{Found: true, Labels: labels("autox.dev/experiment", "enabled")}
	plain := TriggerRead{Found: true, Labels: labels()}
	webRel := namedRelease(t, cfg, plain)
	recA, recB := recordOf(t, objectRelease(t, cfg, a, selected)), recordOf(t, objectRelease(t, cfg, b, selected))
	long := format.Object{Namespace: "ns", Name: strings.Repeat("l", 70)}
	recLong := recordOf(t, objectRelease(t, cfg, long, selected))

	// quiet is a pass over a converged cluster: web's trigger and objects
	// a and b of exp are labelled and in sync; canary selects nothing.
	quiet := func(mut func(s *Survey)) Survey {
		s := Survey{Config: cfg, Claims: NewClaimIndex(cfg), Records: []format.Record{recordOf(t, webRel), recA, recB},
			Listed: map[string]Listing{
				"web":    {OK: true, Objects: map[format.Object]TriggerRead{web: plain}},
				"exp":    {OK: true, Objects: map[format.Object]TriggerRead{a: selected, b: selected}},
				"canary": {OK: true, Objects: map[format.Object]TriggerRead{}},
			},
			Charts: map[string]map[string]ChartID{"web": {"a": {"hello", "1.0.0"}}, "exp": {"job": {"hello", "1.0.0"}}, "canary": {"c": {"hello", "1.0.0"}}},
		}
		if mut != nil {
			mut(&s)
		}
		return s
	}
	cases := []struct {
		name    string
		survey  Survey
		keys    []string
		noticed []string
		// counts of exp, when set.
		counts *ObjectCounts
	}{
		{"quiet: nothing to do", quiet(nil), nil, nil, &ObjectCounts{Served: 2}},
		{"records unreadable: every spec", quiet(func(s *Survey) { s.RecordsFailed = true }), []string{"canary", "exp", "web"}, nil, nil},
		{"a namespace unreadable: the specs that live there", quiet(func(s *Survey) { s.Unread = map[string]bool{"ns": true} }),
			[]string{"exp/ns/a", "exp/ns/b", "web"}, nil, nil},
		{"named trigger relabelled", quiet(func(s *Survey) {
			s.Listed["web"].Objects[web] = TriggerRead{Found: true, Labels: map[string]string{"app.kubernetes.io/version": "2"}}
		}), []string{"web"}, nil, nil},
		{"named trigger listing failed", quiet(func(s *Survey) { s.Listed["web"] = Listing{} }), []string{"web"}, nil, nil},
		{"chart unknown", quiet(func(s *Survey) { delete(s.Charts, "web") }), []string{"web"}, nil, nil},
		{"a record another Helm client wrote", quiet(func(s *Survey) { s.Records[0].Revision = 2 }), []string{"web"}, nil, nil},
		{"a removed spec's release", quiet(func(s *Survey) {
			s.Records = append(s.Records, format.Record{Name: "gone-x", Namespace: "ns", Spec: "gone", ReleaseSpec: "x", Status: "deployed"})
		}), []string{"gone"}, nil, nil},
		{"a renamed spec's release: its new owner adopts it, the old one is not queued", quiet(func(s *Survey) { s.Records[0].Spec = "old" }),
			[]string{"web"}, nil, nil},
		{"a renamed selector spec's release: the object's key adopts it", quiet(func(s *Survey) { s.Records[1].Spec = "old" }),
			[]string{"exp/ns/a"}, nil, &ObjectCounts{Served: 2}},
		{"named trigger in conflict, first time", quiet(func(s *Survey) { s.Listed["web"].Objects[web] = selected }),
			[]string{"web"}, []string{"web"}, nil},
		{"named trigger in conflict, noticed before", quiet(func(s *Survey) {
			s.Listed["web"].Objects[web] = selected
			s.Noticed = map[string]bool{"web": true}
		}), nil, nil, nil},
		{"selector: a new object", quiet(func(s *Survey) {
			s.Records = s.Records[:2]
		}), []string{"exp/ns/b"}, nil, &ObjectCounts{Served: 2}},
		{"selector: past maxObjects, noticed once", quiet(func(s *Survey) { s.Listed["exp"].Objects[c] = selected }),
			[]string{"exp/other/c"}, []string{"exp/other/c"}, &ObjectCounts{Served: 2, OverLimit: 1}},
		{"selector: a served object keeps its place before its record", quiet(func(s *Survey) {
			s.Records = s.Records[:1]
			s.Listed["exp"].Objects[c] = selected
			s.Served = map[string][]format.Object{"exp": {c, b}}
		}), []string{"exp/ns/a", "exp/ns/b", "exp/other/c"}, []string{"exp/ns/a"}, &ObjectCounts{Served: 2, OverLimit: 1}},
		{"selector: an object gone from the listing is read by name", quiet(func(s *Survey) { delete(s.Listed["exp"].Objects, b) }),
			[]string{"exp/ns/b"}, nil, &ObjectCounts{Served: 1}},
		{"selector: a long object name gone from the listing: the sweep", quiet(func(s *Survey) { s.Records = append(s.Records, recLong) }),
			[]string{"exp"}, nil, nil},
		{"selector: a release without an object: the sweep", quiet(func(s *Survey) {
			s.Records = append(s.Records, format.Record{Name: "exp-job", Namespace: "ns", Spec: "exp", ReleaseSpec: "job", Status: "deployed"})
		}), []string{"exp"}, nil, nil},
		{"selector: listing failed: the sweep", quiet(func(s *Survey) { s.Listed["exp"] = Listing{} }), []string{"exp"}, nil, nil},
		{"selector: object unselected", quiet(func(s *Survey) { s.Listed["exp"].Objects[a] = plain }), []string{"exp/ns/a"}, nil, &ObjectCounts{Served: 1}},
		{"selector: object in conflict with canary", quiet(func(s *Survey) {
			s.Listed["exp"].Objects[a] = TriggerRead{Found: true, Labels: labels("autox.dev/experiment", "enabled", "canary", "")}
			s.Listed["canary"].Objects[a] = s.Listed["exp"].Objects[a]
		}), []string{"canary/ns/a", "exp/ns/a"}, []string{"canary/ns/a", "exp/ns/a"}, &ObjectCounts{Served: 1, Conflict: 1}},
		// A shard's pass: web and exp's object a are another shard's.
		{"shard: another shard's keys are not triaged", quiet(func(s *Survey) {
			s.Records = s.Records[:0]
			s.Listed["exp"].Objects[c] = selected
			s.Owns = func(key string) bool { return key != "web" && key != "exp/ns/a" && key != "exp/other/c" }
		}), []string{"exp/ns/b"}, nil, &ObjectCounts{Served: 2, OverLimit: 1}},
		// A shard that owns no named spec and no object: the keys of a
		// selector's sweep and of a removed spec are still its, as
		// Shard.OwnsKey has them.
		{"shard: the sweep (a long object name) and a removed spec are every shard's", quiet(func(s *Survey) {
			s.Records = append(s.Records, recLong,
				format.Record{Name: "gone-x", Namespace: "ns", Spec: "gone", ReleaseSpec: "x", Status: "deployed"})
			s.Listed["web"].Objects[web] = TriggerRead{Found: true, Labels: map[string]string{"app.kubernetes.io/version": "2"}}
			s.Owns = sweepsOnly(s.Config)
		}), []string{"exp", "gone"}, nil, nil},
		{"shard: another shard's object left the listing, another's removed release spec", quiet(func(s *Survey) {
			delete(s.Listed["exp"].Objects, b)
			s.Records = append(s.Records, format.Record{Name: "web-gone", Namespace: "ns", Spec: "web", ReleaseSpec: "gone", Status: "deployed"})
			s.Owns = sweepsOnly(s.Config)
		}), nil, nil, nil},
		{"shard: another shard's objects in conflict are not noticed", quiet(func(s *Survey) {
			s.Listed["exp"].Objects[a] = TriggerRead{Found: true, Labels: labels("autox.dev/experiment", "enabled", "canary", "")}
			s.Listed["canary"].Objects[a] = s.Listed["exp"].Objects[a]
			s.Owns = sweepsOnly(s.Config)
		}), nil, nil, &ObjectCounts{Served: 1, Conflict: 1}},
		{"shard: records unreadable: only its own specs", quiet(func(s *Survey) {
			s.RecordsFailed = true
			s.Owns = func(key string) bool { return key == "web" }
		}), []string{"web"}, nil, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := Triage(tc.survey)
			keys := slices.Sorted(slices.Values(v.Keys))
			noticed := slices.Sorted(slices.Values(v.Noticed))
			if !slices.Equal(keys, tc.keys) {
				t.Errorf("keys %v, want %v", keys, tc.keys)
			}
			if !slices.Equal(noticed, tc.noticed) {
				t.Errorf("noticed %v, want %v", noticed, tc.noticed)
			}
			if tc.counts != nil && v.Objects["exp"] != *tc.counts {
				t.Errorf("objects of exp %+v, want %+v", v.Objects["exp"], *tc.counts)
			}
		})
	}
}

// sweepsOnly is the Owns of a shard that holds no named spec and no
// object of cfg: only the keys every shard owns, a selector spec's (its
// sweep) and a removed spec's.
func sweepsOnly(cfg *config.Config) func(string) bool {
	return func(key string) bool {
		spec := cfg.Specs[key]
		return spec == nil && !strings.Contains(key, "/") || spec != nil && spec.Trigger.IsSelector()
	}
}

// TestSourcesNeeded: a pass reads the values sources of listed, wanted
// triggers only, each object once.
func TestSourcesNeeded(t *testing.T) {
	creds := config.ValuesFrom{Kind: config.KindSecret, Name: "creds", Key: config.DefaultValuesKey}
	cfg := selectorConfig(t)
	for _, name := range []string{"web", "exp"} {
		for _, rs := range cfg.Specs[name].ReleaseSpecs {
			rs.ValuesFrom = []config.ValuesFrom{creds}
		}
	}
	selected := TriggerRead{Found: true, Labels: labels("autox.dev/experiment", "enabled")}
	s := Survey{Config: cfg, Listed: map[string]Listing{
		"web": {OK: true, Objects: map[format.Object]TriggerRead{{Namespace: "ns", Name: "web"}: {Found: true, Labels: labels()}}},
		"exp": {OK: true, Objects: map[format.Object]TriggerRead{
			{Namespace: "ns", Name: "a"}: selected, {Namespace: "ns", Name: "b"}: selected,
			{Namespace: "other", Name: "c"}: selected, {Namespace: "other", Name: "d"}: {Found: true, Labels: labels()}}},
	}}
	got := SourcesNeeded(s)
	want := []SourceKey{{Kind: config.KindSecret, Namespace: "ns", Name: "creds"}, {Kind: config.KindSecret, Namespace: "other", Name: "creds"}}
	if !slices.Equal(got, want) {
		t.Errorf("SourcesNeeded = %v, want %v", got, want)
	}
	s.Listed["web"].Objects[format.Object{Namespace: "ns", Name: "web"}] = TriggerRead{Found: true}
	delete(s.Listed["exp"].Objects, format.Object{Namespace: "ns", Name: "a"})
	delete(s.Listed["exp"].Objects, format.Object{Namespace: "ns", Name: "b"})
	if got := SourcesNeeded(s); !slices.Equal(got, want[1:]) {
		t.Errorf("with ns's triggers unwanted: %v, want %v", got, want[1:])
	}
	// A shard's pass reads only the sources of its own keys.
	s.Owns = func(key string) bool { return key != "exp/other/c" }
	if got := SourcesNeeded(s); len(got) != 0 {
		t.Errorf("with other/c another shard's: %v, want none", got)
	}
	s.Listed["web"].Objects[format.Object{Namespace: "ns", Name: "web"}] = TriggerRead{Found: true, Labels: labels()}
	if got := SourcesNeeded(s); !slices.Equal(got, want[:1]) {
		t.Errorf("with web wanted again: %v, want %v", got, want[:1])
	}
	s.Owns = sweepsOnly(cfg)
	if got := SourcesNeeded(s); len(got) != 0 {
		t.Errorf("with web another shard's: %v, want none", got)
	}
}
