package chartsource

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/autox-dev/autox/config"
)

// fakeClock is an injected clock for the refresh bound.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (f *fakeClock) Now() time.Time      { f.mu.Lock(); defer f.mu.Unlock(); return f.t }
func (f *fakeClock) Add(d time.Duration) { f.mu.Lock(); f.t = f.t.Add(d); f.mu.Unlock() }

func newCache(t *testing.T, dir string, clock *fakeClock, repoConfig, registryConfig string) *ChartCache {
	t.Helper()
	c, err := NewChartCache(ChartCacheOptions{Dir: dir, Refresh: time.Hour, Now: clock.Now, RepositoryConfig: repoConfig,
		RegistryConfig: registryConfig, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func load(t *testing.T, c *ChartCache, repo, name, version string) error {
	t.Helper()
	ch, err := c.Load(context.Background(), config.Chart{Repo: repo, Name: name, Version: version}, "/")
	if err == nil && (ch.Metadata.Name != name || ch.Metadata.Version != version) {
		t.Fatalf("loaded %s %s, want %s %s", ch.Metadata.Name, ch.Metadata.Version, name, version)
	}
	return err
}
