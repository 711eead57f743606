package triggers

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/autox-dev/autox/config"
)

func namespaces(ns ...string) *config.Config { return &config.Config{Namespaces: ns} }

// TestRecordRules: the rules by which the recorded set of managed
// namespaces is read, merged and written (ConfigState.Remember, Record,
// Recorded, Collected): it holds every namespace looked in; a namespace
// leaves it only after a listing, safe against older reconciles, found it
// empty; a stale read, or a process that knows less, never shrinks it.
func TestRecordRules(t *testing.T) {
	t0 := time.Unix(1000, 0)
	type op func(s *ConfigState, stored *[]string)
	remember := func(ns ...string) op { return func(s *ConfigState, _ *[]string) { s.Remember(ns) } }
	apply := func(ns ...string) op { return func(s *ConfigState, _ *[]string) { s.Replace(namespaces(ns...)) } }
	collected := func(safeSince time.Time, ns ...string) op {
		return func(s *ConfigState, _ *[]string) { s.Collected(ns, safeSince) }
	}
	// write is a Sync that succeeds: what the record holds afterwards.
	write := func(s *ConfigState, stored *[]string) {
		*stored = s.Record(*stored)
		s.Recorded(*stored)
	}
	newTerm := func(s *ConfigState, _ *[]string) { s.startTerm() }
	for _, tc := range []struct {
		name   string
		config []string
		stored []string
		ops    []op
		// gc and record are GCNamespaces and Record(stored) at the end.
		gc, record []string
	}{
		{name: "a first write records the config's namespaces",
			config: []string{"b", "a"}, gc: []string{"b", "a"}, record: []string{"a", "b"}},
		{name: "a recorded namespace outside the config is looked in",
			config: []string{"a"}, stored: []string{"a", "gone"}, ops: []op{remember("a", "gone")},
			gc: []string{"a", "gone"}, record: []string{"a", "gone"}},
		{name: "an unread record shrinks nothing: what is stored stays",
			config: []string{"a"}, stored: []string{"a", "gone"},
			gc: []string{"a"}, record: []string{"a", "gone"}},
		{name: "a recorded namespace found empty leaves the record",
			config: []string{"a"}, stored: []string{"a", "gone"}, ops: []op{remember("a", "gone"), collected(t0, "gone")},
			gc: []string{"a"}, record: []string{"a"}},
		{name: "a stale read does not bring back a namespace found empty",
			config: []string{"a"}, stored: []string{"a", "gone"},
			ops: []op{remember("a", "gone"), collected(t0, "gone"), remember("a", "gone")},
			gc:  []string{"a"}, record: []string{"a"}},
		{name: "once written without it, a read that holds it again counts",
			config: []string{"a"}, stored: []string{"a", "gone"},
			ops: []op{remember("a", "gone"), collected(t0, "gone"), write, remember("gone")},
			gc:  []string{"a", "gone"}, record: []string{"a", "gone"}},
		{name: "a namespace the config drops stays recorded",
			config: []string{"a", "b"}, ops: []op{write, apply("a")},
			gc: []string{"a", "b"}, record: []string{"a", "b"}},
		{name: "a namespace dropped after the listing began stays",
			// The state's clock is t0+1h (below): the drop is younger than safeSince t0.
			config: []string{"a", "b"}, ops: []op{write, apply("a"), collected(t0, "b")},
			gc: []string{"a", "b"}, record: []string{"a", "b"}},
		{name: "a namespace dropped before the listing began leaves",
			config: []string{"a", "b"}, ops: []op{write, apply("a"), collected(t0.Add(2*time.Hour), "b")},
			gc: []string{"a"}, record: []string{"a"}},
		{name: "a namespace of the config is never collected",
			config: []string{"a"}, stored: []string{"a"}, ops: []op{remember("a"), collected(t0, "a")},
			gc: []string{"a"}, record: []string{"a"}},
		{name: "a namespace found empty and added back to the config is recorded",
			config: []string{"a"}, stored: []string{"a", "b"}, ops: []op{remember("a", "b"), collected(t0, "b"), apply("a", "b")},
			gc: []string{"a", "b"}, record: []string{"a", "b"}},
		{name: "a new term looks again in what an earlier term found empty",
			config: []string{"a"}, stored: []string{"a", "b"},
			ops: []op{remember("a", "b"), collected(t0, "b"), newTerm, remember("a", "b")},
			gc:  []string{"a", "b"}, record: []string{"a", "b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewConfigState(namespaces(tc.config...))
			s.now = func() time.Time { return t0.Add(time.Hour) }
			stored := tc.stored
			for _, o := range tc.ops {
				o(s, &stored)
			}
			if got := s.GCNamespaces(); !slices.Equal(got, tc.gc) {
				t.Errorf("GCNamespaces = %v, want %v", got, tc.gc)
			}
			if got := s.Record(stored); !slices.Equal(got, tc.record) {
				t.Errorf("Record(%v) = %v, want %v", stored, got, tc.record)
			}
		})
	}
}

// TestPassesCountEveryShardsReconciles: the passes of a replica's shards
// share one state; a namespace dropped while a reconcile of one shard is in
// flight (begun under the config that had it) is not forgotten by another
// shard's pass, which has nothing in flight itself. Once that reconcile
// ends (or its controller stops), a listing may forget it.
func TestPassesCountEveryShardsReconciles(t *testing.T) {
	t0 := time.Unix(1000, 0)
	s := NewConfigState(namespaces("a", "b"))
	var shardA, shardB sync.Map
	untrackA := s.track(&shardA)
	untrackB := s.track(&shardB)
	defer untrackA()
	shardB.Store("spec-in-b", running{started: t0})
	s.now = func() time.Time { return t0.Add(time.Minute) }
	s.Replace(namespaces("a")) // b dropped at t0+1m, after B's reconcile began
	listed := t0.Add(2 * time.Minute)

	s.Collected([]string{"b"}, s.oldestInFlight(listed)) // shard A's pass
	if got := s.GCNamespaces(); !slices.Contains(got, "b") {
		t.Fatalf("namespace b forgotten by one shard's pass while another shard's reconcile may still write there: %v", got)
	}
	untrackB() // B's term ended
	s.Collected([]string{"b"}, s.oldestInFlight(listed))
	if got := s.GCNamespaces(); slices.Contains(got, "b") {
		t.Fatalf("namespace b still looked in after a listing found it empty with nothing in flight: %v", got)
	}
}

// TestDeparted: the dependsOn of release specs that leave the config are
// kept, as the last config that had them said, until they are back.
func TestDeparted(t *testing.T) {
	spec := func(ids map[string][]string) *config.Spec {
		s := &config.Spec{ReleaseSpecs: map[string]*config.ReleaseSpec{}}
		for id, deps := range ids {
			s.ReleaseSpecs[id] = &config.ReleaseSpec{DependsOn: deps}
		}
		return s
	}
	cfg := func(specs map[string]*config.Spec) *config.Config { return &config.Config{Specs: specs} }
	full := cfg(map[string]*config.Spec{"web": spec(map[string][]string{"crds": nil, "probe": {"crds"}, "hello": nil})})
	s := NewConfigState(full)
	if d := s.Departed("web"); d != nil {
		t.Errorf("nothing left yet: %v", d)
	}
	s.Replace(cfg(map[string]*config.Spec{"web": spec(map[string][]string{"hello": nil})}))
	d := s.Departed("web")
	if _, crds := d["crds"]; len(d) != 2 || !crds || !slices.Equal(d["probe"], []string{"crds"}) {
		t.Errorf("release specs removed: %v", d)
	}
	s.Replace(full)
	if d := s.Departed("web"); d != nil {
		t.Errorf("back in the config: %v", d)
	}
	s.Replace(cfg(nil))
	if d := s.Departed("web"); len(d) != 3 || !slices.Equal(d["probe"], []string{"crds"}) {
		t.Errorf("spec removed: %v", d)
	}
}
