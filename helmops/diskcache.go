package helmops

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

func (c *ChartCache) store(key string, data []byte) {
	path := filepath.Join(c.opts.Dir, "charts", key+".tgz")
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
