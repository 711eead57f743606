package leader

import "github.com/prometheus/client_golang/prometheus"

// Metrics are leader election's metrics (docs/operations.md "Monitoring"), registered
// on the registry they are given.
type Metrics struct {
	leading prometheus.Gauge
	fenced  prometheus.Counter
}

// NewMetrics creates leader election's metrics and registers them on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		leading: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "autox_leader", Help: "1 while this process leads (is the one that writes).",
		}),
		fenced: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "autox_fenced_writes_total", Help: "Writes refused because the leadership term that started them had ended.",
		}),
	}
	for _, c := range []prometheus.Collector{m.leading, m.fenced} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *Metrics) setLeading(l bool) {
	if m == nil {
		return
	}
	v := 0.0
	if l {
		v = 1
	}
	m.leading.Set(v)
}

// refusedFunc is a term's count of refused writes, nil without metrics.
func (m *Metrics) refusedFunc() func() {
	if m == nil {
		return nil
	}
	return m.fenced.Inc
}
