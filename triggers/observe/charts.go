package observe

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/helmops/chartsource"
	"github.com/autox-dev/autox/triggers/plan"
	chart "helm.sh/helm/v4/pkg/chart/v2"
)

// ChartIdentities names the charts release specs point at: a repository
// chart by its config, a local chart by what its Chart.yaml said when it was
// last loaded (re-read only when its file changed), so that a quiet pass can
// identify every chart without loading one. Safe for concurrent use.
type ChartIdentities struct {
	source chartsource.ChartSource
	local  chartIDs
}

// NewChartIdentities loads charts through source.
func NewChartIdentities(source chartsource.ChartSource) *ChartIdentities {
	return &ChartIdentities{source: source}
}

// ID names the chart of ref without fetching it; a local chart unknown or
// changed since last seen (e.g. after a restart) is read once. ok is false
// when it cannot be read: the caller then cannot be sure of anything.
func (c *ChartIdentities) ID(ref config.Chart, configDir string) (plan.ChartID, bool) {
	if ref.Path == "" {
		return plan.ChartID{Name: ref.Name, Version: ref.Version}, true
	}
	path := chartPath(ref, configDir)
	if name, version, ok := c.local.lookup(path); ok {
		return plan.ChartID{Name: name, Version: version}, true
	}
	_, id, err := c.Load(context.Background(), ref, configDir)
	return id, err == nil
}

// Load loads a chart for an operation and remembers a local chart's identity.
func (c *ChartIdentities) Load(ctx context.Context, ref config.Chart, configDir string) (*chart.Chart, plan.ChartID, error) {
	ch, err := c.source.Load(ctx, ref, configDir)
	if err != nil {
		return nil, plan.ChartID{}, err
	}
	id := plan.ChartID{Name: chartName(ch), Version: chartVersion(ch)}
	if ref.Path != "" {
		c.local.remember(chartPath(ref, configDir), id.Name, id.Version)
	}
	return ch, id, nil
}

func chartPath(ref config.Chart, configDir string) string {
	if filepath.IsAbs(ref.Path) {
		return ref.Path
	}
	return filepath.Join(configDir, ref.Path)
}

func chartName(c *chart.Chart) string {
	if c.Metadata == nil {
		return ""
	}
	return c.Metadata.Name
}

func chartVersion(c *chart.Chart) string {
	if c.Metadata == nil {
		return ""
	}
	return c.Metadata.Version
}

// chartIDs remembers the name and version of local charts, keyed by path and
// the modification time of the file that holds them, so a pass can identify
// a local chart with one stat instead of loading it.
type chartIDs struct {
	mu  sync.Mutex
	ids map[string]chartID
}

type chartID struct {
	modTime       time.Time
	name, version string
}

// identityFile is the file whose change can change a local chart's identity.
func identityFile(path string) string {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return filepath.Join(path, "Chart.yaml")
	}
	return path
}

func (c *chartIDs) remember(path, name, version string) {
	st, err := os.Stat(identityFile(path))
	if err != nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ids == nil {
		c.ids = map[string]chartID{}
	}
	c.ids[path] = chartID{modTime: st.ModTime(), name: name, version: version}
}

func (c *chartIDs) lookup(path string) (string, string, bool) {
	st, err := os.Stat(identityFile(path))
	if err != nil {
		return "", "", false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	id, ok := c.ids[path]
	if !ok || !id.modTime.Equal(st.ModTime()) {
		return "", "", false
	}
	return id.name, id.version, true
}
