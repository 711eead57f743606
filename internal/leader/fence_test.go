package leader

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/autox-dev/autox/internal/testenv"
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

// tlsClientConfig is a client-go config for an HTTPS server of ca's
// certificate: its clients speak HTTP/2 through x/net/http2, as autox's do.
func tlsClientConfig(t *testing.T, ca *testenv.CA, host string) *rest.Config {
	t.Helper()
	return &rest.Config{Host: "https://" + host, TLSClientConfig: rest.TLSClientConfig{CAFile: ca.File}, QPS: -1}
}

func newCA(t *testing.T) *testenv.CA {
	t.Helper()
	ca, err := testenv.NewCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

func secret(name string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}}
}

// holdingServer is an HTTPS (HTTP/2) API server stand-in that holds every
// write until its client goes away or the test ends, as an API server's
// priority and fairness queue or a slow admission webhook does, and says
// which writes it saw abandoned by their client.
type holdingServer struct {
	*httptest.Server
	held      chan string // the timeout parameter of each write, when it is held
	abandoned chan struct{}
	release   chan struct{}
}

func newHoldingServer(t *testing.T, ca *testenv.CA) *holdingServer {
	t.Helper()
	h := &holdingServer{held: make(chan string, 10), abandoned: make(chan struct{}, 10), release: make(chan struct{})}
	h.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"kind":"Secret","apiVersion":"v1","metadata":{"name":"s","namespace":"ns"}}`))
			return
		}
		_, _ = io.Copy(io.Discard, r.Body) // the whole write has reached the server
		h.held <- r.URL.Query().Get("timeout")
		select {
		case <-r.Context().Done():
			h.abandoned <- struct{}{}
		case <-h.release:
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"kind":"Secret","apiVersion":"v1","metadata":{"name":"s","namespace":"ns"}}`))
		}
	}))
	h.EnableHTTP2 = true
	h.TLS = &tls.Config{Certificates: []tls.Certificate{ca.ServerCert}, MinVersion: tls.VersionTLS12}
	h.StartTLS()
	t.Cleanup(func() {
		close(h.release)
		h.Close()
	})
	return h
}

// TestTermEndAbortsWritesInFlight: a write admitted during the term, held by
// the server when the term ends — a record update Helm sends with
// context.Background() — is cancelled at the end: the server sees its
// client go away, and the caller gets ErrFenced. It carries the term's
// remaining time as the API server's timeout parameter.
func TestTermEndAbortsWritesInFlight(t *testing.T) {
	ca := newCA(t)
	srv := newHoldingServer(t, ca)
	var refused atomic.Int64
	term := NewTerm(func() { refused.Add(1) })
	term.lastsUntil(time.Now().Add(time.Hour))
	cs := kubernetes.NewForConfigOrDie(term.RESTConfig(tlsClientConfig(t, ca, srv.Listener.Addr().String())))
	done := make(chan error, 1)
	go func() {
		_, err := cs.CoreV1().Secrets("ns").Update(context.Background(), secret("s"), metav1.UpdateOptions{})
		done <- err
	}()
	var timeout string
	select {
	case timeout = <-srv.held:
	case <-time.After(patience):
		t.Fatal("the write never reached the server")
	}
	if d, err := time.ParseDuration(timeout); err != nil || d <= 0 || d > time.Hour {
		t.Errorf("the write's timeout parameter is %q, want the term's remaining time (at most 1h)", timeout)
	}
	if _, err := cs.CoreV1().Secrets("ns").Get(context.Background(), "s", metav1.GetOptions{}); err != nil {
		t.Fatalf("a read during the held write: %v", err)
	}
	term.End()
	select {
	case <-srv.abandoned:
	case <-time.After(patience):
		t.Fatal("the server still holds the write of the ended term: it was not cancelled")
	}
	select {
	case err := <-done:
		if !errors.Is(err, ErrFenced) {
			t.Errorf("the aborted write returned %v, want ErrFenced", err)
		}
	case <-time.After(patience):
		t.Fatal("the aborted write did not return")
	}
	if refused.Load() != 1 {
		t.Errorf("%d refusals counted, want 1", refused.Load())
	}
	if _, err := cs.CoreV1().Secrets("ns").Get(context.Background(), "s", metav1.GetOptions{}); err != nil {
		t.Errorf("a read after the term ended: %v", err)
	}
}

// TestWriteDeadlineFollowsTheTerm: a write carries as the API server's
// timeout the time left until the term's latest end, never more than the
// caller asked; past it, the write is refused before it is sent; a term
// with no known end (no election) adds none.
func TestWriteDeadlineFollowsTheTerm(t *testing.T) {
	var got atomic.Pointer[url.Values]
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		got.Store(&q)
	}))
	defer srv.Close()
	term := NewTerm(nil)
	rt := term.wrap(http.DefaultTransport)
	send := func(query string) (url.Values, error) {
		got.Store(nil)
		req, err := http.NewRequest(http.MethodPost, srv.URL+"/api/v1/namespaces/ns/secrets"+query, strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := rt.RoundTrip(req)
		if err != nil {
			return nil, err
		}
		resp.Body.Close()
		if q := got.Load(); q != nil {
			return *q, nil
		}
		return nil, errors.New("the server saw no request")
	}
	if q, err := send(""); err != nil || q.Has("timeout") {
		t.Errorf("a term with no known end: query %v, %v; want no timeout", q, err)
	}
	term.lastsUntil(time.Now().Add(time.Minute))
	q, err := send("?fieldManager=x")
	if d, perr := time.ParseDuration(q.Get("timeout")); err != nil || perr != nil || d <= 0 || d > time.Minute || q.Get("fieldManager") != "x" {
		t.Errorf("a term ending within a minute: query %v, %v; want a timeout of at most 1m and the other parameters kept", q, err)
	}
	if q, err := send("?timeout=5s"); err != nil || q.Get("timeout") != "5s" {
		t.Errorf("a shorter timeout of the caller's: query %v, %v; want it kept", q, err)
	}
	term.lastsUntil(time.Now().Add(-time.Second))
	if _, err := send(""); !errors.Is(err, ErrFenced) {
		t.Errorf("a write past the term's latest end: %v, want ErrFenced", err)
	}
}

// refusingH2 is an HTTP/2 server that refuses every stream with
// REFUSED_STREAM, as a server going away does: a client may send such a
// request again, since the server says it did not process it. It calls
// onStream for each request it receives, before refusing it.
func refusingH2(t *testing.T, ca *testenv.CA, onStream func()) string {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{ca.ServerCert}, NextProtos: []string{"h2"}, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	serve := func(c net.Conn) {
		defer wg.Done()
		defer c.Close()
		stop := context.AfterFunc(t.Context(), func() { c.Close() })
		defer stop()
		preface := make([]byte, len(http2.ClientPreface))
		if _, err := io.ReadFull(c, preface); err != nil {
			return
		}
		fr := http2.NewFramer(c, c)
		if err := fr.WriteSettings(); err != nil {
			return
		}
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				return
			}
			switch f := f.(type) {
			case *http2.SettingsFrame:
				if !f.IsAck() {
					err = fr.WriteSettingsAck()
				}
			case *http2.PingFrame:
				if !f.IsAck() {
					err = fr.WritePing(true, f.Data)
				}
			case *http2.HeadersFrame:
				onStream()
				err = fr.WriteRSTStream(f.StreamID, http2.ErrCodeRefusedStream)
			}
			if err != nil {
				return
			}
		}
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go serve(c)
		}
	}()
	return ln.Addr().String()
}

// TestNoResendAfterTheEnd: x/net/http2 sends a request again after
// REFUSED_STREAM (or GOAWAY), reading its body anew through GetBody. When
// the term ends just then — the server refused the stream as a standby took
// over — the write is not sent again, whichever of the transport's checks
// runs first. Each round is one write whose body re-read ends its term.
func TestNoResendAfterTheEnd(t *testing.T) {
	ca := newCA(t)
	var streams atomic.Int64
	addr := refusingH2(t, ca, func() { streams.Add(1) })
	base, err := rest.TransportFor(tlsClientConfig(t, ca, addr))
	if err != nil {
		t.Fatal(err)
	}
	for round := range 20 {
		term := NewTerm(nil)
		req, err := http.NewRequest(http.MethodPut, "https://"+addr+"/api/v1/namespaces/ns/secrets/s", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		req.GetBody = func() (io.ReadCloser, error) {
			term.End()
			return io.NopCloser(strings.NewReader("{}")), nil
		}
		before := streams.Load()
		resp, err := term.wrap(base).RoundTrip(req)
		if err == nil {
			resp.Body.Close()
		}
		if !errors.Is(err, ErrFenced) {
			t.Fatalf("round %d: the refused write of the ended term returned %v, want ErrFenced", round, err)
		}
		if n := streams.Load() - before; n != 1 {
			t.Fatalf("round %d: the server received the write %d times; once the term ended it must not be sent again", round, n)
		}
	}
}
