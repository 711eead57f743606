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

// TestMayHaveNonStringKeys: the second YAML parse is skipped only for a
// file none of whose keys outside values can have been a bool or a number.
func TestMayHaveNonStringKeys(t *testing.T) {
	for _, tc := range []struct {
		tree interface{}
		want bool
	}{
		{map[string]interface{}{"specs": map[string]interface{}{"t0001": map[string]interface{}{"releaseSpecs": map[string]interface{}{"r0": nil}}}}, false},
		{map[string]interface{}{"specs": map[string]interface{}{"a": map[string]interface{}{"values": map[string]interface{}{"true": 1, "1.5": 2}}}}, false},
		{map[string]interface{}{"specs": map[string]interface{}{"a": map[string]interface{}{"releaseSpecs": map[string]interface{}{"true": nil}}}}, true},
		{map[string]interface{}{"specs": map[string]interface{}{"1.1": nil}}, true},
		{map[string]interface{}{"specs": map[string]interface{}{"-7": nil}}, true},
		{map[string]interface{}{"specs": map[string]interface{}{".nan": nil}}, true},
		{map[string]interface{}{"namespaces": []interface{}{map[string]interface{}{"false": 1}}}, true},
	} {
		if got := mayHaveNonStringKeys(tc.tree); got != tc.want {
			t.Errorf("mayHaveNonStringKeys(%v) = %v, want %v", tc.tree, got, tc.want)
		}
	}
}
