// Package metrics defines autox's Prometheus metrics. Their names and labels
// are part of autox's contract (README "Monitoring"); label values are bounded
// by the config (spec names, actions, statuses), never revisions or errors.
package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Result label values.
const (
	Success = "success"
	Error   = "error"
)

// Metrics holds every autox metric, registered on its own registry.
type Metrics struct {
	Registry *prometheus.Registry

	ReconcileTotal      *prometheus.CounterVec
	ReconcileDuration   prometheus.Histogram
	HelmOperations      *prometheus.CounterVec
	Releases            *prometheus.GaugeVec
	ConfigReloadOK      prometheus.Gauge
	ConfigReloadSuccess prometheus.Gauge
	ConfigReloads       *prometheus.CounterVec
	ConfigWatchErrors   prometheus.Counter
	LastPass            prometheus.Gauge
	Leader              prometheus.Gauge
	FencedWrites        prometheus.Counter
}

// New creates and registers the metrics, plus the Go and process collectors.
// queueDepth reports the work queue's length when scraped.
// apiRequests reports the API requests made so far.
func New(queueDepth func() int, apiRequests func() float64) *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		ReconcileTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "autox_reconcile_total", Help: "Reconciles of a spec, by spec and result.",
		}, []string{"spec", "result"}),
		ReconcileDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "autox_reconcile_duration_seconds", Help: "Duration of one spec's reconcile, Helm operations included.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2.5, 12),
		}),
		HelmOperations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "autox_helm_operations_total", Help: "Helm writes by action (install, upgrade, reinstall, uninstall, rollback) and result.",
		}, []string{"action", "result"}),
		Releases: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "autox_releases", Help: "autox-managed releases by Helm status, as of the last periodic pass.",
		}, []string{"status"}),
		ConfigReloadOK: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "autox_config_last_reload_successful", Help: "1 when the last config reload was applied or found nothing new, 0 when the file was rejected.",
		}),
		ConfigReloadSuccess: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "autox_config_last_reload_success_timestamp_seconds", Help: "Unix time of the last config load that was valid.",
		}),
		ConfigReloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "autox_config_reloads_total", Help: "Config file loads after a change, by result.",
		}, []string{"result"}),
		ConfigWatchErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "autox_config_watch_errors_total", Help: "Failures of the config file watch (fsnotify); the periodic check goes on without it.",
		}),
		LastPass: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "autox_last_pass_timestamp_seconds", Help: "Unix time when the last pass over every spec completed.",
		}),
		Leader: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "autox_leader", Help: "1 while this process leads (is the one that writes).",
		}),
		FencedWrites: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "autox_fenced_writes_total", Help: "Writes refused because the leadership term that started them had ended.",
		}),
	}
	depth := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "autox_workqueue_depth", Help: "Specs waiting to be reconciled.",
	}, func() float64 { return float64(queueDepth()) })
	requests := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "autox_kube_api_requests_total", Help: "Requests made to the Kubernetes API server, Helm's included.",
	}, apiRequests)
	m.Registry.MustRegister(requests, m.ReconcileTotal, m.ReconcileDuration, m.HelmOperations, m.Releases,
		m.ConfigReloadOK, m.ConfigReloadSuccess, m.ConfigReloads, m.ConfigWatchErrors, m.LastPass, m.Leader, m.FencedWrites, depth,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	for _, r := range []string{Success, Error} {
		m.ConfigReloads.WithLabelValues(r)
		for _, a := range []string{"install", "upgrade", "reinstall", "uninstall", "rollback"} {
			m.HelmOperations.WithLabelValues(a, r)
		}
	}
	return m
}

// Result returns the result label for err.
func Result(err error) string {
	if err != nil {
		return Error
	}
	return Success
}

// ConfigLoaded records a config load: ok means the file was valid.
func (m *Metrics) ConfigLoaded(ok bool, now time.Time) {
	if ok {
		m.ConfigReloadOK.Set(1)
		m.ConfigReloadSuccess.Set(float64(now.Unix()))
		return
	}
	m.ConfigReloadOK.Set(0)
}

// ForgetSpec deletes the series of a spec that left the config.
func (m *Metrics) ForgetSpec(spec string) {
	m.ReconcileTotal.DeletePartialMatch(prometheus.Labels{"spec": spec})
}

// SetReleases replaces the release status counts.
func (m *Metrics) SetReleases(byStatus map[string]int) {
	m.Releases.Reset()
	for s, n := range byStatus {
		m.Releases.WithLabelValues(s).Set(float64(n))
	}
}
