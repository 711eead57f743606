package leader

import (
	"errors"
	"fmt"
	"net/http"
	"sync"

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
	once      sync.Once
	done      chan struct{}
	onRefused func()
}

// NewTerm starts a term. onRefused, if set, is called for each refused write.
func NewTerm(onRefused func()) *Term {
	return &Term{done: make(chan struct{}), onRefused: onRefused}
}

// End fences the term: from now on its clients refuse every write. It is safe
// to call more than once and from any goroutine, and never blocks.
func (t *Term) End() { t.once.Do(func() { close(t.done) }) }

// Done is closed when the term has ended.
func (t *Term) Done() <-chan struct{} { return t.done }

// Ended reports whether the term has ended.
func (t *Term) Ended() bool {
	select {
	case <-t.done:
		return true
	default:
		return false
	}
}

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

type fencedTransport struct {
	term *Term
	next http.RoundTripper
}

func (f fencedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if mutating(req.Method) && f.term.Ended() {
		if req.Body != nil {
			_ = req.Body.Close() // a RoundTripper must close the body, even on error
		}
		if f.term.onRefused != nil {
			f.term.onRefused()
		}
		return nil, fmt.Errorf("%w (%s %s)", ErrFenced, req.Method, req.URL.Path)
	}
	return f.next.RoundTrip(req)
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
