package leader

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
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
