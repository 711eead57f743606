package leader

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are leader election's metrics (docs/operations.md "Monitoring"), registered
// on the registry they are given.
type Metrics struct {
	leading prometheus.Gauge
	fenced  prometheus.Counter
	// Of shards (RunShards): held per shard, term starts and ends per
	// shard, the live replicas and the fair share.
	shardHeld    *prometheus.GaugeVec
	shardChanges *prometheus.CounterVec
	shardRels    *prometheus.GaugeVec
	replicas     prometheus.Gauge
	fairShare    prometheus.Gauge
	// shard is set on the per-shard copy forShard makes ("" otherwise).
	shard string
}

// NewMetrics creates leader election's metrics and registers them on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		leading: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "autox_leader", Help: "1 while this process leads (is the one that writes); with --shards above 1, while it holds at least one shard.",
		}),
		fenced: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "autox_fenced_writes_total", Help: "Writes refused because the leadership term that started them had ended.",
		}),
	}
	m.shardHeld = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "autox_shard_held", Help: "1 while this replica holds the shard's Lease (with --shards above 1).",
	}, []string{"shard"})
	m.shardChanges = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "autox_shard_term_changes_total", Help: "Shard terms this replica started or ended, by shard (with --shards above 1).",
	}, []string{"shard"})
	m.shardRels = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "autox_shard_releases", Help: "Release records of the shard that its last pass listed, while this replica holds the shard (with --shards above 1).",
	}, []string{"shard"})
	m.replicas = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "autox_live_replicas", Help: "Live replicas as this replica counts them from their heartbeat Leases (with --shards above 1).",
	})
	m.fairShare = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "autox_shard_fair_share", Help: "The most shards this replica holds: the shards divided by the live replicas, rounded up (with --shards above 1).",
	})
	for _, c := range []prometheus.Collector{m.leading, m.fenced, m.shardHeld, m.shardChanges, m.shardRels, m.replicas, m.fairShare} {
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
	if m.shard != "" {
		m.shardHeld.WithLabelValues(m.shard).Set(v)
		m.shardChanges.WithLabelValues(m.shard).Inc()
		return
	}
	m.leading.Set(v)
}

// forShard is m for the terms of shard i: autox_shard_held and
// autox_shard_term_changes_total instead of autox_leader.
func (m *Metrics) forShard(i int) *Metrics {
	if m == nil {
		return nil
	}
	c := *m
	c.shard = fmt.Sprint(i)
	c.shardHeld.WithLabelValues(c.shard).Set(0)
	return &c
}

func (m *Metrics) setShares(live, fair int) {
	if m == nil {
		return
	}
	m.replicas.Set(float64(live))
	m.fairShare.Set(float64(fair))
}

// refusedFunc is a term's count of refused writes, nil without metrics.
func (m *Metrics) refusedFunc() func() {
	if m == nil {
		return nil
	}
	return m.fenced.Inc
}

// SetShardReleases shows the release records of shard i its holder's last
// pass listed; ShardReleased removes it once the shard's term has ended.
func (m *Metrics) SetShardReleases(i, n int) {
	if m != nil {
		m.shardRels.WithLabelValues(fmt.Sprint(i)).Set(float64(n))
	}
}

// ShardReleased forgets the releases of shard i (its term ended here).
func (m *Metrics) ShardReleased(i int) {
	if m != nil {
		m.shardRels.DeleteLabelValues(fmt.Sprint(i))
	}
}
