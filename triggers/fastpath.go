package triggers

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/helmops"
)

// Digest identifies what a release should run: chart name, chart version and
// the exact values. autox stores it as a release label so a pass can compare
// from record metadata alone. JSON encoding sorts map keys, so equal values
// give equal digests.
func Digest(chartName, chartVersion string, values map[string]interface{}) (string, error) {
	b, err := json.Marshal(struct {
		Chart, Version string
		Values         map[string]interface{}
	}{chartName, chartVersion, values})
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16]), nil
}

// InSync reports, from the live trigger observation and the release records'
// labels only, that a spec certainly needs no Helm call. It answers false
// whenever it cannot be sure; the spec then gets the full reconcile, which
// decodes the releases and compares chart and values for real. It never
// answers true for a release another Helm client changed: that write made a
// revision autox's revision label does not name.
func InSync(specName string, spec *config.Spec, obs Observation, recs []helmops.Record, chartID func(config.Chart) (string, string, bool)) bool {
	state, _ := Evaluate(spec.Trigger, obs)
	if !state.Wanted() {
		return len(recs) == 0
	}
	if len(recs) != len(spec.ReleaseSpecs) {
		return false
	}
	for _, rec := range recs {
		rs := spec.ReleaseSpecs[rec.ReleaseSpec]
		if rs == nil || rec.Spec != specName || rec.Name != rs.ReleaseName || rec.Namespace != rs.Namespace ||
			rec.Status != "deployed" || rec.Digest == "" || rec.AutoxRevision != rec.Revision {
			return false
		}
		name, version, ok := chartID(rs.Chart)
		if !ok {
			return false
		}
		want, err := Digest(name, version, DesiredValues(rs, spec.Trigger, obs.Labels))
		if err != nil || want != rec.Digest {
			return false
		}
	}
	return true
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
