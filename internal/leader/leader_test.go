package leader

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/autox-dev/autox/internal/testenv"
)

var cluster *testenv.Cluster

func TestMain(m *testing.M) {
	code := testenv.RunMain(m, &cluster)
	if code == 0 {
		if err := goleak.Find(goleak.IgnoreTopFunction("k8s.io/klog/v2.(*flushDaemon).run.func1")); err != nil {
			fmt.Fprintln(os.Stderr, "goroutines leaked:", err)
			code = 1
		}
	}
	os.Exit(code)
}

const patience = 60 * time.Second // a bound for a broken build, not a performance goal

// terms records the terms Run starts, and lets a test hold a term's work
// running after its context ended (in-flight work at a stop).
type terms struct {
	mu       sync.Mutex
	started  []*Term
	ctxs     []context.Context
	hold     chan struct{} // closed to let lead return after its ctx ended
	started1 chan struct{}
}

func (ts *terms) lead(ctx context.Context, term *Term) error {
	ts.mu.Lock()
	ts.started = append(ts.started, term)
	ts.ctxs = append(ts.ctxs, ctx)
	ts.mu.Unlock()
	<-ctx.Done()
	<-ts.hold
	return nil
}

func (ts *terms) n() int {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return len(ts.started)
}

func (ts *terms) term(i int) (*Term, context.Context) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.started[i], ts.ctxs[i]
}

func options(ns string) Options {
	return Options{
		Client: kubernetes.NewForConfigOrDie(cluster.Config), Namespace: ns, Name: "autox",
		LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 250 * time.Millisecond,
		Log: zerolog.Nop(),
	}
}

// write creates a ConfigMap through the term's clients.
func write(t *testing.T, term *Term, ns string) error {
	t.Helper()
	cs := kubernetes.NewForConfigOrDie(term.RESTConfig(cluster.Config))
	_, err := cs.CoreV1().ConfigMaps(ns).Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "w-"}}, metav1.CreateOptions{})
	return err
}

func holder(t *testing.T, ns string) string {
	t.Helper()
	l, err := cluster.Client.CoordinationV1().Leases(ns).Get(context.Background(), "autox", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// TestLostLeaseFencesAndCampaignsAgain takes the Lease away from a leader:
// its term ends (its writes are refused) while the thief holds the Lease,
// and the same Run wins a new term once the thief's Lease expires.
func TestLostLeaseFencesAndCampaignsAgain(t *testing.T) {
	ns := cluster.Namespace(t)
	ts := &terms{hold: make(chan struct{})}
	close(ts.hold)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, options(ns), ts.lead) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	testenv.Eventually(t, patience, "the first term", func() (bool, error) { return ts.n() == 1, nil })
	first, firstCtx := ts.term(0)
	if err := write(t, first, ns); err != nil {
		t.Fatalf("a write during the term: %v", err)
	}

	// Another process takes the Lease (as a standby would after our renewals
	// stopped reaching the server).
	lease, err := cluster.Client.CoordinationV1().Leases(ns).Get(context.Background(), "autox", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	thief, seconds, now := "thief", int32(5), metav1.NewMicroTime(time.Now())
	lease.Spec.HolderIdentity, lease.Spec.LeaseDurationSeconds, lease.Spec.RenewTime, lease.Spec.AcquireTime = &thief, &seconds, &now, &now
	if _, err := cluster.Client.CoordinationV1().Leases(ns).Update(context.Background(), lease, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-first.Done():
	case <-time.After(patience):
		t.Fatal("the term did not end after the Lease was taken")
	}
	if holder(t, ns) == thief {
		// The fence closed while the thief still holds the Lease: the test
		// shows the order, not just the outcome.
		if err := write(t, first, ns); !errors.Is(err, ErrFenced) {
			t.Fatalf("a write of the ended term while another process holds the Lease: %v, want ErrFenced", err)
		}
	} else {
		t.Fatal("the Lease is no longer the thief's when the term had ended; the test cannot show the order")
	}
	if firstCtx.Err() == nil {
		t.Error("the ended term's work context is still live")
	}

	testenv.Eventually(t, patience, "a second term after the thief's Lease expired", func() (bool, error) { return ts.n() == 2, nil })
	second, _ := ts.term(1)
	if err := write(t, second, ns); err != nil {
		t.Errorf("a write in the second term: %v", err)
	}
	if err := write(t, first, ns); !errors.Is(err, ErrFenced) {
		t.Errorf("the first term wrote again during the second: %v", err)
	}
}

// TestStopFencesThenReleases stops Run while its term's work still runs: the
// Lease stays held until that work returns, then the term is fenced and the
// Lease released, in that order.
func TestStopFencesThenReleases(t *testing.T) {
	ns := cluster.Namespace(t)
	ts := &terms{hold: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, options(ns), ts.lead) }()
	testenv.Eventually(t, patience, "the first term", func() (bool, error) { return ts.n() == 1, nil })
	term, termCtx := ts.term(0)
	me := holder(t, ns)
	cancel()
	<-termCtx.Done()
	// In-flight work: the Lease must stay ours for longer than a standby
	// would wait (lease duration), and the term must not be fenced yet.
	time.Sleep(4 * time.Second)
	if h := holder(t, ns); h != me {
		t.Fatalf("the Lease passed to %q while the term's work was still running", h)
	}
	if term.Ended() {
		t.Fatal("the term was fenced before its work had returned")
	}
	if err := write(t, term, ns); err != nil {
		t.Fatalf("in-flight work could not finish its write: %v", err)
	}
	close(ts.hold)
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if !term.Ended() {
		t.Error("the term is not fenced after Run returned")
	}
	if h := holder(t, ns); h != "" {
		t.Errorf("the Lease is still held by %q after a stop", h)
	}
}

// TestStandbyStopsAtOnce: a process that never led stops without waiting.
func TestStandbyStopsAtOnce(t *testing.T) {
	ns := cluster.Namespace(t)
	leaderTerms := &terms{hold: make(chan struct{})}
	close(leaderTerms.hold)
	lctx, stopLeader := context.WithCancel(context.Background())
	ldone := make(chan error, 1)
	go func() { ldone <- Run(lctx, options(ns), leaderTerms.lead) }()
	defer func() { stopLeader(); <-ldone }()
	testenv.Eventually(t, patience, "a leader", func() (bool, error) { return leaderTerms.n() == 1, nil })

	standby := &terms{hold: make(chan struct{})}
	close(standby.hold)
	sctx, stopStandby := context.WithCancel(context.Background())
	sdone := make(chan error, 1)
	go func() { sdone <- Run(sctx, options(ns), standby.lead) }()
	time.Sleep(time.Second) // a few retry periods of the standby
	stopStandby()
	select {
	case err := <-sdone:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(patience):
		t.Fatal("a standby did not stop")
	}
	if standby.n() != 0 {
		t.Error("a standby led while the leader held the Lease")
	}
}
