package triggers

import (
	"sort"
	"sync"

	"github.com/autox-dev/autox/config"
)

// ConfigState is the config in force and the namespaces garbage collection
// must look in. A config change that drops a namespace from `namespaces`
// leaves the releases of removed specs there to be uninstalled, so the
// dropped namespace stays in scope until a pass finds none of ours in it.
// It is shared by the Reconciler and the Controller and safe for concurrent use.
type ConfigState struct {
	mu      sync.Mutex
	cfg     *config.Config
	dropped map[string]bool
}

// NewConfigState starts with cfg in force.
func NewConfigState(cfg *config.Config) *ConfigState {
	return &ConfigState{cfg: cfg, dropped: map[string]bool{}}
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
			s.dropped[ns] = true
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

// Collected forgets dropped namespaces that a complete listing found without
// releases of ours.
func (s *ConfigState) Collected(empty []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ns := range empty {
		delete(s.dropped, ns)
	}
}
