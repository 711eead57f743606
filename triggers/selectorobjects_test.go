package triggers

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/autox-dev/autox/internal/shard"
)

// TestSelectorObjectsLeaveWithTheLastShard: every held shard's pass sets a
// selector spec's autox_selector_objects (the whole selector's figures); the
// series stay while one of those shards' terms runs, and go when the last
// ends, so a replica that holds none of them shows no stale count. Without
// shards the term's end removes them too.
func TestSelectorObjectsLeaveWithTheLastShard(t *testing.T) {
	m, err := NewShardMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	n := shard.Count(3)
	m0, m1, m2 := m.ForShard(&Shard{Count: n, Index: 0}), m.ForShard(&Shard{Count: n, Index: 1}), m.ForShard(&Shard{Count: n, Index: 2})
	m0.setObjects("sel", 4, 1, 0)
	m1.setObjects("sel", 5, 1, 0)
	m1.setObjects("other", 2, 0, 0)
	served := func(spec string) float64 { return testutil.ToFloat64(m.objects.WithLabelValues(spec, "served")) }

	m2.endTerm() // a shard that never set them
	m0.endTerm()
	if got := testutil.CollectAndCount(m.objects); got != 6 || served("sel") != 5 {
		t.Fatalf("after shard 0's term ended: %d series, sel served %v; want 6 and 5 (shard 1 holds on)", got, served("sel"))
	}
	m1.endTerm()
	if got := testutil.CollectAndCount(m.objects); got != 0 {
		t.Errorf("after the last shard's term ended: %d series of autox_selector_objects, want none", got)
	}
	m0.setObjects("sel", 3, 0, 0) // a new term of shard 0
	if got := testutil.CollectAndCount(m.objects); got != 3 || served("sel") != 3 {
		t.Errorf("a new term's pass: %d series, served %v; want 3 and 3", got, served("sel"))
	}

	single, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	single.setObjects("sel", 1, 0, 0)
	single.endTerm()
	if got := testutil.CollectAndCount(single.objects); got != 0 {
		t.Errorf("without shards, %d series after the term ended, want none", got)
	}
}
