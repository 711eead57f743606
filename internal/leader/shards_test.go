package leader

import (
	"context"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/autox-dev/autox/internal/shard"
	"github.com/autox-dev/autox/internal/testenv"
)

// shardTerms records the shard terms of every replica of a test, and checks
// the rule that keeps shards apart: when a term of a shard starts, every
// earlier term of that shard, whichever replica had it, has ended.
type shardTerms struct {
	t  *testing.T
	mu sync.Mutex
	// byShard are the terms of each shard in the order they started;
	// owner the replica of each term, leading whether it still runs.
	byShard map[int][]*Term
	owner   map[*Term]string
	running map[*Term]bool
	started map[*Term]time.Time
	// linger is how long a term's work goes on after its context ended,
	// as running operations do.
	linger time.Duration
}

func newShardTerms(t *testing.T) *shardTerms {
	return &shardTerms{t: t, byShard: map[int][]*Term{}, owner: map[*Term]string{}, running: map[*Term]bool{}, started: map[*Term]time.Time{}, linger: 200 * time.Millisecond}
}

func (s *shardTerms) lead(replica string) ShardLead {
	return func(ctx context.Context, index int, term *Term) error {
		s.mu.Lock()
		for _, earlier := range s.byShard[index] {
			if !earlier.Ended() {
				s.t.Errorf("shard %d: a term of %s started while a term of %s had not ended", index, replica, s.owner[earlier])
			}
		}
		s.byShard[index] = append(s.byShard[index], term)
		s.owner[term], s.running[term], s.started[term] = replica, true, time.Now()
		s.mu.Unlock()
		<-ctx.Done()
		// Running operations end before the shard is handed over: the
		// term is not fenced under them.
		select {
		case <-time.After(s.linger):
		case <-term.Done():
		}
		s.mu.Lock()
		s.running[term] = false
		s.mu.Unlock()
		return nil
	}
}

// held counts the shards each replica runs a term of now.
func (s *shardTerms) held() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int{}
	for _, terms := range s.byShard {
		for _, term := range terms {
			if s.running[term] && !term.Ended() {
				out[s.owner[term]]++
			}
		}
	}
	return out
}

func (s *shardTerms) fencedHandOvers() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, terms := range s.byShard {
		n += len(terms)
	}
	return n
}

func runShards(t *testing.T, opts Options, n shard.Count, lead ShardLead) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- RunShards(ctx, opts, n, nil, lead) }()
	return func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Error(err)
			}
		case <-time.After(patience):
			t.Fatal("RunShards did not return after its stop")
		}
	}
}

// A replica alone holds every shard; a second one joining gets its fair
// share, handed over after the running operations of each shard; when it
// stops, the first takes its shards back. No shard ever has two terms at
// once.
func TestShardsSpreadAndMove(t *testing.T) {
	ns := cluster.Namespace(t)
	opts := options(ns)
	terms := newShardTerms(t)
	stopA := runShards(t, opts, 4, terms.lead("a"))
	defer stopA()
	testenv.Eventually(t, patience, "replica a holding every shard", func() (bool, error) {
		return terms.held()["a"] == 4, nil
	})

	stopB := runShards(t, opts, 4, terms.lead("b"))
	testenv.Eventually(t, patience, "the shards spread, 2 each", func() (bool, error) {
		h := terms.held()
		return h["a"] == 2 && h["b"] == 2, nil
	})
	// Each shard Lease names the replica running its term.
	leases, err := options(ns).Client.CoordinationV1().Leases(ns).List(context.Background(), metav1.ListOptions{LabelSelector: LabelReplicaOf + "=autox"})
	if err != nil || len(leases.Items) != 2 {
		t.Fatalf("heartbeat Leases: %v, %+v", err, leases)
	}

	stopB()
	testenv.Eventually(t, patience, "replica a holding every shard again", func() (bool, error) {
		return terms.held()["a"] == 4 && terms.held()["b"] == 0, nil
	})
	if n := terms.fencedHandOvers(); n < 8 {
		t.Errorf("%d shard terms, want at least 8 (4, 2 handed over, 2 taken back)", n)
	}
}

func TestFairShareGate(t *testing.T) {
	live, ready := 1, false
	g := &shareGate{fair: func() int { return shard.Count(4).FairShare(live) }, ready: func() bool { return ready }}
	if g.room() || g.take() {
		t.Fatal("room before the replicas were counted")
	}
	ready = true
	for i := 0; i < 4; i++ {
		if !g.room() {
			t.Fatalf("no room for shard %d with one live replica", i)
		}
		if !g.take() {
			t.Fatalf("take %d refused with one live replica", i)
		}
	}
	if g.room() || g.take() {
		t.Fatal("room for a fifth shard")
	}
	live = 3
	g.give()
	g.give()
	if g.room() || g.take() {
		t.Fatal("room for a third shard with ⌈4/3⌉ = 2")
	}
	g.give()
	if !g.room() {
		t.Fatal("no room with 1 of 2 held")
	}
	if !g.take() {
		t.Fatal("take refused with 1 of 2 held")
	}
	if g.room() {
		t.Fatal("room after taking the second of 2")
	}
}

// A replica started with another --shards takes no shard while a replica of
// the old count lives (both would write the same releases), nor while a
// replica without shards holds the one Lease; it takes them once those are
// gone.
func TestShardCountChangeWaitsForTheOldWriters(t *testing.T) {
	ns := cluster.Namespace(t)
	opts := options(ns)
	single := &terms{hold: make(chan struct{}), started1: make(chan struct{})}
	close(single.hold)
	ctx, cancel := context.WithCancel(context.Background())
	singleDone := make(chan error, 1)
	go func() { singleDone <- Run(ctx, opts, single.lead) }()
	testenv.Eventually(t, patience, "the single leader leading", func() (bool, error) { return single.n() == 1, nil })

	terms := newShardTerms(t)
	stopNew := runShards(t, opts, 3, terms.lead("new"))
	defer stopNew()
	// Several of its retry periods: it takes nothing.
	time.Sleep(4 * opts.LeaseDuration)
	if h := terms.held(); h["new"] != 0 {
		t.Fatalf("a sharded replica took %d shards while a single leader led", h["new"])
	}
	cancel()
	if err := <-singleDone; err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, patience, "the sharded replica holding every shard", func() (bool, error) { return terms.held()["new"] == 3, nil })

	other := newShardTerms(t)
	stopOther := runShards(t, opts, 5, other.lead("other"))
	time.Sleep(4 * opts.LeaseDuration)
	if h := other.held(); h["other"] != 0 {
		t.Errorf("a replica with --shards 5 took %d shards while one with --shards 3 lived", h["other"])
	}
	stopOther()
}

// TestSingleLeaderWaitsForShardHolders: a replica started with --shards 1
// while a sharded replica still holds its shards (a rolling change from N to
// 1) does not take the one Lease, and so writes nothing, until the shard
// Leases are released; then it leads.
func TestSingleLeaderWaitsForShardHolders(t *testing.T) {
	ns := cluster.Namespace(t)
	opts := options(ns)
	sharded := newShardTerms(t)
	stopSharded := runShards(t, opts, 3, sharded.lead("old"))
	testenv.Eventually(t, patience, "the sharded replica holding every shard", func() (bool, error) { return sharded.held()["old"] == 3, nil })

	single := &terms{hold: make(chan struct{}), started1: make(chan struct{})}
	close(single.hold)
	ctx, cancel := context.WithCancel(context.Background())
	singleDone := make(chan error, 1)
	go func() { singleDone <- Run(ctx, opts, single.lead) }()
	// Several of its retry periods and lease durations: it takes nothing.
	time.Sleep(4 * opts.LeaseDuration)
	if n := single.n(); n != 0 {
		t.Errorf("a replica without shards led %d terms while shard Leases were held", n)
	}
	stopSharded()
	testenv.Eventually(t, patience, "the single leader leading once the shards are released", func() (bool, error) { return single.n() == 1, nil })
	cancel()
	if err := <-singleDone; err != nil {
		t.Fatal(err)
	}
}
