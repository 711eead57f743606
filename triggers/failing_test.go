package triggers

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"helm.sh/helm/v4/pkg/release/common"
	"helm.sh/helm/v4/pkg/storage/driver"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/internal/format"
	"github.com/autox-dev/autox/triggers/plan"

	"github.com/autox-dev/autox/internal/releasetest"
)

func TestOutcomes(t *testing.T) {
	sourceErr := fmt.Errorf("release spec s: %w", plan.NewSourceError(config.ValuesFrom{Kind: config.KindSecret, Name: "creds", Key: "values.yaml"}, "ns", errors.New("not found")))
	failed := []plan.Failure{{ReleaseSpec: "s", Err: sourceErr}, {ReleaseSpec: "chart", Err: errors.New("no such chart")}}
	// b's release was left pending-upgrade long ago (stale), c's just now
	// (locked), as their plan classified them.
	steps := []plan.Step{{ReleaseSpec: "a"}, {ReleaseSpec: "b", Action: plan.ActionRollback, State: plan.ReleaseStaleUpgrade},
		{ReleaseSpec: "c", State: plan.ReleaseLocked}, {ReleaseSpec: "d"}}
	errs := []error{nil, errors.New("rollback failed"), errors.New("upgrade failed"), nil}

	got := outcomes(failed, steps, errs)
	want := map[string]outcome{
		"s":     {failing: true, source: true},
		"chart": {failing: true},
		"b":     {failing: true, stale: true},
		"c":     {failing: true}, // pending, but young: another process may be at work
	}
	if len(got) != len(want) {
		t.Errorf("outcomes = %+v, want %+v", got, want)
	}
	for id, w := range want {
		if got[id] != w {
			t.Errorf("release spec %s: %+v, want %+v", id, got[id], w)
		}
	}
}

// TestStaleByItsOwnTimeout: a release left pending is stale after its
// release spec's timeout (+30s), not --helm-timeout's: its failed recovery
// counts as a stale release unrecovered by that timeout, as the plan that
// recovered it classified it. With --helm-timeout 5m, web-b (timeout 10s)
// pending for a minute is stale, and its failed rollback says so.
func TestStaleByItsOwnTimeout(t *testing.T) {
	now := time.Now()
	cfg, err := config.Parse([]byte(`
namespaces: [ns]
specs:
  web:
    trigger: {group: apps, version: v1, resource: deployments, name: web, namespace: ns}
    releaseSpecs:
      b: {chart: {path: charts/hello}, releaseName: web-b, namespace: ns, timeout: 10s}
`), "/cfg")
	if err != nil {
		t.Fatal(err)
	}
	pending := &format.Release{Record: format.Record{Name: "web-b", Namespace: "ns", Spec: "web", ReleaseSpec: "b", Instance: "autox", Status: common.StatusPendingUpgrade, Revision: 2},
		LastDeployedRevision: 1, DeployedBefore: true, ChartName: "hello", ChartVersion: "0.1.0", Modified: now.Add(-time.Minute)}
	p := plan.Decide(plan.Observation{Spec: "web", Config: cfg.Specs["web"], Instance: "autox", InForce: cfg,
		Trigger: plan.TriggerRead{Found: true, Labels: map[string]string{config.DefaultTriggerLabel: "1.0.0"}},
		Current: []*format.Release{pending}, ReleaseSpecs: map[string]plan.ReleaseSpecObservation{"b": {Chart: plan.ChartID{Name: "hello", Version: "0.1.0"}}},
		Now: now, Defaults: config.PolicyDefaults{Timeout: 5 * time.Minute, MaxHistory: 10}})
	if len(p.Steps) != 1 || p.Steps[0].Action != plan.ActionRollback {
		t.Fatalf("plan = %+v, want the rollback of the stale release", p.Steps)
	}
	got := outcomes(nil, p.Steps, []error{errors.New("rollback failed")})
	if want := (outcome{failing: true, stale: true}); got["b"] != want {
		t.Errorf("outcome of the failed recovery = %+v, want %+v", got["b"], want)
	}
}

// TestReleaseSpecGauges: the gauges count a release spec's failing objects,
// keep a zero series for a release spec that is fine, and lose the series
// of release specs and specs that left the config.
func TestReleaseSpecGauges(t *testing.T) {
	g := newReleaseSpecGauges()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(g)
	a, b := format.Object{Namespace: "ns", Name: "a"}, format.Object{Namespace: "ns", Name: "b"}
	ids := []string{"x", "y"}
	g.record("sel", a, ids, map[string]outcome{"x": {failing: true, source: true}})
	g.record("sel", b, ids, map[string]outcome{"x": {failing: true}, "y": {failing: true, stale: true}})
	check := func(what, id string, failing, source, stale float64) {
		t.Helper()
		if f, s, st := gauge(t, g, "autox_release_spec_failing", "sel", id), gauge(t, g, "autox_values_source_failing", "sel", id),
			gauge(t, g, "autox_stale_release_unrecovered", "sel", id); f != failing || s != source || st != stale {
			t.Errorf("%s: %s failing %v, values source %v, stale %v; want %v, %v, %v", what, id, f, s, st, failing, source, stale)
		}
	}
	check("two objects failing", "x", 2, 1, 0)
	check("two objects failing", "y", 1, 0, 1)

	g.record("sel", a, ids, nil) // a is fine now
	check("a fine again", "x", 1, 0, 0)
	g.record("sel", b, ids, nil)
	check("both fine", "x", 0, 0, 0)

	g.record("sel", b, []string{"x"}, map[string]outcome{"x": {failing: true}}) // y left the config
	if n := testutil.CollectAndCount(g, "autox_release_spec_failing"); n != 1 {
		t.Errorf("%d series after y left the config, want 1", n)
	}
	g.record("named", format.Object{}, []string{"z"}, map[string]outcome{"z": {failing: true}})
	g.forget("sel")
	if n := testutil.CollectAndCount(g, "autox_release_spec_failing"); n != 1 || len(g.last["sel"]) != 0 {
		t.Errorf("%d series after spec sel left the config, want only named's", n)
	}
	g.record("named", format.Object{}, nil, nil) // the spec left: nothing kept
	if _, kept := g.last["named"]; kept || testutil.CollectAndCount(g, "autox_release_spec_failing") != 0 {
		t.Errorf("a spec without release specs keeps state: %v", g.last)
	}
}

// gauge is the value of the series (spec, releaseSpec) of gauge name as c
// reports it when scraped; 0 without one (as a new series of a gauge
// vector reads).
func gauge(t testing.TB, c prometheus.Collector, name, spec, releaseSpec string) float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatalf("cannot register the collector: %v", err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("cannot gather: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			if l["spec"] == spec && l["release_spec"] == releaseSpec {
				return m.GetGauge().GetValue()
			}
		}
	}
	return 0
}

// TestStaleReleaseUnrecovered leaves a release pending-upgrade, as a killed
// process would, with a record Helm cannot roll back from (its manifest is
// not YAML): once it is stale, autox tries to recover it, fails, and says so
// in autox_stale_release_unrecovered and autox_release_spec_failing, until
// its leadership term ends.
func TestStaleReleaseUnrecovered(t *testing.T) {
	h := newHarness(t)
	h.Deployment("web", v("1.0.0"))
	cfg := h.config(twoReleases)
	h.start(cfg, time.Hour)
	h.WaitRelease("web-hello", "installed", deployedAt(1))
	if got := gauge(t, h.metrics.releaseSpecs, "autox_release_spec_failing", "web", "hello"); got != 0 {
		t.Errorf("autox_release_spec_failing = %v for a release spec that works, want 0", got)
	}
	h.halt()

	store := driver.NewSecrets(cluster.Client.CoreV1().Secrets(h.NS))
	rel := releasetest.Record(t, store, "sh.helm.release.v1.web-hello.v1")
	rel.Version, rel.Info.Status, rel.Manifest = 2, common.StatusPendingUpgrade, "kind: [not yaml"
	if err := store.Create("sh.helm.release.v1.web-hello.v2", rel); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Hour) // far past the harness's stale age
	h.now = func() time.Time { return later }
	h.start(cfg, 300*time.Millisecond)
	h.waitReconciles("web", resultError, 1)
	failing := gauge(t, h.metrics.releaseSpecs, "autox_release_spec_failing", "web", "hello")
	stale := gauge(t, h.metrics.releaseSpecs, "autox_stale_release_unrecovered", "web", "hello")
	if failing != 1 || stale != 1 {
		t.Errorf("after a failed recovery: autox_release_spec_failing %v, autox_stale_release_unrecovered %v; want 1 and 1", failing, stale)
	}
	// (Helm's rollback leaves a pending-rollback revision of its own.)
	if r := h.Release("web-hello"); r.Status == common.StatusDeployed {
		t.Fatalf("the release was recovered after all: the test's broken record no longer breaks the rollback")
	}
	// A process that stops leading no longer reports what it knew.
	h.halt()
	if n := testutil.CollectAndCount(h.metrics.releaseSpecs, "autox_release_spec_failing"); n != 0 {
		t.Errorf("%d autox_release_spec_failing series after the term ended, want none", n)
	}
}
