package chartsource

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"

	"helm.sh/helm/v4/pkg/chart/common"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"k8s.io/utils/lru"
)

// parsedCharts keeps charts parsed once per content digest: a pass that
// installs one chart for many triggers parses it once, not once per
// install (YAML parsing of Chart.yaml, values.yaml and the archive's
// decompression were most of a local chart's cost). The parsed chart is
// never handed out: Helm mutates the chart it installs (dependencies'
// Enabled, coalesced values), so every caller gets a deep copy of the
// parts Helm may change, sharing only the file contents, which nothing
// writes. Safe for concurrent use; bounded to a few dozen charts.
type parsedCharts struct {
	cache *lru.Cache // content digest -> *chart.Chart
}

// parsedChartsKept bounds the memo: a fleet uses a handful of charts, and an
// entry costs about the chart's unpacked size.
const parsedChartsKept = 32

func newParsedCharts() *parsedCharts {
	return &parsedCharts{cache: lru.New(parsedChartsKept)}
}

// shared is the process-wide memo every loader of this package uses.
var shared = newParsedCharts()

// archive returns a copy of the chart in the .tgz data, parsed once per
// content.
func (p *parsedCharts) archive(data []byte) (*chart.Chart, error) {
	sum := sha256.Sum256(data)
	key := "tgz:" + hex.EncodeToString(sum[:])
	if c, ok := p.cache.Get(key); ok {
		return cloneChart(c.(*chart.Chart)), nil
	}
	c, err := loader.LoadArchive(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	p.cache.Add(key, c)
	return cloneChart(c), nil
}

// path returns a copy of the chart at path (a directory or an archive),
// parsed once per content: the key is a digest of every file's name and
// bytes, so any edit, even of a file Helm ignores, parses it again.
func (p *parsedCharts) path(path string) (*chart.Chart, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		return p.archive(data)
	}
	key, err := dirDigest(path)
	if err != nil {
		// Something the digest cannot follow (a symlinked directory, an
		// unreadable file): load without the memo, and let Helm's loader
		// say what is wrong, if anything.
		return loader.Load(path)
	}
	if c, ok := p.cache.Get(key); ok {
		return cloneChart(c.(*chart.Chart)), nil
	}
	c, err := loader.Load(path)
	if err != nil {
		return nil, err
	}
	p.cache.Add(key, c)
	return cloneChart(c), nil
}

// errSymlinkedDir stops a digest whose directory links to another one: the
// digest would miss changes under the link.
var errSymlinkedDir = errors.New("chart directory holds a symlinked directory or a dangling link")

// dirDigest hashes the names and contents of every regular file under dir,
// in a fixed order, with its path in the key so two copies of a chart in
// different places stay apart (Helm records no path, but an error names it).
func dirDigest(dir string) (string, error) {
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		switch {
		case d.Type().IsRegular():
			files = append(files, p)
		case d.Type()&fs.ModeSymlink != 0:
			if st, err := os.Stat(p); err != nil || st.IsDir() {
				return errSymlinkedDir
			}
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("cannot read chart directory %s: %w", dir, err)
	}
	sort.Strings(files)
	h := sha256.New()
	_, _ = h.Write([]byte(dir + "\x00"))
	for _, f := range files {
		rel, _ := filepath.Rel(dir, f)
		data, err := os.ReadFile(f)
		if err != nil {
			return "", fmt.Errorf("cannot read chart file %s: %w", f, err)
		}
		_, _ = fmt.Fprintf(h, "%s\x00", rel)
		_, _ = h.Write(data)
		n := len(data)
		_, _ = fmt.Fprintf(h, "\x00%d\x00", n)
	}
	return "dir:" + hex.EncodeToString(h.Sum(nil)), nil
}

// cloneChart copies c and its dependencies deeply enough that nothing an
// install or upgrade does to the copy reaches c: every struct and container
// is new; only file contents and schema bytes, which Helm reads but never
// writes, are shared.
func cloneChart(c *chart.Chart) *chart.Chart {
	out := &chart.Chart{
		Raw:           cloneFiles(c.Raw),
		Metadata:      cloneMetadata(c.Metadata),
		Lock:          cloneLock(c.Lock),
		Templates:     cloneFiles(c.Templates),
		Values:        cloneMap(c.Values),
		Schema:        c.Schema,
		SchemaModTime: c.SchemaModTime,
		Files:         cloneFiles(c.Files),
		ModTime:       c.ModTime,
	}
	deps := make([]*chart.Chart, 0, len(c.Dependencies()))
	for _, d := range c.Dependencies() {
		deps = append(deps, cloneChart(d))
	}
	out.SetDependencies(deps...)
	return out
}

func cloneFiles(files []*common.File) []*common.File {
	if files == nil {
		return nil
	}
	out := make([]*common.File, len(files))
	for i, f := range files {
		if f != nil {
			cp := *f
			out[i] = &cp
		}
	}
	return out
}

func cloneMetadata(m *chart.Metadata) *chart.Metadata {
	if m == nil {
		return nil
	}
	cp := *m
	cp.Sources = slices.Clone(m.Sources)
	cp.Keywords = slices.Clone(m.Keywords)
	cp.Annotations = maps.Clone(m.Annotations)
	cp.Maintainers = make([]*chart.Maintainer, 0, len(m.Maintainers))
	for _, mt := range m.Maintainers {
		if mt != nil {
			c := *mt
			cp.Maintainers = append(cp.Maintainers, &c)
		}
	}
	if m.Maintainers == nil {
		cp.Maintainers = nil
	}
	cp.Dependencies = cloneDependencies(m.Dependencies)
	return &cp
}

func cloneLock(l *chart.Lock) *chart.Lock {
	if l == nil {
		return nil
	}
	cp := *l
	cp.Dependencies = cloneDependencies(l.Dependencies)
	return &cp
}

func cloneDependencies(deps []*chart.Dependency) []*chart.Dependency {
	if deps == nil {
		return nil
	}
	out := make([]*chart.Dependency, len(deps))
	for i, d := range deps {
		if d != nil {
			cp := *d
			cp.Tags = slices.Clone(d.Tags)
			cp.ImportValues = cloneSlice(d.ImportValues)
			out[i] = &cp
		}
	}
	return out
}

// cloneMap and cloneSlice copy values as YAML decodes them: maps and lists
// are copied, anything else is a scalar held by value.
func cloneMap(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = cloneValue(v)
	}
	return out
}

func cloneSlice(s []any) []any {
	if s == nil {
		return nil
	}
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = cloneValue(v)
	}
	return out
}

func cloneValue(v any) any {
	switch t := v.(type) {
	case map[string]any:
		return cloneMap(t)
	case common.Values:
		return common.Values(cloneMap(t))
	case []any:
		return cloneSlice(t)
	default:
		return v
	}
}
