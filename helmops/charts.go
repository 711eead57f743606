package helmops

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"

	"github.com/autox-dev/autox/config"
)

// ChartSource loads the chart a release spec names. Each call returns a fresh
// *chart.Chart: Helm mutates the chart it installs, so one must never be
// shared between operations.
type ChartSource interface {
	Load(ctx context.Context, ref config.Chart, configDir string) (*chart.Chart, error)
}

// ErrChartSourceUnsupported is returned for a chart reference a ChartSource
// cannot serve (for LocalCharts: a repository chart).
var ErrChartSourceUnsupported = errors.New("chart source not supported")

// LocalCharts loads charts from a directory or .tgz named by chart.path,
// relative to the config file's directory.
type LocalCharts struct{}

func (LocalCharts) Load(_ context.Context, ref config.Chart, configDir string) (*chart.Chart, error) {
	if ref.Path == "" {
		return nil, fmt.Errorf("cannot load chart %s %s from %s: %w (only chart.path is supported by this build)", ref.Name, ref.Version, ref.Repo, ErrChartSourceUnsupported)
	}
	p := ref.Path
	if !filepath.IsAbs(p) {
		p = filepath.Join(configDir, p)
	}
	c, err := loader.Load(p)
	if err != nil {
		return nil, fmt.Errorf("cannot load chart from %s: %w", p, err)
	}
	return c, nil
}
