package triggers

import (
	"testing"
	"time"
)

// TestBackoffCarriesOverToTheNextTerm: a failing spec's backoff is shared by
// the controllers of successive leadership terms. The next term does not
// retry it at once (its first pass leaves it alone), and does retry it when
// it is due — the previous term's scheduled retry went with its queue.
func TestBackoffCarriesOverToTheNextTerm(t *testing.T) {
	h := newHarness(t)
	h.backoff = NewBackoff(8*time.Second, time.Minute) // long enough for the first pass to come first
	h.Deployment("web", v("1.0.0"))
	cfg := h.config(webSpec(`      broken: {chart: {path: {{.Charts}}/broken}}
`))
	h.start(cfg, time.Hour)
	h.waitReconciles("web", resultError, 1)
	h.halt()
	if !h.backoff.waiting("web", time.Now()) {
		t.Fatal("the failed spec is not in backoff")
	}

	// The next term: its first pass must leave the spec alone, and with a
	// resync of an hour only the carried-over retry can reconcile it.
	h.start(cfg, time.Hour)
	h.waitPass()
	if n := h.reconciles("web", resultError); n != 0 {
		t.Errorf("the next term retried a spec in backoff at once (%v reconciles)", n)
	}
	h.waitReconciles("web", resultError, 1)
}
