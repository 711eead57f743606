// Package chartsource loads the charts release specs name: local directories
// and archives, http(s) chart repositories and OCI registries, through one
// disk cache, with the pins and provenance checks of DESIGN §2. It fetches
// and checks; it touches no cluster and runs no Helm action.
package chartsource

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/autox-dev/autox/config"
	chart "helm.sh/helm/v4/pkg/chart/v2"
)

// ChartSource loads the chart a release spec names. Each call returns a fresh
// *chart.Chart: Helm mutates the chart it installs, so one must never be
// shared between operations. Charts are parsed once per content and copied
// for each call (parsed.go).
type ChartSource interface {
	Load(ctx context.Context, ref config.Chart, configDir string) (*chart.Chart, error)
}

// ErrChartSourceUnsupported is returned for a chart reference a ChartSource
// cannot serve (for LocalCharts: a repository chart).
var ErrChartSourceUnsupported = errors.New("chart source not supported")

// LocalCharts loads charts from a directory or .tgz named by chart.path,
// relative to the config file's directory. A pinned or verified .tgz is
// checked first (its provenance file is <path>.prov), with Keyrings.
type LocalCharts struct {
	Keyrings Keyrings
}

func (l LocalCharts) Load(ctx context.Context, ref config.Chart, configDir string) (*chart.Chart, error) {
	if ref.Path == "" {
		return nil, fmt.Errorf("cannot load chart %s %s from %s: %w (only chart.path is supported by this build)", ref.Name, ref.Version, ref.Repo, ErrChartSourceUnsupported)
	}
	p := ref.Path
	if !filepath.IsAbs(p) {
		p = filepath.Join(configDir, p)
	}
	if ref.Pinned() || ref.Verify {
		return l.loadTrusted(ctx, ref, p)
	}
	c, err := shared.path(p)
	if err != nil {
		return nil, fmt.Errorf("cannot load chart from %s: %w", p, err)
	}
	return c, nil
}

// loadTrusted loads the .tgz at p once its digest and provenance pass.
func (l LocalCharts) loadTrusted(ctx context.Context, ref config.Chart, p string) (*chart.Chart, error) {
	data, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("cannot load chart from %s: %w", p, err)
	}
	a := archive{name: filepath.Base(p), data: data, where: p}
	if ref.Verify {
		prov, err := os.ReadFile(p + ".prov")
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("cannot read the provenance file of chart %s: %w", p, err)
		}
		a.prov = prov
	}
	if err := checkPin(ref, a); err != nil {
		return nil, err
	}
	if err := l.Keyrings.verify(ctx, ref, a); err != nil {
		return nil, err
	}
	c, err := shared.archive(data)
	if err != nil {
		return nil, fmt.Errorf("cannot load chart from %s: %w", p, err)
	}
	return c, nil
}
