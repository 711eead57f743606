package triggers

import (
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/util/workqueue"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/triggers/plan"
)

// The result label's values.
const (
	resultSuccess = "success"
	resultError   = "error"
)

// result is the result label of an outcome.
func result(err error) string {
	if err != nil {
		return resultError
	}
	return resultSuccess
}

// Metrics are the control loop's metrics (README "Monitoring"). One set,
// registered once on the registry it is given, serves the controllers of
// every leadership term. Label values are bounded by the config.
type Metrics struct {
	reconciles        *prometheus.CounterVec
	reconcileDuration prometheus.Histogram
	helmOperations    *prometheus.CounterVec
	// releases is by status, and depth one series; with shards
	// (NewShardMetrics) both are by shard too, each shard's controller
	// writing its own series through its copy (ForShard).
	releases     *prometheus.GaugeVec
	lastPass     prometheus.Gauge
	depth        *prometheus.GaugeVec
	objects      *prometheus.GaugeVec
	helmDuration *prometheus.HistogramVec
	passDuration prometheus.Histogram
	releaseSpecs *releaseSpecGauges
	suspended    *prometheus.GaugeVec
	// objectTerms are the terms whose passes set each selector spec's
	// autox_selector_objects (shared by every copy ForShard makes).
	objectTerms *objectTerms

	// sharded: releases and depth have the shard label. shard is set on
	// the copy ForShard makes for the controller of one shard.
	sharded bool
	shard   *Shard
}

// NewMetrics creates the control loop's metrics and registers them on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) { return newMetrics(reg, false) }

// NewShardMetrics is NewMetrics for --shards above 1: autox_releases and
// autox_workqueue_depth have a shard label, and each shard's controller
// must use its copy (ForShard), so that one shard's pass, queue and term
// end touch only its own series.
func NewShardMetrics(reg prometheus.Registerer) (*Metrics, error) { return newMetrics(reg, true) }

func newMetrics(reg prometheus.Registerer, sharded bool) (*Metrics, error) {
	var byShard []string
	if sharded {
		byShard = []string{"shard"}
	}
	m := &Metrics{sharded: sharded,
		reconciles: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "autox_reconcile_total", Help: "Reconciles of a spec, by spec and result.",
		}, []string{"spec", "result"}),
		reconcileDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "autox_reconcile_duration_seconds", Help: "Duration of one spec's reconcile, Helm operations included.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2.5, 12),
		}),
		helmOperations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "autox_helm_operations_total", Help: "Helm writes by action (install, upgrade, reinstall, uninstall, rollback) and result.",
		}, []string{"action", "result"}),
		releases: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "autox_releases", Help: "autox-managed releases by Helm status, as of the last periodic pass; with --shards above 1, of each shard this replica holds.",
		}, append(byShard, "status")),
		lastPass: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "autox_last_pass_timestamp_seconds", Help: "Unix time when the last pass over every spec completed.",
		}),
		depth: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "autox_workqueue_depth", Help: "Specs and selector objects waiting to be reconciled; with --shards above 1, by shard this replica holds.",
		}, byShard),
		objects: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "autox_selector_objects", Help: "Objects a selector spec selects with its trigger labels set, as of the last periodic pass, by state: served, over_limit (past maxObjects) or conflict (claimed by another spec too).",
		}, []string{"spec", "state"}),
		helmDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "autox_helm_operation_duration_seconds", Help: "Duration of one Helm write by action (install, upgrade, reinstall, uninstall, rollback), failed ones included.",
			Buckets: prometheus.ExponentialBuckets(0.05, 2, 14),
		}, []string{"action"}),
		passDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "autox_pass_duration_seconds", Help: "Duration of one periodic pass, from its listing until every spec it queued was reconciled.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2.5, 12),
		}),
		releaseSpecs: newReleaseSpecGauges(),
		suspended:    newSuspendedGauge(),
		objectTerms:  &objectTerms{by: map[string]map[int]bool{}},
	}
	cs := []prometheus.Collector{m.reconciles, m.reconcileDuration, m.helmOperations, m.releases, m.lastPass, m.depth, m.objects, m.helmDuration, m.passDuration, m.suspended, m.releaseSpecs}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	// Every action's series exist from the start, so rates and alerts see
	// the first failure.
	for _, a := range []plan.Action{plan.ActionInstall, plan.ActionUpgrade, plan.ActionReinstall, plan.ActionUninstall, plan.ActionRollback, plan.ActionAdopt} {
		m.helmDuration.WithLabelValues(string(a))
		for _, r := range []string{resultSuccess, resultError} {
			m.helmOperations.WithLabelValues(string(a), r)
		}
	}
	return m, nil
}

// forgetSpec deletes the series of a spec that left the config.
func (m *Metrics) forgetSpec(spec string) {
	m.reconciles.DeletePartialMatch(prometheus.Labels{"spec": spec})
	m.objectTerms.forget(spec, m.objects)
	m.releaseSpecs.forget(spec)
}

// setObjects sets a selector spec's object counts; m may be nil.
func (m *Metrics) setObjects(spec string, served, overLimit, conflict int) {
	if m == nil {
		return
	}
	m.objectTerms.set(spec, m.termKey(), func() {
		m.objects.WithLabelValues(spec, "served").Set(float64(served))
		m.objects.WithLabelValues(spec, "over_limit").Set(float64(overLimit))
		m.objects.WithLabelValues(spec, "conflict").Set(float64(conflict))
	})
}

// termKey names the terms of m's controller among objectTerms' setters:
// its shard, or -1 without shards.
func (m *Metrics) termKey() int {
	if m.shard == nil {
		return -1
	}
	return m.shard.Index
}

// objectTerms keeps autox_selector_objects only while a term that sets it
// runs. Every shard's pass counts the whole selector (the same figures),
// so a spec's series are the replica's while any of its held shards
// runs, and go with the last: a replica that holds none of them, or no
// longer leads, shows none rather than its last count forever.
type objectTerms struct {
	mu sync.Mutex
	by map[string]map[int]bool // spec → the terms (termKey) that set it
}

// set records term as a setter of spec and sets its series (under the
// lock, so a term's end cannot slip between the two).
func (o *objectTerms) set(spec string, term int, setSeries func()) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.by[spec] == nil {
		o.by[spec] = map[int]bool{}
	}
	o.by[spec][term] = true
	setSeries()
}

// ended drops term from every spec's setters and deletes the series of
// the specs no running term sets.
func (o *objectTerms) ended(term int, objects *prometheus.GaugeVec) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for spec, terms := range o.by {
		delete(terms, term)
		if len(terms) == 0 {
			delete(o.by, spec)
			objects.DeletePartialMatch(prometheus.Labels{"spec": spec})
		}
	}
}

// forget deletes a spec that left the config.
func (o *objectTerms) forget(spec string, objects *prometheus.GaugeVec) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.by, spec)
	objects.DeletePartialMatch(prometheus.Labels{"spec": spec})
}

// ForShard is m for the controller of shard sh: with NewShardMetrics, its
// release counts and queue depth are the shard's series, and its term's
// end forgets only what is the shard's.
func (m *Metrics) ForShard(sh *Shard) *Metrics {
	if m == nil || sh == nil {
		return m
	}
	c := *m
	c.shard = sh
	return &c
}

// labels are the label values of a series of releases or depth: the
// shard's first, with shards.
func (m *Metrics) labels(values ...string) []string {
	if !m.sharded {
		return values
	}
	i := ""
	if m.shard != nil {
		i = strconv.Itoa(m.shard.Index)
	}
	return append([]string{i}, values...)
}

// setReleases replaces the release status counts of the pass's listing.
// With shards, each shard counts only its own releases (setShardReleases),
// from the same listing, and this does nothing.
func (m *Metrics) setReleases(byStatus map[string]int) {
	if m.sharded {
		return
	}
	m.releases.Reset()
	for s, n := range byStatus {
		m.releases.WithLabelValues(s).Set(float64(n))
	}
}

// setShardReleases replaces the release status counts of m's shard.
func (m *Metrics) setShardReleases(byStatus map[string]int) {
	if m == nil || !m.sharded {
		return
	}
	m.releases.DeletePartialMatch(prometheus.Labels{"shard": m.labels()[0]})
	for s, n := range byStatus {
		m.releases.WithLabelValues(m.labels(s)...).Set(float64(n))
	}
}

// queueMetrics gives the work queue its depth gauge and no other metric:
// client-go's queue keeps the gauge itself, by its Add and Get. Each
// shard's queue has a gauge of its own: client-go counts with Inc and Dec,
// and sets nothing, so two queues on one gauge would make it their sum
// until a new term's zero wiped the other queue's part.
type queueMetrics struct {
	workqueue.MetricsProvider
	depth prometheus.Gauge
}

func (q queueMetrics) NewDepthMetric(string) workqueue.GaugeMetric { return q.depth }

// queueProvider returns the metrics provider of a controller's queue. A new
// term's queue starts empty, so the gauge starts at zero.
func (m *Metrics) queueProvider() workqueue.MetricsProvider {
	if m == nil {
		return nil
	}
	depth := m.depth.WithLabelValues(m.labels()...)
	depth.Set(0)
	return queueMetrics{MetricsProvider: noQueueMetrics{}, depth: depth}
}

// noQueueMetrics is a workqueue.MetricsProvider that keeps nothing.
type noQueueMetrics struct{}

// noMetric is every kind of queue metric, keeping nothing.
type noMetric struct{}

func (noMetric) Inc()            {}
func (noMetric) Dec()            {}
func (noMetric) Set(float64)     {}
func (noMetric) Observe(float64) {}

func (noQueueMetrics) NewDepthMetric(string) workqueue.GaugeMetric            { return noMetric{} }
func (noQueueMetrics) NewAddsMetric(string) workqueue.CounterMetric           { return noMetric{} }
func (noQueueMetrics) NewLatencyMetric(string) workqueue.HistogramMetric      { return noMetric{} }
func (noQueueMetrics) NewWorkDurationMetric(string) workqueue.HistogramMetric { return noMetric{} }
func (noQueueMetrics) NewUnfinishedWorkSecondsMetric(string) workqueue.SettableGaugeMetric {
	return noMetric{}
}
func (noQueueMetrics) NewLongestRunningProcessorSecondsMetric(string) workqueue.SettableGaugeMetric {
	return noMetric{}
}
func (noQueueMetrics) NewRetriesMetric(string) workqueue.CounterMetric { return noMetric{} }

// newSuspendedGauge counts, by level, what the config in force suspends.
func newSuspendedGauge() *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "autox_suspended",
		Help: "What the config in force suspends, as the leader applies it: level=spec counts specs with suspend: true, level=release_spec the release specs held (suspended themselves or by their spec). autox makes no Helm write for them.",
	}, []string{"level"})
}

// setSuspended sets the suspended gauges from cfg; m may be nil.
func (m *Metrics) setSuspended(cfg *config.Config) {
	if m == nil {
		return
	}
	var specs, releaseSpecs int
	for _, name := range cfg.SpecNames() {
		spec := cfg.Specs[name]
		specs += b2i(spec.Suspend)
		for _, id := range spec.ReleaseSpecIDs() {
			releaseSpecs += b2i(spec.Suspended(id) != "")
		}
	}
	m.suspended.WithLabelValues("spec").Set(float64(specs))
	m.suspended.WithLabelValues("release_spec").Set(float64(releaseSpecs))
}
