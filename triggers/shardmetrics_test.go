package triggers

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/autox-dev/autox/internal/format"
	"github.com/autox-dev/autox/internal/shard"
)

// TestShardMetrics: with shards, each shard's controller writes its own
// series of autox_releases and autox_workqueue_depth, and neither a new term
// of one shard (its queue's gauge starts at zero) nor the end of one (its
// series and release spec outcomes go) touches another shard's.
func TestShardMetrics(t *testing.T) {
	m, err := NewShardMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	n := shard.Count(2)
	a, b := specIn(n, 0, "a"), specIn(n, 1, "b")
	m0, m1 := m.ForShard(&Shard{Count: n, Index: 0}), m.ForShard(&Shard{Count: n, Index: 1})
	q0, q1 := m0.queueProvider().NewDepthMetric("autox"), m1.queueProvider().NewDepthMetric("autox")
	q0.Inc()
	q1.Inc()
	q1.Inc()
	m0.setShardReleases(map[string]int{"deployed": 3})
	m1.setShardReleases(map[string]int{"deployed": 5, "failed": 1})
	failing := map[string]outcome{"hello": {failing: true}}
	m0.releaseSpecOutcomes(a, format.Object{}, []string{"hello"}, failing)
	m1.releaseSpecOutcomes(b, format.Object{}, []string{"hello"}, failing)

	depth := func(i string) float64 { return testutil.ToFloat64(m.depth.WithLabelValues(i)) }
	if depth("0") != 1 || depth("1") != 2 {
		t.Errorf("depth by shard %v %v, want 1 2", depth("0"), depth("1"))
	}
	m0.queueProvider() // a new term of shard 0
	if depth("0") != 0 || depth("1") != 2 {
		t.Errorf("after a new term of shard 0, depth by shard %v %v, want 0 2", depth("0"), depth("1"))
	}

	m0.endTerm()
	if got := testutil.CollectAndCount(m.releases); got != 2 {
		t.Errorf("after shard 0's term ended, %d series of autox_releases, want shard 1's 2", got)
	}
	if v := testutil.ToFloat64(m.releases.WithLabelValues("1", "deployed")); v != 5 {
		t.Errorf("shard 1's deployed releases %v, want 5", v)
	}
	if got := testutil.CollectAndCount(m.depth); got != 1 || depth("1") != 2 {
		t.Errorf("after shard 0's term ended, %d depth series (shard 1: %v), want shard 1's with 2", got, depth("1"))
	}
	fail := func(spec string) float64 {
		return gauge(t, m.releaseSpecs, "autox_release_spec_failing", spec, "hello")
	}
	if fail(a) != 0 || fail(b) != 1 {
		t.Errorf("failing release specs after shard 0's term ended: %s %v, %s %v; want 0 and 1", a, fail(a), b, fail(b))
	}
}
