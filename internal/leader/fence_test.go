package leader

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

type closeTracker struct {
	io.Reader
	closed atomic.Bool
}

func (c *closeTracker) Close() error { c.closed.Store(true); return nil }

func TestTermRefusesWritesOnceEnded(t *testing.T) {
	var served atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { served.Add(1) }))
	defer srv.Close()
	var refused atomic.Int64
	term := NewTerm(func() { refused.Add(1) })
	rt := term.wrap(http.DefaultTransport)
	do := func(method string) (*closeTracker, error) {
		body := &closeTracker{Reader: strings.NewReader("{}")}
		req, err := http.NewRequest(method, srv.URL+"/api/v1/namespaces/x/configmaps", body)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := rt.RoundTrip(req)
		if err == nil {
			resp.Body.Close()
		}
		return body, err
	}
	methods := []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}
	for _, m := range methods {
		if _, err := do(m); err != nil {
			t.Fatalf("%s during the term: %v", m, err)
		}
	}
	if term.Ended() {
		t.Fatal("a new term has ended")
	}
	term.End()
	term.End() // idempotent
	<-term.Done()
	before := served.Load()
	for _, m := range methods {
		body, err := do(m)
		write := m != http.MethodGet && m != http.MethodHead
		switch {
		case write && !errors.Is(err, ErrFenced):
			t.Errorf("%s after the term ended: %v, want ErrFenced", m, err)
		case write && !body.closed.Load():
			t.Errorf("%s refused without closing the request body", m)
		case !write && err != nil:
			t.Errorf("%s after the term ended: %v; reads must go on", m, err)
		}
	}
	if got := served.Load() - before; got != 2 {
		t.Errorf("the server saw %d requests after the term ended, want the 2 reads", got)
	}
	if refused.Load() != 4 {
		t.Errorf("%d refusals counted, want 4", refused.Load())
	}
}

// fakeLock is a resourcelock.Interface that serves one record.
type fakeLock struct {
	holder  string
	updates int
}

func (f *fakeLock) Get(context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	return &resourcelock.LeaderElectionRecord{HolderIdentity: f.holder}, []byte(f.holder), nil
}
func (f *fakeLock) Create(context.Context, resourcelock.LeaderElectionRecord) error { return nil }
func (f *fakeLock) Update(_ context.Context, r resourcelock.LeaderElectionRecord) error {
	f.updates++
	f.holder = r.HolderIdentity
	return nil
}
func (f *fakeLock) RecordEvent(string) {}
func (f *fakeLock) Identity() string   { return "me" }
func (f *fakeLock) Describe() string   { return "fake" }

// TestReleaseOnlyWhatIsOurs: client-go releases a Lease it believes it holds
// right after reading it; if that read shows another holder, the release must
// not clear that holder's Lease.
func TestReleaseOnlyWhatIsOurs(t *testing.T) {
	inner := &fakeLock{holder: "other"}
	l := &watchedLock{Interface: inner, term: NewTerm(nil), renewDeadline: time.Second}
	ctx := context.Background()
	if _, _, err := l.Get(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l.Update(ctx, resourcelock.LeaderElectionRecord{}); !errors.Is(err, errNotOurs) {
		t.Fatalf("release over another holder: %v, want errNotOurs", err)
	}
	if inner.updates != 0 || inner.holder != "other" {
		t.Fatalf("the other holder's Lease was written: %+v", inner)
	}
	inner.holder = "me"
	if _, _, err := l.Get(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l.Update(ctx, resourcelock.LeaderElectionRecord{}); err != nil || inner.holder != "" {
		t.Fatalf("release of our own Lease: %v, holder %q", err, inner.holder)
	}
}

// TestLeaderTimingsNeedAMargin: a lease duration that (in whole seconds)
// does not exceed the renew deadline would let a standby lead before this
// process fences.
func TestLeaderTimingsNeedAMargin(t *testing.T) {
	err := Run(context.Background(), Options{LeaseDuration: 10900 * time.Millisecond, RenewDeadline: 10 * time.Second},
		func(context.Context, *Term) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "must exceed the renew deadline") {
		t.Fatalf("Run with lease 10.9s, renew 10s: %v", err)
	}
}
