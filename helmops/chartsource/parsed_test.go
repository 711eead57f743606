package chartsource

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/autox-dev/autox/config"
	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
)

// writeUmbrella writes a chart with a subchart that a value turns off: Helm's
// install removes a disabled subchart from the chart it is given, which is
// what a shared parsed chart must never see.
func writeUmbrella(t *testing.T, dir, parentValues string) {
	t.Helper()
	files := map[string]string{
		"Chart.yaml":                  "apiVersion: v2\nname: top\nversion: 0.1.0\ndependencies:\n- name: sub\n  version: 0.1.0\n  condition: sub.enabled\n",
		"values.yaml":                 parentValues,
		"templates/cm.yaml":           "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: top\ndata:\n  color: {{ .Values.color | quote }}\n",
		"charts/sub/Chart.yaml":       "apiVersion: v2\nname: sub\nversion: 0.1.0\n",
		"charts/sub/values.yaml":      "size: 1\n",
		"charts/sub/templates/x.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: sub\n",
	}
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestParsedChartsAreCopiesHelmCanChange(t *testing.T) {
	dir := t.TempDir()
	writeUmbrella(t, dir, "color: blue\nsub:\n  enabled: true\n")
	p := newParsedCharts()

	first, err := p.path(dir)
	if err != nil {
		t.Fatal(err)
	}
	// What an install does to its chart: drop the disabled subchart, and
	// what a careless caller might: change values and files in place.
	if err := chartutil.ProcessDependencies(first, common.Values{"sub": map[string]any{"enabled": false}}); err != nil {
		t.Fatal(err)
	}
	if len(first.Dependencies()) != 0 {
		t.Fatalf("Helm kept the disabled subchart: the test no longer shows a mutation")
	}
	first.Values["color"] = "red"
	first.Templates[0].Name = "changed"

	second, err := p.path(dir)
	if err != nil {
		t.Fatal(err)
	}
	if p.cache.Len() != 1 {
		t.Errorf("memo holds %d charts for one content, want 1", p.cache.Len())
	}
	if len(second.Dependencies()) != 1 || second.Dependencies()[0].Parent() != second {
		t.Errorf("second copy's subcharts = %d (parent linked: %v), want the subchart back", len(second.Dependencies()), len(second.Dependencies()) == 1 && second.Dependencies()[0].Parent() == second)
	}
	if second.Values["color"] != "blue" {
		t.Errorf("second copy's color = %v, want blue", second.Values["color"])
	}
	if second.Templates[0].Name == "changed" {
		t.Errorf("a change to the first copy's files reached the second")
	}
	// Helm drops the disabled dependency from the metadata too.
	if len(second.Metadata.Dependencies) != 1 {
		t.Errorf("second copy declares %d dependencies, want 1", len(second.Metadata.Dependencies))
	}
}

func TestParsedChartsParseAgainOnAnyEdit(t *testing.T) {
	dir := t.TempDir()
	writeUmbrella(t, dir, "color: blue\n")
	p := newParsedCharts()
	if _, err := p.path(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "values.yaml"), []byte("color: green\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := p.path(dir)
	if err != nil {
		t.Fatal(err)
	}
	if c.Values["color"] != "green" {
		t.Errorf("after an edit color = %v, want green", c.Values["color"])
	}
}

// TestParsedChartsConcurrentInstalls runs what many workers of one pass do at
// once under the race detector: load the same chart and process it.
func TestParsedChartsConcurrentInstalls(t *testing.T) {
	dir := t.TempDir()
	writeUmbrella(t, dir, "color: blue\nsub:\n  enabled: true\n")
	src := LocalCharts{}
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			c, err := src.Load(context.Background(), config.Chart{Path: dir}, "")
			if err != nil {
				t.Error(err)
				return
			}
			if err := chartutil.ProcessDependencies(c, common.Values{"sub": map[string]any{"enabled": i%2 == 0}}); err != nil {
				t.Error(err)
			}
			c.Values["color"] = i
		}(i)
	}
	wg.Wait()
}

// BenchmarkLocalChartLoad compares loading a local chart directory for each
// install, as before the memo (parse), with what an install costs now
// (memo: digest the files and copy the parsed chart).
func BenchmarkLocalChartLoad(b *testing.B) {
	dir := filepath.Join("..", "..", "testdata", "charts", "hello")
	b.Run("parse", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if _, err := loader.Load(dir); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("memo", func(b *testing.B) {
		p := newParsedCharts()
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if _, err := p.path(dir); err != nil {
				b.Fatal(err)
			}
		}
	})
}
