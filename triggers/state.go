package triggers

import (
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/autox-dev/autox/config"
)

// ConfigState is the config in force and the namespaces garbage collection
// must look in. A config change that drops a namespace from `namespaces`
// leaves the releases of removed specs there to be uninstalled, so the
// dropped namespace stays in scope until a pass finds none of ours in it.
// The namespaces this instance has managed are also kept in the cluster
// (see ManagedSet): those read back are in scope the same way, so a
// namespace dropped while autox was down is collected too.
// It is shared by the Reconciler and the Controller and safe for concurrent use.
type ConfigState struct {
	mu  sync.Mutex
	cfg *config.Config
	// dropped maps a namespace outside the config that may still hold
	// releases of ours to when it left the config: the zero time for one
	// read back from the recorded set (it left before this process knew it).
	dropped map[string]time.Time
	// forgotten are the namespaces a listing found empty since the recorded
	// set was last written: they leave it at the next write, and a stale
	// read of it does not bring them back.
	forgotten map[string]bool
	// departed holds, per spec, the dependsOn of each release spec that left
	// the config, as the last config in force that had it said: a removal
	// keeps the order its config gave (DESIGN §3, "Order"). A release spec
	// back in the config leaves it.
	departed map[string]map[string][]string
	// running are the reconciles in flight of every controller sharing the
	// state (with --shards, each held shard's; Controller.inFlight): a
	// pass of one shard must not forget a namespace that a reconcile of
	// another, begun under the config before its drop, may still write to.
	running map[*sync.Map]bool
	now     func() time.Time
}

// NewConfigState starts with cfg in force.
func NewConfigState(cfg *config.Config) *ConfigState {
	return &ConfigState{cfg: cfg, dropped: map[string]time.Time{}, forgotten: map[string]bool{}, departed: map[string]map[string][]string{},
		running: map[*sync.Map]bool{}, now: time.Now}
}

// track makes the reconciles in flight of one controller (queue key →
// running) count for every pass of the state (oldestInFlight) until
// untrack.
func (s *ConfigState) track(inFlight *sync.Map) (untrack func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.running[inFlight] = true
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.running, inFlight)
	}
}

// oldestInFlight is when the oldest reconcile in flight of any controller
// of the state started, or now: what a listing at now can speak for
// (Collected).
func (s *ConfigState) oldestInFlight(now time.Time) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	oldest := now
	for m := range s.running {
		m.Range(func(_, v any) bool {
			if t := v.(running).started; t.Before(oldest) {
				oldest = t
			}
			return true
		})
	}
	return oldest
}

// Config returns the config in force.
func (s *ConfigState) Config() *config.Config {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cfg
}

// Replace puts cfg in force and returns the config it replaces.
func (s *ConfigState) Replace(cfg *config.Config) *config.Config {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.cfg
	for _, ns := range old.Namespaces {
		if !cfg.Manages(ns) {
			s.dropped[ns] = s.now()
		}
	}
	for _, ns := range cfg.Namespaces {
		delete(s.dropped, ns)
		delete(s.forgotten, ns)
	}
	s.depart(old, cfg)
	s.cfg = cfg
	return old
}

// depart notes the dependsOn of the release specs of old that cfg no
// longer has, and forgets those of release specs cfg has again.
func (s *ConfigState) depart(old, cfg *config.Config) {
	for name, spec := range old.Specs {
		for id, rs := range spec.ReleaseSpecs {
			if now := cfg.Specs[name]; now != nil && now.ReleaseSpecs[id] != nil {
				continue
			}
			if s.departed[name] == nil {
				s.departed[name] = map[string][]string{}
			}
			s.departed[name][id] = slices.Clone(rs.DependsOn)
		}
	}
	for name, ids := range s.departed {
		spec := cfg.Specs[name]
		for id := range ids {
			if spec != nil && spec.ReleaseSpecs[id] != nil {
				delete(ids, id)
			}
		}
		if len(ids) == 0 {
			delete(s.departed, name)
		}
	}
}

// Departed returns, for spec, the dependsOn of each of its release specs
// that left the config while this process ran, by release spec id, as the
// last config that had it said (nil when none left). A process started
// since knows none.
func (s *ConfigState) Departed(spec string) map[string][]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.departed[spec]) == 0 {
		return nil
	}
	out := make(map[string][]string, len(s.departed[spec]))
	for id, deps := range s.departed[spec] {
		out[id] = slices.Clone(deps)
	}
	return out
}

// GCNamespaces are the namespaces whose releases of ours are looked at: the
// config's, then those dropped and not yet found empty, sorted.
func (s *ConfigState) GCNamespaces() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gcNamespaces()
}

func (s *ConfigState) gcNamespaces() []string {
	out := append([]string{}, s.cfg.Namespaces...)
	extra := make([]string, 0, len(s.dropped))
	for ns := range s.dropped {
		extra = append(extra, ns)
	}
	sort.Strings(extra)
	return append(out, extra...)
}

// Collected forgets dropped namespaces that a listing found without releases
// of ours. safeSince is the earliest moment the listing can speak for: a
// namespace dropped after it may still get a release from a reconcile that
// began under the old config, so it stays.
func (s *ConfigState) Collected(empty []string, safeSince time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ns := range empty {
		if at, ok := s.dropped[ns]; ok && at.Before(safeSince) {
			delete(s.dropped, ns)
			s.forgotten[ns] = true
		}
	}
}

// Remember takes in the namespaces read from the recorded set: each one
// outside the config, not dropped already and not found empty since, is
// looked in until a listing finds it empty. It dropped before any
// reconcile of this process could write there, hence the zero time.
func (s *ConfigState) Remember(recorded []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ns := range recorded {
		if _, ok := s.dropped[ns]; ok || s.cfg.Manages(ns) || s.forgotten[ns] {
			continue
		}
		s.dropped[ns] = time.Time{}
	}
}

// Record is what the recorded set should hold, given what it holds now:
// every namespace looked in, and those it holds that no listing has found
// empty since. Nothing leaves it but by a listing, so a read that failed
// or a process that knows less never shrinks it. Sorted.
func (s *ConfigState) Record(stored []string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.gcNamespaces()
	for _, ns := range stored {
		if !s.forgotten[ns] {
			out = append(out, ns)
		}
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// Recorded notes that the recorded set now holds written: the namespaces
// forgotten that are not in it are gone from it for good.
func (s *ConfigState) Recorded(written []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for ns := range s.forgotten {
		if !slices.Contains(written, ns) {
			delete(s.forgotten, ns)
		}
	}
}

// startTerm forgets which namespaces listings found empty: a new leadership
// term looks in everything the record holds until a listing of its own
// finds it empty (another process may have led in between).
func (s *ConfigState) startTerm() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.forgotten)
}
