package watch

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the config file's metrics (docs/operations.md "Monitoring"), registered
// on the registry they are given.
type Metrics struct {
	lastOK      prometheus.Gauge
	lastLoad    prometheus.Gauge
	reloads     *prometheus.CounterVec
	watchErrors prometheus.Counter
	fallback    prometheus.Gauge
}

// NewMetrics creates the config file's metrics and registers them on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		lastOK: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "autox_config_last_reload_successful", Help: "1 when the config file holds the config in force, 0 while it is rejected.",
		}),
		lastLoad: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "autox_config_last_reload_success_timestamp_seconds", Help: "Unix time of the last config load that was valid (at start, or a change applied).",
		}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "autox_config_reloads_total", Help: "Config file loads after a change, by result; a rejected content counts once.",
		}, []string{"result"}),
		watchErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "autox_config_watch_errors_total", Help: "Failures of the config file watch (fsnotify); the periodic check goes on without it.",
		}),
		fallback: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "autox_config_watch_fallback", Help: "1 while the config directory cannot be watched and only the periodic check (--config-check-interval) sees changes.",
		}),
	}
	for _, c := range []prometheus.Collector{m.lastOK, m.lastLoad, m.reloads, m.watchErrors, m.fallback} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	m.reloads.WithLabelValues("success")
	m.reloads.WithLabelValues("error")
	return m, nil
}

// loaded records a config loaded at start.
func (m *Metrics) loaded(now time.Time) {
	if m == nil {
		return
	}
	m.lastOK.Set(1)
	m.lastLoad.Set(float64(now.Unix()))
}

// outcome records what one check did.
func (m *Metrics) outcome(o Outcome, now time.Time) {
	if m == nil {
		return
	}
	switch o {
	case Applied:
		m.reloads.WithLabelValues("success").Inc()
		m.loaded(now)
	case Unchanged:
		// Back to the config in force (a bad edit reverted): nothing was
		// loaded, so the load time stays.
		m.lastOK.Set(1)
	case Rejected:
		m.reloads.WithLabelValues("error").Inc()
		m.lastOK.Set(0)
	case StillRejected:
		// The same rejected content again: counted once.
		m.lastOK.Set(0)
	case Unsettled, Canceled:
		// Nothing was judged; the next check will.
	}
}

func (m *Metrics) watchError() {
	if m != nil {
		m.watchErrors.Inc()
	}
}

// onFallback records whether changes are seen by the periodic check alone.
func (m *Metrics) onFallback(fallback bool) {
	if m != nil {
		m.fallback.Set(b2f(fallback))
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
