package testenv

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
)

// The proxy's modes that hold a request or forward it detached from its
// client: the late writes of a lost leadership term.

// HoldMatching makes the proxy hold the requests match selects, as an API
// server's priority and fairness queue or a slow admission webhook holds a
// request: each reaches the proxy whole (its body read), and the proxy
// neither answers it nor forwards it until the returned Hold is released.
// A held request whose client gives up meanwhile (cancels it, closes the
// connection) is dropped, never forwarded. The other requests go on to the
// API server, sent by the proxy with the cluster's own (admin) credentials
// as for FailMatching, with the client's User-Agent (the API server's
// managedFields name the client). Open connections are cut, so that clients
// meet the rule at once; FailWith(0) ends it.
func (p *Proxy) HoldMatching(match func(*http.Request) bool) *Hold {
	h := &Hold{match: match, released: make(chan struct{})}
	p.hold.Store(h)
	p.closeConns()
	return h
}

// Hold is what HoldMatching holds.
type Hold struct {
	match    func(*http.Request) bool
	released chan struct{}
	once     sync.Once

	held, abandoned, forwarded atomic.Int64
}

// Held returns how many requests have been held so far.
func (h *Hold) Held() int64 { return h.held.Load() }

// Abandoned returns how many held requests their clients gave up.
func (h *Hold) Abandoned() int64 { return h.abandoned.Load() }

// Forwarded returns how many held requests went on to the API server.
func (h *Hold) Forwarded() int64 { return h.forwarded.Load() }

// Release forwards the held requests whose clients still wait, and every
// matching request from now on.
func (h *Hold) Release() { h.once.Do(func() { close(h.released) }) }

func (h *Hold) serve(w http.ResponseWriter, r *http.Request, forward http.Handler) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		h.abandoned.Add(1)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	h.held.Add(1)
	select {
	case <-r.Context().Done():
	case <-h.released:
	}
	if r.Context().Err() != nil {
		h.abandoned.Add(1)
		return
	}
	h.forwarded.Add(1)
	forward.ServeHTTP(w, r)
}

// DetachMatching makes the proxy forward the requests match selects at
// once, but on a context of their own: when their client gives one up, the
// API server is not told, as it is not when the network between them is
// what failed. Other requests are forwarded as for HoldMatching, and open
// connections cut; FailWith(0) ends it.
func (p *Proxy) DetachMatching(match func(*http.Request) bool) *Detached {
	d := &Detached{match: match}
	p.detach.Store(d)
	p.closeConns()
	return d
}

// Detached is what DetachMatching forwards.
type Detached struct {
	match func(*http.Request) bool

	mu      sync.Mutex
	answers []int
}

// Answers returns the HTTP status of each answer the API server gave to a
// detached request so far (502 when it gave none).
func (d *Detached) Answers() []int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]int(nil), d.answers...)
}

func (d *Detached) serve(w http.ResponseWriter, r *http.Request, forward http.Handler) {
	sw := &statusWriter{ResponseWriter: w}
	// The writer hides the client's CloseNotifier too: the reverse proxy
	// would cancel on it.
	forward.ServeHTTP(sw, r.WithContext(context.WithoutCancel(r.Context())))
	d.mu.Lock()
	d.answers = append(d.answers, sw.status)
	d.mu.Unlock()
}

// statusWriter records the status of the answer it passes on.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}
