package chartsource

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
)

// The ChartCache's disk cache: chart archives stored under their digest in
// Dir/charts, verified against it when read.

// cached returns a cached chart archive. A "sha256-<hex>" entry is checked
// against its name, so a corrupted file is fetched again, not installed.
func (c *ChartCache) cached(key string) ([]byte, bool) {
	data, err := os.ReadFile(filepath.Join(c.opts.Dir, "charts", key+".tgz"))
	if err != nil {
		return nil, false
	}
	if hexSum, ok := strings.CutPrefix(key, "sha256-"); ok {
		sum := sha256.Sum256(data)
		if !strings.EqualFold(hex.EncodeToString(sum[:]), hexSum) {
			return nil, false
		}
	}
	return data, true
}

// cachedArchive returns the cached archive of key, with its cached
// provenance file when verify needs one (else it is not found: the
// provenance file is fetched with the archive).
func (c *ChartCache) cachedArchive(key string, verify bool) (archive, bool) {
	data, ok := c.cached(key)
	if !ok {
		return archive{}, false
	}
	a := archive{data: data}
	if verify {
		if a.prov = c.cachedProv(key); a.prov == nil {
			return archive{}, false
		}
	}
	return a, true
}

// cachedProv returns the provenance file stored with a cached archive, nil
// for none. It needs no check of its own: chart.verify checks it each time.
func (c *ChartCache) cachedProv(key string) []byte {
	data, err := os.ReadFile(filepath.Join(c.opts.Dir, "charts", key+".tgz.prov"))
	if err != nil {
		return nil
	}
	return data
}

func (c *ChartCache) store(key string, data []byte) { c.write(key+".tgz", data) }

// storeProv keeps an archive's provenance file next to it.
func (c *ChartCache) storeProv(key string, prov []byte) { c.write(key+".tgz.prov", prov) }

func (c *ChartCache) write(name string, data []byte) {
	path := filepath.Join(c.opts.Dir, "charts", name)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err == nil {
		err = os.Rename(tmp, path)
		if err == nil {
			return
		}
	}
	// A read-only or full disk only costs a download next time.
	c.opts.Log.Warn().Str("path", path).Msg("cannot write the chart cache")
}
