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

	ConfigReloadOK      prometheus.Gauge
	ConfigReloadSuccess prometheus.Gauge
	ConfigReloads       *prometheus.CounterVec
	ConfigWatchErrors   prometheus.Counter
	Leader              prometheus.Gauge
	FencedWrites        prometheus.Counter
}

// New creates and registers the process's metrics, plus the Go and process
// collectors; the control loop registers its own (triggers.NewMetrics).
// apiRequests reports the API requests made so far.
func New(apiRequests func() float64) *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
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
		Leader: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "autox_leader", Help: "1 while this process leads (is the one that writes).",
		}),
		FencedWrites: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "autox_fenced_writes_total", Help: "Writes refused because the leadership term that started them had ended.",
		}),
	}
	requests := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "autox_kube_api_requests_total", Help: "Requests made to the Kubernetes API server, Helm's included.",
	}, apiRequests)
	m.Registry.MustRegister(requests,
		m.ConfigReloadOK, m.ConfigReloadSuccess, m.ConfigReloads, m.ConfigWatchErrors, m.Leader, m.FencedWrites,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	for _, r := range []string{Success, Error} {
		m.ConfigReloads.WithLabelValues(r)
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
