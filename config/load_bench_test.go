package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fleetConfig is a config of n named specs of two release specs each, as
// the bench's fleet (scripts/bench) has them, with chart at chartDir.
func fleetConfig(n int, chartDir string) []byte {
	var b strings.Builder
	b.WriteString("namespaces: [bench]\nspecs:\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "  t%04d:\n    trigger: {group: apps, version: v1, resource: deployments, name: t%04d, namespace: bench}\n    releaseSpecs:\n", i, i)
		for j := 0; j < 2; j++ {
			fmt.Fprintf(&b, "      r%d: {chart: {path: %s}, values: {index: %d}}\n", j, chartDir, i*2+j)
		}
	}
	return []byte(b.String())
}

// BenchmarkParse10000Specs is the load of a 10,000-spec file, which a
// restart of autox waits for before anything else.
func BenchmarkParse10000Specs(b *testing.B) {
	dir := b.TempDir()
	chart := filepath.Join(dir, "chart")
	if err := os.MkdirAll(chart, 0o755); err != nil {
		b.Fatal(err)
	}
	data := fleetConfig(10000, chart)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(data, dir); err != nil {
			b.Fatal(err)
		}
	}
}
