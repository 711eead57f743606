package triggers

import (
	"errors"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/autox-dev/autox/internal/format"
	"github.com/autox-dev/autox/triggers/apply"
	"github.com/autox-dev/autox/triggers/plan"
)

// What needs a human is a state that lasts, not one failed attempt: the
// gauges here say, per release spec, how many of its releases are failing
// now (one for a named trigger, one per object for a selector spec), so an
// alert can wait for a failure to outlast several resyncs whatever the
// backoff. Label values are the config's spec and release spec ids.

// outcome is what one reconcile found for one release spec of one object.
type outcome struct {
	// failing: its release could not be made as declared (Helm, the chart,
	// a values source, or nothing could be read).
	failing bool
	// source: a valuesFrom Secret or ConfigMap could not be used.
	source bool
	// stale: its release was left pending by a dead process and the
	// recovery (rollback, or uninstall and install) failed.
	stale bool
	// exhausted: its remediation retries are used up for what it would
	// install; autox makes no further attempt (plan/retries.go).
	exhausted bool
}

// outcomes decides, from one reconcile's plan failures, steps and their
// errors (errs[i] is steps[i]'s), what each release spec came to: a failed
// step of a release its plan found stale (its state, classified with its
// release spec's own timeout) is a recovery that failed. Release specs not
// named are fine.
func outcomes(failed []plan.Failure, steps []plan.Step, errs []error) map[string]outcome {
	out := map[string]outcome{}
	for _, f := range failed {
		oc := out[f.ReleaseSpec]
		oc.failing = true
		var source *plan.SourceError
		oc.source = oc.source || errors.As(f.Err, &source)
		out[f.ReleaseSpec] = oc
	}
	for i, s := range steps {
		var err error
		if i < len(errs) {
			err = errs[i]
		}
		if exhausted(s, err) {
			oc := out[s.ReleaseSpec]
			oc.failing, oc.exhausted = true, true
			out[s.ReleaseSpec] = oc
		}
		if err == nil {
			continue
		}
		oc := out[s.ReleaseSpec]
		oc.failing = true
		oc.stale = oc.stale || s.State == plan.ReleaseStaleInstall || s.State == plan.ReleaseStaleUpgrade
		out[s.ReleaseSpec] = oc
	}
	return out
}

// releaseSpecGauges keeps the last outcome of each (spec, release spec,
// object) that was not fine, and reports the gauges counting them when
// scraped (a prometheus.Collector). Every release spec of the config has a
// series of each gauge, zero when fine; the series are made at each scrape
// from the outcomes kept, not kept as metric objects: four gauge vectors
// with a series per release spec were a fifth of autox's heap at 20,000
// release specs (BENCHMARKS.md), which pushed a large fleet's cold
// convergence against the soft memory limit.
type releaseSpecGauges struct {
	failing, source, stale, exhausted *prometheus.Desc

	mu sync.Mutex
	// last[spec][releaseSpec][object]; object "" for a named spec. A
	// release spec without an outcome that is not fine holds a nil map: its
	// series are zero.
	last map[string]map[string]map[string]outcome
}

func newReleaseSpecGauges() *releaseSpecGauges {
	labels := []string{"spec", "release_spec"}
	return &releaseSpecGauges{
		failing: prometheus.NewDesc("autox_release_spec_failing",
			"Releases of a release spec (one per object for a selector spec) whose last reconcile failed: a Helm operation, the chart, a values source, or the reads it needs.",
			labels, nil),
		source: prometheus.NewDesc("autox_values_source_failing",
			"Releases of a release spec whose valuesFrom Secret or ConfigMap could not be used at their last reconcile (missing, no such key, not a YAML map, unreadable); the release runs on as it was.",
			labels, nil),
		stale: prometheus.NewDesc("autox_stale_release_unrecovered",
			"Releases of a release spec left pending (or uninstalling) past --helm-timeout + 30s whose recovery (rollback, or uninstall and install) failed at their last reconcile.",
			labels, nil),
		exhausted: prometheus.NewDesc("autox_release_spec_retries_exhausted",
			"Releases of a release spec whose remediation retries are used up for what it would install, at their last reconcile: autox makes no further attempt until the config, the chart or the trigger changes.",
			labels, nil),
		last: map[string]map[string]map[string]outcome{},
	}
}

// record sets the outcomes of one reconcile of spec's object (zero for the
// spec's own key). ids are the spec's release specs in the config: each gets
// a series (zero when fine), and those no longer in it lose theirs.
func (g *releaseSpecGauges) record(spec string, obj format.Object, ids []string, got map[string]outcome) {
	g.mu.Lock()
	defer g.mu.Unlock()
	bySpec := g.last[spec]
	if bySpec == nil {
		bySpec = map[string]map[string]outcome{}
	}
	want := map[string]bool{}
	object := obj.String()
	if obj.IsZero() {
		object = ""
	}
	for _, id := range ids {
		want[id] = true
		byObject := bySpec[id]
		if oc := got[id]; oc != (outcome{}) {
			if byObject == nil {
				byObject = map[string]outcome{}
			}
			byObject[object] = oc
		} else {
			delete(byObject, object)
		}
		if len(byObject) == 0 {
			byObject = nil
		}
		bySpec[id] = byObject
	}
	for id := range bySpec {
		if !want[id] {
			delete(bySpec, id)
		}
	}
	if len(bySpec) == 0 {
		delete(g.last, spec)
	} else {
		g.last[spec] = bySpec
	}
}

// counts are the gauges' values for one release spec: how many of its
// objects' outcomes are failing, source, stale and exhausted.
func counts(byObject map[string]outcome) (failing, source, stale, exhausted int) {
	for _, oc := range byObject {
		failing, source, stale = failing+b2i(oc.failing), source+b2i(oc.source), stale+b2i(oc.stale)
		exhausted += b2i(oc.exhausted)
	}
	return failing, source, stale, exhausted
}

// Describe is prometheus.Collector's.
func (g *releaseSpecGauges) Describe(ch chan<- *prometheus.Desc) {
	ch <- g.failing
	ch <- g.source
	ch <- g.stale
	ch <- g.exhausted
}

// Collect is prometheus.Collector's: a series of each gauge per release
// spec kept, in the order the registry sorts each family's series in (by
// label value, the labels by name: release_spec, then spec). Its sort then
// finds them in order, in one sweep: at 20,000 release specs, sorting them
// from the maps' random order was about 40 % of a scrape's CPU.
func (g *releaseSpecGauges) Collect(ch chan<- prometheus.Metric) {
	g.mu.Lock()
	defer g.mu.Unlock()
	type series struct {
		id, spec                          string
		failing, source, stale, exhausted int
	}
	var all []series
	for spec, bySpec := range g.last {
		for id, byObject := range bySpec {
			s := series{id: id, spec: spec}
			s.failing, s.source, s.stale, s.exhausted = counts(byObject)
			all = append(all, s)
		}
	}
	sort.Slice(all, func(a, b int) bool {
		if all[a].id != all[b].id {
			return all[a].id < all[b].id
		}
		return all[a].spec < all[b].spec
	})
	for _, s := range all {
		for _, d := range []struct {
			desc *prometheus.Desc
			n    int
		}{{g.failing, s.failing}, {g.source, s.source}, {g.stale, s.stale}, {g.exhausted, s.exhausted}} {
			// An error (a label value that is not UTF-8) leaves that
			// series out rather than failing the scrape.
			if m, err := prometheus.NewConstMetric(d.desc, prometheus.GaugeValue, float64(d.n), s.spec, s.id); err == nil {
				ch <- m
			}
		}
	}
}

// reset drops every spec.
func (g *releaseSpecGauges) reset() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.last = map[string]map[string]map[string]outcome{}
}

// forgetWhere drops the outcomes of the (spec, object) where says; the
// release specs' series stay, counting what is left.
func (g *releaseSpecGauges) forgetWhere(where func(spec, object string) bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for spec, bySpec := range g.last {
		for id, byObject := range bySpec {
			for object := range byObject {
				if where(spec, object) {
					delete(byObject, object)
				}
			}
			if len(byObject) == 0 {
				bySpec[id] = nil
			}
		}
	}
}

// forget drops a spec that left the config.
func (g *releaseSpecGauges) forget(spec string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.last, spec)
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// HelmOperation counts one Helm write of the applier and its duration.
func (m *Metrics) HelmOperation(action plan.Action, err error, took time.Duration) {
	m.helmOperations.WithLabelValues(string(action), result(err)).Inc()
	m.helmDuration.WithLabelValues(string(action)).Observe(took.Seconds())
}

// endTerm drops what a leadership term knew of release specs: a standby's
// gauges would otherwise repeat its last term's failures forever, beside
// what the new leader reports. m may be nil.
//
// A shard's term forgets only its shard's: the outcomes of its keys, and its
// series of releases and queue depth. The replica's other shards run on.
// autox_selector_objects goes with the last term that set it (objectTerms).
func (m *Metrics) endTerm() {
	if m != nil {
		m.objectTerms.ended(m.termKey(), m.objects)
	}
	switch {
	case m == nil:
	case m.shard == nil:
		m.releaseSpecs.reset()
	default:
		m.releaseSpecs.forgetWhere(m.shard.ownsOutcome)
		if m.sharded {
			i := m.labels()[0]
			m.releases.DeletePartialMatch(prometheus.Labels{"shard": i})
			m.depth.DeleteLabelValues(i)
		}
	}
}

// releaseSpecOutcomes records one reconcile's outcomes for the release
// specs ids of spec; m may be nil.
func (m *Metrics) releaseSpecOutcomes(spec string, obj format.Object, ids []string, got map[string]outcome) {
	if m != nil {
		m.releaseSpecs.record(spec, obj, ids, got)
	}
}

// releaseSpecIDs are the release specs of a spec in the config in force,
// none when it left.
func (r *Reconciler) releaseSpecIDs(spec string) []string {
	if s := r.opts.State.Config().Specs[spec]; s != nil {
		return s.ReleaseSpecIDs()
	}
	return nil
}

// exhausted reports whether step s (err: its error) finds its release
// spec's retries used up: held for it, remediated for it, or the failed
// attempt that used them up.
func exhausted(s plan.Step, err error) bool {
	if errors.Is(err, apply.ErrRetriesExhausted) {
		return true
	}
	if s.Action == plan.ActionExhausted {
		return true
	}
	return s.Retries != nil && s.Retries.Remedy
}
