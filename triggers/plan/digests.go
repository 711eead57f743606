package plan

import (
	"strings"
	"sync"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/internal/format"
)

// Digests remembers the digests of desired values that InSync computed, so
// that a pass over a fleet where nothing changed computes none: at 20,000
// releases the JSON and sha256 of every release's values were half of a
// quiet pass's triage (BenchmarkTriage10000).
//
// A digest is remembered under everything it is made of, for one config:
// the spec and release spec (their values and trigger, fixed by the
// config), the object of a selector spec, the chart's name and version,
// and the values of the trigger labels the spec injects. A release spec
// with valuesFrom is never remembered: its sources are read anew by every
// pass. A new config forgets everything. Each pass keeps what it or the
// pass before used, so the memo holds at most two passes' releases.
//
// A Digests is safe for concurrent use; nil remembers nothing.
type Digests struct {
	mu        sync.Mutex
	cfg       *config.Config
	cur, prev map[digestKey]string
}

type digestKey struct {
	spec, releaseSpec string
	object            format.Object
	chart             ChartID
	labels            string
}

// NewDigests returns an empty memo.
func NewDigests() *Digests { return &Digests{} }

// newPass starts a pass under cfg: what the pass before last used and
// this one does not is forgotten; everything, under a config of its own.
func (d *Digests) newPass(cfg *config.Config) {
	if d == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cfg != cfg {
		d.cfg, d.prev = cfg, nil
	} else {
		d.prev = d.cur
	}
	d.cur = make(map[digestKey]string, len(d.prev))
}

// digestKeyOf is the memo's key of release spec id of spec (in the form InSync
// was given, for object obj) under trigger labels; ok is false when the
// digest may not be remembered (valuesFrom).
func digestKeyOf(specName, id string, spec *config.Spec, rs *config.ReleaseSpec, obj format.Object, chart ChartID, labels map[string]string) (digestKey, bool) {
	if len(rs.ValuesFrom) > 0 {
		return digestKey{}, false
	}
	// InjectedValues takes these labels' values, "" for a missing one.
	var b strings.Builder
	for _, k := range spec.Trigger.Labels {
		b.WriteString(labels[k])
		b.WriteByte(0)
	}
	return digestKey{spec: specName, releaseSpec: id, object: obj, chart: chart, labels: b.String()}, true
}

// get returns the digest remembered under k for cfg; compute makes it when
// there is none (and it is remembered unless compute fails). Under a
// config other than the pass's (newPass) it remembers nothing.
func (d *Digests) get(cfg *config.Config, k digestKey, compute func() (string, error)) (string, error) {
	if d == nil {
		return compute()
	}
	d.mu.Lock()
	if d.cfg != cfg || d.cur == nil {
		d.mu.Unlock()
		return compute()
	}
	if v, ok := d.cur[k]; ok {
		d.mu.Unlock()
		return v, nil
	}
	if v, ok := d.prev[k]; ok {
		d.cur[k] = v
		d.mu.Unlock()
		return v, nil
	}
	d.mu.Unlock()
	v, err := compute()
	if err != nil {
		return "", err
	}
	d.mu.Lock()
	if d.cfg == cfg && d.cur != nil {
		d.cur[k] = v
	}
	d.mu.Unlock()
	return v, nil
}
