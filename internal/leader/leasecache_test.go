package leader

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/autox-dev/autox/internal/testenv"
)

// leaseRequests counts one replica's requests on Leases by verb (get,
// list, watch, create, update, delete), and can cut the replica off the
// API server (every new request fails), as a network partition or a
// stopped process would.
type leaseRequests struct {
	mu  sync.Mutex
	n   map[string]int
	cut atomic.Bool
	// noWatch refuses watches of Leases: the Lease informer syncs from
	// its list, then stands still but for its relists.
	noWatch bool
}

func (c *leaseRequests) client(t *testing.T) kubernetes.Interface {
	cfg := rest.CopyConfig(cluster.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return countingTransport{c: c, next: rt} })
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func (c *leaseRequests) counts() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	for k, v := range c.n {
		out[k] = v
	}
	return out
}

type countingTransport struct {
	c    *leaseRequests
	next http.RoundTripper
}

var errCut = errors.New("cut off the API server")

func (t countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.c.cut.Load() {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, errCut
	}
	// /apis/coordination.k8s.io/v1/namespaces/NS/leases[/NAME]
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	if len(parts) >= 6 && parts[1] == "coordination.k8s.io" && parts[5] == "leases" {
		verb := map[string]string{http.MethodPost: "create", http.MethodPut: "update", http.MethodDelete: "delete"}[req.Method]
		switch {
		case req.Method != http.MethodGet:
		case len(parts) > 6:
			verb = "get"
		case req.URL.Query().Get("watch") == "true":
			verb = "watch"
		default:
			verb = "list"
		}
		if verb == "get" && strings.Contains(parts[len(parts)-1], "-shard-") {
			verb = "get shard"
		}
		t.c.mu.Lock()
		if t.c.n == nil {
			t.c.n = map[string]int{}
		}
		t.c.n[verb]++
		t.c.mu.Unlock()
		if t.c.noWatch && verb == "watch" {
			if req.Body != nil {
				_ = req.Body.Close()
			}
			return &http.Response{StatusCode: http.StatusForbidden, Status: "403 Forbidden", Header: http.Header{},
				Body: io.NopCloser(strings.NewReader("")), Request: req}, nil
		}
	}
	return t.next.RoundTrip(req)
}

// since is after minus before, by verb.
func since(before, after map[string]int) map[string]int {
	out := map[string]int{}
	for k, v := range after {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

// TestStandingByCostsNoLeaseRead: three replicas over four shards (a fair
// share of 2, so a replica holding fewer keeps campaigning for the others'
// shards) poll the shard Leases they do not hold, and count each
// other, from their Lease informer: over many retry periods they read no
// Lease from the API server (no get, no list); what they send are the
// holders' renewals and the heartbeats, updates only.
func TestStandingByCostsNoLeaseRead(t *testing.T) {
	ns := cluster.Namespace(t)
	terms := newShardTerms(t)
	reqs := make([]*leaseRequests, 3)
	for i := range reqs {
		reqs[i] = &leaseRequests{}
		opts := options(ns)
		opts.Client = reqs[i].client(t)
		stop := runShards(t, opts, 4, terms.lead(fmt.Sprint(i)))
		defer stop()
	}
	// 2, 1 and 1 or 2, 2 and 0: a replica with room polls the shards it
	// does not hold.
	testenv.Eventually(t, patience, "every shard held", func() (bool, error) {
		n := 0
		for _, k := range terms.held() {
			n += k
		}
		return n == 4, nil
	})

	// The candidates that lost a race for a shard read it live once after
	// their conflicting update; a few periods later they only stand by.
	time.Sleep(4 * options(ns).RetryPeriod)
	before := make([]map[string]int, len(reqs))
	for i, r := range reqs {
		before[i] = r.counts()
	}
	held := terms.held()
	periods := 16
	time.Sleep(time.Duration(periods) * options(ns).RetryPeriod)
	if h := terms.held(); !maps.Equal(h, held) {
		t.Fatalf("the shards moved while standing by: %v, then %v", held, h)
	}
	for i, r := range reqs {
		got := since(before[i], r.counts())
		if got["get"] != 0 || got["get shard"] != 0 || got["list"] != 0 {
			t.Errorf("replica %d read Leases from the API server over %d retry periods: %v; want no get and no list", i, periods, got)
		}
		if got["update"] == 0 {
			t.Errorf("replica %d renewed nothing over %d retry periods: %v", i, periods, got)
		}
	}
}

// TestWithoutTheCacheAFullReplicaWaits: without a usable Lease cache (here
// its watch is refused: it stands still after each list) polling costs a
// GET, so a replica at its fair share does not poll the shard Leases it
// does not hold: two replicas over four shards, 2 each, read no shard Lease
// over many retry periods.
func TestWithoutTheCacheAFullReplicaWaits(t *testing.T) {
	ns := cluster.Namespace(t)
	terms := newShardTerms(t)
	reqs := []*leaseRequests{{noWatch: true}, {noWatch: true}}
	for i, r := range reqs {
		opts := options(ns)
		opts.Client = r.client(t)
		stop := runShards(t, opts, 4, terms.lead(fmt.Sprint(i)))
		defer stop()
	}
	testenv.Eventually(t, patience, "the shards spread, 2 each", func() (bool, error) {
		h := terms.held()
		return h["0"] == 2 && h["1"] == 2, nil
	})
	time.Sleep(4 * options(ns).RetryPeriod)
	before := []map[string]int{reqs[0].counts(), reqs[1].counts()}
	periods := 16
	time.Sleep(time.Duration(periods) * options(ns).RetryPeriod)
	// A relist makes the cache usable for a moment; a campaign started
	// then reads once more live before it ends.
	for i, r := range reqs {
		if got := since(before[i], r.counts()); got["get shard"] > periods/4 {
			t.Errorf("replica %d at its fair share read shard Leases over %d retry periods: %v; want at most %d", i, periods, got, periods/4)
		}
	}
}

// TestTakeoverFromTheCache: a replica cut off the API server stops renewing
// its shard Leases; the other replica, which polls them from its Lease
// informer, takes every one of them once they have expired — not before the
// lease duration has passed since the cut, and never while a term of the
// cut replica is still running (newShardTerms checks every start) — reading
// none of them from the API server while it waits.
func TestTakeoverFromTheCache(t *testing.T) {
	ns := cluster.Namespace(t)
	terms := newShardTerms(t)
	a, b := &leaseRequests{}, &leaseRequests{}
	optsA, optsB := options(ns), options(ns)
	optsA.Client, optsB.Client = a.client(t), b.client(t)
	stopA := runShards(t, optsA, 4, terms.lead("a"))
	testenv.Eventually(t, patience, "replica a holding every shard", func() (bool, error) { return terms.held()["a"] == 4, nil })
	stopB := runShards(t, optsB, 4, terms.lead("b"))
	defer stopB()
	testenv.Eventually(t, patience, "the shards spread, 2 each", func() (bool, error) {
		h := terms.held()
		return h["a"] == 2 && h["b"] == 2, nil
	})

	before := b.counts()
	a.cut.Store(true)
	cut := time.Now()
	testenv.Eventually(t, patience, "replica b holding every shard", func() (bool, error) { return terms.held()["b"] == 4, nil })
	got := since(before, b.counts())
	if got["get"] != 0 || got["get shard"] != 0 || got["list"] != 0 {
		t.Errorf("replica b read Leases from the API server while taking over: %v; want no get and no list", got)
	}
	// a's last renewal started at most a retry period before the cut; b
	// waits the lease duration from when it saw that renewal.
	earliest := optsB.LeaseDuration - optsB.RetryPeriod
	terms.mu.Lock()
	for shard, ts := range terms.byShard {
		for _, term := range ts {
			after := terms.started[term].Sub(cut)
			if after > 0 && after < earliest {
				t.Errorf("shard %d taken %s after the cut, before the Lease could expire (%s)", shard, after, earliest)
			}
			if after > 0 {
				t.Logf("shard %d taken over %s after the cut (lease duration %s)", shard, after.Round(time.Millisecond), optsB.LeaseDuration)
			}
		}
	}
	terms.mu.Unlock()
	stopA()
	leases, err := cluster.Client.CoordinationV1().Leases(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range leases.Items {
		if strings.Contains(l.Name, "-shard-") && holderOf(l) == "" {
			t.Errorf("shard Lease %s has no holder", l.Name)
		}
	}
}

func holderOf(l coordinationv1.Lease) string {
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// TestCacheTrustedOnlyWhenItShowsOurHeartbeat: the Lease cache serves reads
// only while it shows this replica's heartbeat renewed at least as recently
// as asked (the write before the last): one that stood still (a broken
// watch) is not used, and every read is live again.
func TestCacheTrustedOnlyWhenItShowsOurHeartbeat(t *testing.T) {
	ns := cluster.Namespace(t)
	c := newLeaseCache(cluster.Client, ns)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.run(ctx)
	}()
	defer func() {
		cancel()
		<-done
	}()
	c.vouch("beat", time.Time{}, time.Hour)
	if c.usable() {
		t.Fatal("usable before it was synced and showed the heartbeat")
	}
	renewed := metav1.NewMicroTime(time.Now())
	if _, err := cluster.Client.CoordinationV1().Leases(ns).Create(context.Background(), &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "beat"}, Spec: coordinationv1.LeaseSpec{RenewTime: &renewed}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, patience, "the cache showing the heartbeat", func() (bool, error) {
		c.vouch("beat", time.Time{}, time.Hour)
		return c.usable(), nil
	})
	stored, _ := c.get("beat")
	if c.vouch("beat", stored.Spec.RenewTime.Time, time.Hour); !c.usable() {
		t.Error("not usable though it shows the heartbeat's last renewal")
	}
	if c.vouch("beat", stored.Spec.RenewTime.Add(time.Microsecond), time.Hour); c.usable() {
		t.Error("usable though it lacks a later renewal of the heartbeat")
	}
	// By the clock: a cache whose newest renewal of the heartbeat is
	// older than the window does not vouch for itself (heartbeat writes
	// failing while the watch stands still), and a vouch lapses when no
	// count renews it (a heartbeat write that hangs).
	if c.vouch("beat", stored.Spec.RenewTime.Time, time.Hour); !c.usable() {
		t.Fatal("not usable though it shows the heartbeat's last renewal")
	}
	real := c.now
	c.now = func() time.Time { return real().Add(2 * time.Hour) }
	if c.usable() {
		t.Error("usable after its vouch lapsed")
	}
	if c.vouch("beat", stored.Spec.RenewTime.Time, time.Hour); c.usable() {
		t.Error("usable though its newest renewal of the heartbeat is older than the window")
	}
	c.now = real
	c.vouch("beat", stored.Spec.RenewTime.Add(time.Microsecond), time.Hour)
	if _, ok := c.get("beat"); ok {
		t.Error("a read served from a cache not trusted")
	}
}
