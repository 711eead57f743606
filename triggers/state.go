package triggers

import (
	"sort"
	"sync"
	"time"

	"github.com/autox-dev/autox/config"
)

// ConfigState is the config in force and the namespaces garbage collection
// must look in. A config change that drops a namespace from `namespaces`
// leaves the releases of removed specs there to be uninstalled, so the
// dropped namespace stays in scope until a pass finds none of ours in it.
// It is shared by the Reconciler and the Controller and safe for concurrent use.
type ConfigState struct {
	mu  sync.Mutex
	cfg *config.Config
	// dropped maps a dropped namespace to when it was dropped.
	dropped map[string]time.Time
	now     func() time.Time
}

// NewConfigState starts with cfg in force.
func NewConfigState(cfg *config.Config) *ConfigState {
	return &ConfigState{cfg: cfg, dropped: map[string]time.Time{}, now: time.Now}
}

// Config returns the config in force.
func (s *ConfigState) Config() *config.Config {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cfg
}

// Apply puts cfg in force and returns the config it replaces.
func (s *ConfigState) Apply(cfg *config.Config) *config.Config {
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
	}
	s.cfg = cfg
	return old
}

// GCNamespaces are the namespaces whose releases of ours are looked at: the
// config's, then those dropped and not yet found empty, sorted.
func (s *ConfigState) GCNamespaces() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
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
		}
	}
}
