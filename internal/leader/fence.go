package leader

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync/atomic"
	"time"

	"k8s.io/client-go/rest"
)

// ErrFenced is the error of a write refused because the leadership term that
// made its client has ended.
var ErrFenced = errors.New("write refused: this process's leadership term has ended")

// Term is one period during which this process is the one writer. Every
// client autox writes with during a term is built from Term.RESTConfig, so
// that once the term ends no mutating request leaves the process through it,
// whichever goroutine sends it: Helm's install and upgrade goroutines go on
// after their context is cancelled, and must not write after a standby has
// taken over.
type Term struct {
	// ctx is cancelled, with cause ErrFenced, when the term ends: every
	// write in flight is bound to it.
	ctx       context.Context
	end       context.CancelCauseFunc
	onRefused func()
	// deadline, when set, is the latest the term can last: the watchdog
	// ends it then unless a renewal moves it on.
	deadline atomic.Pointer[time.Time]
}

// NewTerm starts a term. onRefused, if set, is called for each refused write.
func NewTerm(onRefused func()) *Term {
	ctx, end := context.WithCancelCause(context.Background())
	return &Term{ctx: ctx, end: end, onRefused: onRefused}
}

// End fences the term: from now on its clients refuse every write, and the
// writes in flight are aborted. It is safe to call more than once and from
// any goroutine, and never blocks.
func (t *Term) End() { t.end(ErrFenced) }

// Done is closed when the term has ended.
func (t *Term) Done() <-chan struct{} { return t.ctx.Done() }

// Ended reports whether the term has ended.
func (t *Term) Ended() bool { return t.ctx.Err() != nil }

// lastsUntil records the latest moment the term can last (a renewal's start
// plus the renew deadline).
func (t *Term) lastsUntil(d time.Time) { t.deadline.Store(&d) }

// RESTConfig returns a copy of base whose every client refuses writes once
// the term has ended. Reads go on: a fenced process may still look.
func (t *Term) RESTConfig(base *rest.Config) *rest.Config {
	cfg := rest.CopyConfig(base)
	cfg.Wrap(t.wrap)
	return cfg
}

func (t *Term) wrap(rt http.RoundTripper) http.RoundTripper {
	return fencedTransport{term: t, next: rt}
}

// fencedTransport checks a write when it enters, and keeps it bound to the
// term while it is in flight: the term's end cancels its context, which
// aborts it wherever it is (waiting for a connection, being written, waiting
// for the answer) and stops the HTTP/2 and HTTP/1 transports' own re-sends
// (after GOAWAY, REFUSED_STREAM or a dead reused connection), whose body
// re-reads are refused too. A write carries a server-side deadline, the
// API server's `timeout` parameter, set to when the term can end at the
// latest: the API server gives up a write it has not yet stored by then even
// when the cancellation cannot reach it.
type fencedTransport struct {
	term *Term
	next http.RoundTripper
}

func (f fencedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !mutating(req.Method) {
		return f.next.RoundTrip(req)
	}
	if f.term.Ended() {
		return nil, f.refuse(req)
	}
	ctx, cancel := context.WithCancelCause(req.Context())
	stop := context.AfterFunc(f.term.ctx, func() { cancel(ErrFenced) })
	out := req.WithContext(ctx) // a shallow copy: the caller's request is not changed
	if d := f.term.deadline.Load(); d != nil {
		left := time.Until(*d).Truncate(time.Millisecond)
		if left <= 0 { // the watchdog ends the term now
			stop()
			cancel(nil)
			return nil, f.refuse(req)
		}
		out.URL = withTimeout(out.URL, left)
	}
	if getBody := req.GetBody; getBody != nil {
		// A transport re-sends a body through GetBody: never after the end.
		out.GetBody = func() (io.ReadCloser, error) {
			if f.term.Ended() {
				return nil, ErrFenced
			}
			body, err := getBody()
			if err == nil && f.term.Ended() {
				_ = body.Close()
				return nil, ErrFenced
			}
			return body, err
		}
	}
	resp, err := f.next.RoundTrip(out)
	// The answer has come (or the request failed): the write has been
	// decided, and the term's end no longer changes anything for it.
	stop()
	if err != nil {
		cancel(nil)
		if f.term.Ended() {
			return nil, f.aborted(req, err)
		}
		return nil, err
	}
	resp.Body = &cancelOnClose{ReadCloser: resp.Body, cancel: func() { cancel(nil) }}
	return resp, nil
}

// refuse counts a write the fence did not send, closes its body and says so.
func (f fencedTransport) refuse(req *http.Request) error {
	if req.Body != nil {
		_ = req.Body.Close() // a RoundTripper must close the body, even on error
	}
	f.count()
	return fmt.Errorf("%w (%s %s)", ErrFenced, req.Method, req.URL.Path)
}

// aborted counts a write the term's end stopped in flight (or kept from
// being sent again) and says so; the transport has closed its body.
func (f fencedTransport) aborted(req *http.Request, err error) error {
	f.count()
	return fmt.Errorf("%w (%s %s, cancelled in flight; the API server may have applied it already: %w)", ErrFenced, req.Method, req.URL.Path, err)
}

func (f fencedTransport) count() {
	if f.term.onRefused != nil {
		f.term.onRefused()
	}
}

// withTimeout returns u with the API server's timeout parameter at most d.
func withTimeout(u *url.URL, d time.Duration) *url.URL {
	q := u.Query()
	if have, err := time.ParseDuration(q.Get("timeout")); err == nil && have > 0 && have <= d {
		return u
	}
	q.Set("timeout", d.String())
	c := *u
	c.RawQuery = q.Encode()
	return &c
}

// cancelOnClose releases a write's context once its answer has been read.
type cancelOnClose struct {
	io.ReadCloser
	cancel func()
}

func (c *cancelOnClose) Close() error {
	err := c.ReadCloser.Close()
	c.cancel()
	return err
}

// mutating reports whether a request can change the cluster. Lists and
// watches are GETs.
func mutating(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return false
	}
	return true
}
