package triggers

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"helm.sh/helm/v4/pkg/release/common"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/autox-dev/autox/helmops"
	"github.com/autox-dev/autox/internal/format"
	"github.com/autox-dev/autox/internal/testenv"
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

// TestShortenedTimeoutKeepsLiveness: the liveness limit of a running
// reconcile is the one it started with. An install blocked on its hook
// under `timeout: 10m` may run that long, and a reload that shortens the
// timeout to 1s meanwhile must not make /healthz fail it (and get autox
// killed in the middle of the operation).
func TestShortenedTimeoutKeepsLiveness(t *testing.T) {
	h := newHarness(t)
	h.shutdownTimeout = time.Second
	h.Deployment("web", v("1.0.0"))
	h.start(h.config(webSpec(`      slow: {chart: {path: {{.Charts}}/slow}, timeout: 10m}
`)), time.Hour)
	h.WaitRelease("web-slow", "blocked on its hook", func(r *format.Release) bool {
		return r != nil && r.Status == common.StatusPendingInstall
	})
	now := time.Now() // the reconcile started before this
	h.ctrl.Reconfigure(context.Background(), h.config(webSpec(`      slow: {chart: {path: {{.Charts}}/slow}, timeout: 1s}
`)))
	// Under the new config a reconcile of one release spec would be bounded
	// by 2 × (1 + 1) × (--helm-timeout + 30s) + 1m; the running one keeps
	// 2 × (1 + 1) × (10m + 30s) + 1m.
	short := 4*h.ctrl.rec.Observer().Defaults().Of(nil).StaleAfter() + time.Minute
	long := 4*(10*time.Minute+30*time.Second) + time.Minute
	if err := h.ctrl.Stuck(now.Add(short + time.Minute)); err != nil {
		t.Errorf("a reconcile within the bounds it started with reported stuck after the timeout was shortened: %v", err)
	}
	if err := h.ctrl.Stuck(now.Add(long + time.Second)); err == nil || !strings.Contains(err.Error(), "spec web") {
		t.Errorf("a reconcile running past %s: Stuck = %v, want an error naming the spec", long, err)
	}
	// Let Helm's install end: the hook Job completes.
	testenv.Eventually(t, patience, "the hook Job made", func() (bool, error) {
		_, err := cluster.Client.BatchV1().Jobs(h.NS).Get(context.Background(), "web-slow-wait", metav1.GetOptions{})
		return err == nil, nil
	})
	completeJob(t, h.NS, "web-slow-wait")
	h.WaitRelease("web-slow", "the install done", func(r *format.Release) bool {
		return r != nil && r.Status == common.StatusDeployed
	})
	h.halt()
}

// completeJob does what the Job controller, absent from the test control
// plane, would do when a Job's pod succeeds.
func completeJob(t *testing.T, ns, name string) {
	t.Helper()
	ctx := context.Background()
	job, err := cluster.Client.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	job.Status = batchv1.JobStatus{
		StartTime: &now, CompletionTime: &now, Succeeded: 1,
		Conditions: []batchv1.JobCondition{
			{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: now},
		},
	}
	if _, err := cluster.Client.BatchV1().Jobs(ns).UpdateStatus(ctx, job, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}
