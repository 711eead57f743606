package chartsource

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	chart "helm.sh/helm/v4/pkg/chart/v2"

	"github.com/autox-dev/autox/config"
)

// ChartCacheOptions configure a ChartCache.
type ChartCacheOptions struct {
	// Dir holds downloaded charts (by digest) and repository indexes.
	Dir string
	// RepositoryConfig is a Helm repositories.yaml with credentials and TLS
	// settings per repository URL; "" for none. It is re-read on every index
	// refresh, so rotated credentials mounted from a Secret apply without a restart.
	RepositoryConfig string
	// RegistryConfig is a docker config.json with OCI registry credentials; "" for none.
	RegistryConfig string
	// Refresh is how long a fetched index or a resolved OCI tag is trusted
	// before it is fetched again (default 10m). Chart bytes, once verified, are
	// kept by digest and never downloaded again.
	Refresh time.Duration
	// Timeout bounds one index fetch or chart download (default 2m).
	Timeout time.Duration
	// Keyrings are what chart.verify checks provenance with.
	Keyrings Keyrings
	Log      zerolog.Logger
	Now      func() time.Time
}

// ChartCache is the ChartSource for every kind of chart reference: a local
// path, an http(s) Helm repository, or an oci:// registry. Downloaded charts
// are verified and cached on disk by digest (a pinned chart by its pin); each
// Load parses the cached bytes anew, because Helm mutates the *chart.Chart it
// installs, and checks a pinned or verified chart again (trust.go).
type ChartCache struct {
	opts ChartCacheOptions

	// The OCI registries' transport (oci.go), made for the first oci:// chart.
	regOnce      sync.Once
	regTransport *http.Transport

	// mu guards the repository indexes (repoindex.go) and the resolved OCI
	// tags (oci.go); the archives themselves are on disk (diskcache.go).
	mu      sync.Mutex
	indexes map[string]*cachedIndex // repository URL -> index
	tags    map[string]resolvedTag  // oci reference -> manifest digest
	fetchMu sync.Map                // key -> chan struct{} (a lock): one fetch of a thing at a time
}

var _ ChartSource = (*ChartCache)(nil)

// NewChartCache returns a ChartCache; it creates opts.Dir if needed.
func NewChartCache(opts ChartCacheOptions) (*ChartCache, error) {
	if opts.Refresh <= 0 {
		opts.Refresh = 10 * time.Minute
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 2 * time.Minute
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	for _, d := range []string{"charts", "indexes"} {
		if err := os.MkdirAll(filepath.Join(opts.Dir, d), 0o700); err != nil {
			return nil, fmt.Errorf("cannot create chart cache directory: %w", err)
		}
	}
	return &ChartCache{opts: opts, indexes: map[string]*cachedIndex{}, tags: map[string]resolvedTag{}}, nil
}

// Load returns a freshly parsed chart for ref.
func (c *ChartCache) Load(ctx context.Context, ref config.Chart, configDir string) (*chart.Chart, error) {
	if ref.Path != "" {
		return LocalCharts{Keyrings: c.opts.Keyrings}.Load(ctx, ref, configDir)
	}
	var (
		a   archive
		err error
	)
	if strings.HasPrefix(ref.Repo, "oci://") {
		a, err = c.ociChart(ctx, ref)
	} else {
		a, err = c.repoChart(ctx, ref)
	}
	if err != nil {
		return nil, err
	}
	if err := c.opts.Keyrings.verify(ctx, ref, a); err != nil {
		return nil, err
	}
	ch, err := shared.archive(a.data)
	if err != nil {
		return nil, fmt.Errorf("cannot parse chart %s %s from %s: %w", ref.Name, ref.Version, withoutUserinfo(ref.Repo), err)
	}
	return ch, nil
}

// lock serialises fetches of one thing (an index, a chart) so that workers
// needing it at once download it once. Waiting ends with ctx: the fetch
// that holds the lock may be the one that hangs.
func (c *ChartCache) lock(ctx context.Context, key string) (unlock func(), err error) {
	m, _ := c.fetchMu.LoadOrStore(key, make(chan struct{}, 1))
	held := m.(chan struct{})
	select {
	case held <- struct{}{}:
		return func() { <-held }, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("stopped waiting for another worker's fetch of the same chart or index: %w", ctx.Err())
	}
}
