package driftwatch

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/helmops"
)

// requestCounter counts the requests of a rest.Config: all of them, the
// server-side-apply dry runs and the GETs of release records.
type requestCounter struct {
	all, dryRuns, recordGets atomic.Int64
}

func (c *requestCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		c.all.Add(1)
		if r.Method == http.MethodPatch && r.URL.Query().Has("dryRun") {
			c.dryRuns.Add(1)
		}
		if r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/secrets/sh.helm.release.") {
			c.recordGets.Add(1)
		}
		return rt.RoundTrip(r)
	})
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// countedManager is a Manager whose requests count reports, with a record
// index of namespace ns, synced; stop stops the index.
func countedManager(t *testing.T, ctx context.Context, ns string) (*helmops.Manager, *requestCounter, func()) {
	t.Helper()
	count := &requestCounter{}
	rc := rest.CopyConfig(cluster.Config)
	rc.Wrap(count.wrap)
	cs, mc := clients(t)
	m := manager(t, rc, cs, mc)
	ix := m.NewRecordIndex()
	ix.Watch(ctx, []string{ns})
	if !ix.WaitForSync(ctx) {
		ix.Stop()
		t.Fatal("the record index never synced")
	}
	return m, count, ix.Stop
}

// TestQuietPeriodMakesNoRequest: once a release's check found it clean,
// its periodic re-checks make no request at all (no record GET, no dry
// run) while nothing changes; a scale is still put back; an annotation
// another manager adds is checked (the watch sees it), found no drift, and
// the re-checks are quiet again; a status update (which the watch does
// not call drift) and a write of the record each make the next periodic
// check a real one.
func TestQuietPeriodMakesNoRequest(t *testing.T) {
	_, ns, mc := scene(t)
	ctx, cancel := context.WithCancel(context.Background())
	m, count, stop := countedManager(t, ctx, ns)
	defer stop()
	metrics, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	target := Target{DriftTarget: helmops.DriftTarget{Namespace: ns, Name: "d", Revision: 1, Policy: &config.Drift{Mode: config.DriftCorrect}}}
	l := New(Options{
		Checker: m.NewDriftChecker(helmops.DriftOptions{}), Metadata: mc, Mapper: mapper(t),
		Source:   func(context.Context) ([]Target, error) { return []Target{target}, nil },
		Coalesce: 50 * time.Millisecond, Period: 200 * time.Millisecond, Refresh: time.Hour,
		Metrics: metrics, Log: zerolog.Nop(),
	})
	defer running(t, ctx, cancel, l)()
	checks := func(result string) float64 { return testutil.ToFloat64(metrics.checks.WithLabelValues(result)) }
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(patience)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: never (checked %v, skipped %v, error %v)", what, checks(resultChecked), checks(resultSkipped), checks(resultError))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	// quietPeriods waits for a skipped periodic check, then for n more, and
	// says that those made no request and no real check.
	quietPeriods := func(n int) {
		t.Helper()
		// A skip says the release is quiet now: nothing is left to check.
		before := checks(resultSkipped)
		waitFor("a skipped check", func() bool { return checks(resultSkipped) > before })
		all, checked, skipped := count.all.Load(), checks(resultChecked), checks(resultSkipped)
		waitFor("skipped checks", func() bool { return checks(resultSkipped) >= skipped+float64(n) })
		if got := count.all.Load() - all; got != 0 {
			t.Errorf("%d requests in %d quiet periods (dry runs %d, record GETs %d so far); want none", got, n, count.dryRuns.Load(), count.recordGets.Load())
		}
		if got := checks(resultChecked) - checked; got != 0 {
			t.Errorf("%v real checks in quiet periods", got)
		}
	}
	realCheck := func(what string) {
		t.Helper()
		checked, dryRuns := checks(resultChecked), count.dryRuns.Load()
		waitFor(what+" checked", func() bool { return checks(resultChecked) > checked })
		if count.dryRuns.Load() == dryRuns {
			t.Errorf("%s: a check without a dry run", what)
		}
	}

	waitFor("the first (real) check", func() bool { return checks(resultChecked) > 0 })
	if checks(resultError) != 0 {
		t.Fatalf("a check failed")
	}
	quietPeriods(3)

	// An edit is put back: the watch triggers a real check.
	records := count.recordGets.Load()
	if _, err := cluster.Client.AppsV1().Deployments(ns).UpdateScale(context.Background(), "d",
		&autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: "d", Namespace: ns}, Spec: autoscalingv1.ScaleSpec{Replicas: 3}},
		metav1.UpdateOptions{FieldManager: "kubectl"}); err != nil {
		t.Fatal(err)
	}
	waitFor("the scale put back", func() bool { return replicas(t, ns) == 1 })
	// The check's report (counted) comes after its correction.
	waitFor("the correction counted", func() bool {
		return testutil.ToFloat64(metrics.corrections.WithLabelValues(resultCorrected)) == 1
	})
	// The correction read the cached record live, and that no newer one exists.
	if got := count.recordGets.Load() - records; got > 2 {
		t.Errorf("%d record GETs for one correction", got)
	}
	quietPeriods(2)

	// Another manager adds an annotation: checked (no drift), then quiet.
	checked, records := checks(resultChecked), count.recordGets.Load()
	if _, err := cluster.Client.AppsV1().Deployments(ns).Patch(context.Background(), "d", types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"team":"blue"}}}`), metav1.PatchOptions{FieldManager: "someone-else"}); err != nil {
		t.Fatal(err)
	}
	waitFor("the annotation checked", func() bool { return checks(resultChecked) > checked })
	if got := count.recordGets.Load() - records; got != 0 {
		t.Errorf("the check of an unchanged record read it %d times; want it from the cache", got)
	}
	quietPeriods(2)
	if got := testutil.ToFloat64(metrics.corrections.WithLabelValues(resultCorrected)); got != 1 {
		t.Errorf("a field another manager added was corrected: %v corrections", got)
	}

	// A status update is no drift for the watch, but a write: the next
	// periodic check is real.
	d, err := cluster.Client.AppsV1().Deployments(ns).Get(context.Background(), "d", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d.Status.ObservedGeneration = d.Generation
	if _, err := cluster.Client.AppsV1().Deployments(ns).UpdateStatus(context.Background(), d, metav1.UpdateOptions{FieldManager: "kube-controller-manager"}); err != nil {
		t.Fatal(err)
	}
	realCheck("the status update")
	quietPeriods(2)

	// A write of the record: the next periodic check reads it again.
	records = count.recordGets.Load()
	if _, err := cluster.Client.CoreV1().Secrets(ns).Patch(context.Background(), "sh.helm.release.v1.d.v1", types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"touched":"yes"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	realCheck("the record write")
	if count.recordGets.Load() == records {
		t.Error("the written record was not read again")
	}
	quietPeriods(2)
}

// TestQuiet: when a periodic check may be skipped.
func TestQuiet(t *testing.T) {
	dep := objKey{watchKey{schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, "ns"}, "d"}
	cm := objKey{watchKey{schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, "ns"}, "d"}
	v := func(uid, rv string) version { return version{UID: types.UID(uid), ResourceVersion: rv} }
	clean := map[objKey]version{dep: v("u1", "5"), cm: v("u2", "7")}
	for name, c := range map[string]struct {
		clean, current map[objKey]version
		want           bool
	}{
		"unchanged":          {clean, map[objKey]version{dep: v("u1", "5"), cm: v("u2", "7")}, true},
		"written":            {clean, map[objKey]version{dep: v("u1", "6"), cm: v("u2", "7")}, false},
		"re-created":         {clean, map[objKey]version{dep: v("u9", "5"), cm: v("u2", "7")}, false},
		"missing or unseen":  {clean, map[objKey]version{dep: v("u1", "5")}, false},
		"never checked":      {nil, map[objKey]version{dep: v("u1", "5")}, false},
		"extra object known": {clean, map[objKey]version{dep: v("u1", "5"), cm: v("u2", "7"), {Name: "x"}: v("u3", "1")}, true},
	} {
		if got := quiet(c.clean, c.current); got != c.want {
			t.Errorf("%s: quiet = %v, want %v", name, got, c.want)
		}
	}
}

// TestQuietPeriodAtScale measures (AUTOX_DRIFT_SCALE=100,1000: release
// counts; skipped without it) the requests of the drift loop in one
// period of every release once each had its first check: with the quiet
// skip, and with every periodic check made real (VerifyEvery 1: what the
// loop did before, less one record GET per check, which the record cache
// saves). Releases are of the chart "one" (one ConfigMap), as the bench's.
func TestQuietPeriodAtScale(t *testing.T) {
	scale := os.Getenv("AUTOX_DRIFT_SCALE")
	if scale == "" {
		t.Skip("a measurement: set AUTOX_DRIFT_SCALE=100,1000")
	}
	ch := loadChart(t, "one")
	cs, mc := clients(t)
	for _, f := range strings.Split(scale, ",") {
		n, err := strconv.Atoi(f)
		if err != nil {
			t.Fatal(err)
		}
		ns := cluster.Namespace(t)
		installer := manager(t, cluster.Config, cs, mc)
		var targets []Target
		for i := 0; i < n; i++ {
			name := fmt.Sprintf("r%d", i)
			if _, err := installer.Install(context.Background(), helmops.Target{Spec: "spec", ReleaseSpec: "rs", Name: name, Namespace: ns, Chart: ch}); err != nil {
				t.Fatal(err)
			}
			targets = append(targets, Target{DriftTarget: helmops.DriftTarget{Namespace: ns, Name: name, Revision: 1, Policy: &config.Drift{Mode: config.DriftCorrect}}})
		}
		for _, verify := range []int{0, 1} {
			ctx, cancel := context.WithCancel(context.Background())
			m, count, stop := countedManager(t, ctx, ns)
			metrics, err := NewMetrics(prometheus.NewRegistry())
			if err != nil {
				t.Fatal(err)
			}
			period := 10 * time.Second
			l := New(Options{
				Checker: m.NewDriftChecker(helmops.DriftOptions{QPS: 2000, Burst: 2000}), Metadata: mc, Mapper: mapper(t),
				Source:   func(context.Context) ([]Target, error) { return targets, nil },
				Coalesce: 50 * time.Millisecond, Period: period, Refresh: time.Hour, VerifyEvery: verify, Workers: 4,
				Metrics: metrics, Log: zerolog.Nop(),
			})
			stopLoop := running(t, ctx, cancel, l)
			checks := func(result string) float64 { return testutil.ToFloat64(metrics.checks.WithLabelValues(result)) }
			periodic := func() float64 { return checks(resultChecked) + checks(resultSkipped) + checks(resultError) }
			wait := func(ok func() bool) {
				deadline := time.Now().Add(10 * time.Minute)
				for !ok() {
					if time.Now().After(deadline) {
						t.Fatalf("%d releases: never (checked %v, skipped %v, error %v)", n, checks(resultChecked), checks(resultSkipped), checks(resultError))
					}
					time.Sleep(50 * time.Millisecond)
				}
			}
			wait(func() bool { return checks(resultChecked)+checks(resultError) >= float64(n) }) // every first check
			all, dry, recs, start := count.all.Load(), count.dryRuns.Load(), count.recordGets.Load(), periodic()
			wait(func() bool { return periodic() >= start+float64(n) }) // one period of each
			t.Logf("%d releases, verify-every %d: one period of each made %d requests (%d dry runs, %d record GETs); checked %v, skipped %v, error %v in all",
				n, verify, count.all.Load()-all, count.dryRuns.Load()-dry, count.recordGets.Load()-recs, checks(resultChecked), checks(resultSkipped), checks(resultError))
			stopLoop()
			stop()
		}
	}
}
