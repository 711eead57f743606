package chartsource

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"

	"helm.sh/helm/v4/pkg/registry"
)

// The ChartCache's disk cache: chart archives stored under their digest in
// Dir/charts, verified against it when read.

// cached returns a cached chart archive. A "sha256-<hex>" entry is checked
// against its name, so a corrupted file is fetched again, not installed. An
// "oci-sha256-<hex>" entry is named by its OCI manifest's digest, which is
// not the archive's: the manifest is kept beside it (storeManifest), and
// the entry is used only when the manifest still has that digest and its
// chart layer the archive's — a pinned chart is installed as pinned, from
// the disk as from the registry.
func (c *ChartCache) cached(key string) ([]byte, bool) {
	data, err := os.ReadFile(filepath.Join(c.opts.Dir, "charts", key+".tgz"))
	if err != nil {
		return nil, false
	}
	if hexSum, ok := strings.CutPrefix(key, "sha256-"); ok && !sameSum(data, hexSum) {
		return nil, false
	}
	if hexSum, ok := strings.CutPrefix(key, "oci-sha256-"); ok && !c.manifestHolds(key, hexSum, data) {
		return nil, false
	}
	return data, true
}

// sameSum tells whether data's sha256 is hexSum.
func sameSum(data []byte, hexSum string) bool {
	sum := sha256.Sum256(data)
	return strings.EqualFold(hex.EncodeToString(sum[:]), hexSum)
}

// manifestHolds tells whether the OCI manifest kept for key has the sha256
// hexSum and names archive as its chart layer. An entry without its
// manifest (cached by an older autox) is fetched again.
func (c *ChartCache) manifestHolds(key, hexSum string, archive []byte) bool {
	manifest, err := os.ReadFile(filepath.Join(c.opts.Dir, "charts", key+".manifest.json"))
	if err != nil || !sameSum(manifest, hexSum) {
		return false
	}
	var m struct {
		Layers []struct {
			MediaType string `json:"mediaType"`
			Digest    string `json:"digest"`
		} `json:"layers"`
	}
	if json.Unmarshal(manifest, &m) != nil {
		return false
	}
	for _, l := range m.Layers {
		if l.MediaType == registry.ChartLayerMediaType || l.MediaType == registry.LegacyChartLayerMediaType {
			layer, ok := strings.CutPrefix(l.Digest, "sha256:")
			return ok && sameSum(archive, layer)
		}
	}
	return false
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

// storeManifest keeps the OCI manifest an archive was pulled by next to it,
// which checks the archive when it is read (cached).
func (c *ChartCache) storeManifest(key string, manifest []byte) {
	c.write(key+".manifest.json", manifest)
}

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
