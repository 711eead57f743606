package triggers

import (
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"helm.sh/helm/v4/pkg/release/common"

	"github.com/autox-dev/autox/helmops"
	"github.com/autox-dev/autox/internal/format"
)

// TestStuckReconcileFailsLiveness: /healthz asks Controller.Stuck. A
// reconcile blocked in a Helm operation (an install waiting on a hook that
// never completes) is not stuck while its operations may still be within
// their bounds, and is once it has run far past them.
func TestStuckReconcileFailsLiveness(t *testing.T) {
	h := newHarness(t)
	h.shutdownTimeout = time.Second
	// Helm's install goes on in the background after a stop cancels it, until
	// its hook times out: keep that short, and wait for it below.
	m, err := helmops.New(helmops.Options{RESTConfig: cluster.Config, Timeout: 5 * time.Second, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	h.Helm = m
	h.Deployment("web", v("1.0.0"))
	h.start(h.config(webSpec(`      slow: {chart: {path: {{.Charts}}/slow}}
`)), time.Hour)
	h.WaitRelease("web-slow", "blocked on its hook", func(r *format.Release) bool {
		return r != nil && r.Status == common.StatusPendingInstall
	})
	now := time.Now() // the reconcile started before this
	if err := h.ctrl.Stuck(now); err != nil {
		t.Errorf("a reconcile within its bounds reported stuck: %v", err)
	}
	// One release spec: the bound is 2 × (1 + 1) × StaleAfter + 1m.
	limit := 4*h.ctrl.rec.Observer().Defaults().Of(nil).StaleAfter() + time.Minute
	err = h.ctrl.Stuck(now.Add(limit + time.Second))
	if err == nil || !strings.Contains(err.Error(), "spec web") {
		t.Errorf("a reconcile running past %s: Stuck = %v, want an error naming the spec", limit, err)
	}
	h.halt()
	h.WaitRelease("web-slow", "Helm's background install ended (hook timed out)", func(r *format.Release) bool {
		return r != nil && r.Status == common.StatusFailed
	})
}
