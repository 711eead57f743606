package triggers

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/internal/format"
	"github.com/autox-dev/autox/internal/metainformer"
	"github.com/autox-dev/autox/internal/redact"
	"github.com/autox-dev/autox/internal/testenv"
	"github.com/autox-dev/autox/triggers/observe"
	"github.com/autox-dev/autox/triggers/plan"
)

// TestBulkReadRules: a LIST stands in for a GET only when every rule holds;
// each broken alone refuses it.
func TestBulkReadRules(t *testing.T) {
	good := bulkFacts{Listed: true, Found: true, Age: time.Second, WatchAtList: 3, WatchNow: 3, ListVersion: "7", StoreVersion: "7"}
	for _, tc := range []struct {
		name   string
		change func(*bulkFacts)
		ok     bool
	}{
		{"every rule holds", func(*bulkFacts) {}, true},
		{"not listed", func(f *bulkFacts) { f.Listed = false }, false},
		{"absent from the list", func(f *bulkFacts) { f.Found = false }, false},
		{"read once already", func(f *bulkFacts) { f.Used = true }, false},
		{"an event queued the key", func(f *bulkFacts) { f.Queued = true }, false},
		{"list too old", func(f *bulkFacts) { f.Age = bulkReadMaxAge + time.Millisecond }, false},
		{"clock went back", func(f *bulkFacts) { f.Age = -time.Second }, false},
		{"an event since the list", func(f *bulkFacts) { f.Event = true }, false},
		{"no watch at the list", func(f *bulkFacts) { f.WatchAtList, f.WatchNow = 0, 0 }, false},
		{"the watch ended", func(f *bulkFacts) { f.WatchNow = 0 }, false},
		{"another watch since", func(f *bulkFacts) { f.WatchNow = 4 }, false},
		{"the informer holds a newer version", func(f *bulkFacts) { f.StoreVersion = "8" }, false},
		{"the informer no longer holds it", func(f *bulkFacts) { f.StoreVersion = "" }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := good
			tc.change(&f)
			if ok, why := bulkReadOK(f); ok != tc.ok {
				t.Errorf("bulkReadOK = %v (%s), want %v", ok, why, tc.ok)
			}
		})
	}
}

// TestNoWatchNoListRead: without an informer watching the listed resource,
// a LIST never stands in for a GET, however fresh.
func TestNoWatchNoListRead(t *testing.T) {
	b := newBulkReads(func(observe.ListKey) *metainformer.Informer { return nil })
	cfg := &config.Config{}
	tr := config.Trigger{Group: "apps", Version: "v1", Resource: "deployments", Namespace: "ns", Name: "web"}
	b.newPass(cfg)
	done := b.Listing(context.Background(), cfg, observe.KeyFor(tr))
	done(map[string]plan.TriggerRead{"web": {Found: true, Version: "1"}})
	if _, ok := b.Take(cfg, "web", format.Object{}, tr); ok {
		t.Error("the LIST was used without a watch")
	}
	if reads, refused := b.counts(); reads != 0 || refused != 1 {
		t.Errorf("counts %d read, %d refused; want 0, 1", reads, refused)
	}
}

// bulkConfig is a config of one spec per name, each triggered by the
// Deployment of that name.
func (h *harness) bulkConfig(names []string) *config.Config {
	var b strings.Builder
	b.WriteString("namespaces: [{{.NS}}]\nspecs:\n")
	for _, n := range names {
		fmt.Fprintf(&b, "  %s:\n    trigger: {group: apps, version: v1, resource: deployments, name: %s, namespace: {{.NS}}}\n", n, n)
		b.WriteString("    releaseSpecs:\n      a: {chart: {path: {{.Charts}}/hello}}\n")
	}
	return h.config(b.String())
}

// TestColdStartDecidesFromTheList: a cold start of many triggers decides
// them from the pass's LIST: no trigger is read again with a GET.
func TestColdStartDecidesFromTheList(t *testing.T) {
	h := newHarness(t)
	var names []string
	for i := range 8 {
		n := fmt.Sprintf("t%d", i)
		names = append(names, n)
		h.Deployment(n, map[string]string{"app.kubernetes.io/version": "1"})
	}
	h.start(h.bulkConfig(names), time.Hour)
	for _, n := range names {
		h.Releases().Wait(n+"-a", "installed", func(r *format.Release) bool { return r != nil && r.Revision == 1 })
	}
	h.waitPass()
	gets := 0
	for _, n := range names {
		gets += len(h.reads.of(n))
	}
	// A key whose informer event (none at a cold start) or whose informer
	// watch had not opened yet may GET; most may not.
	if gets > len(names)/4 {
		t.Errorf("%d trigger GETs for a cold start of %d triggers; the pass's LIST should have stood in for them", gets, len(names))
	}
}

// TestTriggerChangedAfterTheListIsReadAgain: a trigger deleted after the
// pass listed it, and before its reconcile, is decided from a GET that
// finds it gone, never from the stale LIST: it gets no release. (Its
// informer has seen the deletion; TestTriggerDeletedBeforeItsDecision has
// one whose watch fell behind.)
func TestTriggerChangedAfterTheListIsReadAgain(t *testing.T) {
	h := newHarness(t)
	names := []string{"kept", "gone"}
	for _, n := range names {
		h.Deployment(n, map[string]string{"app.kubernetes.io/version": "1"})
	}
	var once sync.Once
	h.afterList = func(k observe.ListKey) {
		once.Do(func() {
			if err := cluster.Client.AppsV1().Deployments(h.NS).Delete(context.Background(), "gone", metav1.DeleteOptions{}); err != nil {
				t.Error(err)
				return
			}
			testenv.Eventually(t, patience, "the informer to see the deletion", func() (bool, error) {
				inf := h.ctrl.informers.informer(k)
				if inf == nil {
					return false, nil
				}
				_, exists, err := inf.Indexer().GetByKey(h.NS + "/gone")
				return !exists, err
			})
		})
	}
	h.start(h.bulkConfig(names), time.Hour)
	h.Releases().Wait("kept-a", "installed", func(r *format.Release) bool { return r != nil && r.Revision == 1 })
	h.waitPass()
	if len(h.reads.of("gone")) == 0 {
		t.Error("the deleted trigger was not read again with a GET")
	}
	if r := h.Release("gone-a"); r != nil {
		t.Errorf("a release for a trigger deleted before its decision: revision %d", r.Revision)
	}
}

// listVersion is the resourceVersion of name in the LISTs of key k.
func listVersion(t *testing.T, listed map[observe.ListKey]map[string]plan.TriggerRead, k observe.ListKey, name string) string {
	t.Helper()
	read, ok := listed[k][name]
	if !ok || !read.Found {
		t.Fatalf("the LIST of %v does not hold %s", k, name)
	}
	return read.Version
}

// TestListOfAStoppedInformerIsReadAgain: a pass's LIST taken while
// informer I1 watched its key is not used once I1 stopped and a new
// informer I2 runs for the same key (a reload dropped the key, the next
// restored it, no pass between), although I2's first watch has the same
// generation as I1's and holds the object at the LIST's resourceVersion:
// I2 did not watch all along since the LIST (it listed meanwhile, perhaps
// from the watch cache). The reconcile reads the trigger with a GET.
//
// The reloads are the informer set's sync with each config, as Reconfigure
// makes it; Reconfigure's reconciles would uninstall and install again.
func TestListOfAStoppedInformerIsReadAgain(t *testing.T) {
	h := newHarness(t)
	h.Deployment("web", map[string]string{"app.kubernetes.io/version": "1"})
	cfg := h.bulkConfig([]string{"web"})
	h.start(cfg, time.Hour)
	h.Releases().Wait("web-a", "installed", func(r *format.Release) bool { return r != nil && r.Revision == 1 })
	h.waitPass()
	ctx := context.Background()
	k := observe.KeyFor(cfg.Specs["web"].Trigger)
	obs := h.ctrl.rec.Observer()

	// A pass under cfg (the next one the ticker would start): it LISTs k
	// while I1 watches.
	h.ctrl.bulk.newPass(cfg)
	version := listVersion(t, obs.ListTriggers(ctx, cfg, nil), k, "web")
	i1 := h.ctrl.informers.informer(k)
	gen1, open := i1.WatchGeneration()
	if !open {
		t.Fatal("I1 has no watch open after the LIST")
	}

	h.ctrl.informers.sync(ctx, h.config("namespaces: [{{.NS}}]\nspecs: {}\n"))
	h.ctrl.informers.sync(ctx, cfg)
	i2 := h.ctrl.informers.informer(k)
	if i2 == nil || i2 == i1 {
		t.Fatalf("no new informer for %v after the reloads", k)
	}
	// Everything but the informer's identity says the LIST still holds.
	testenv.Eventually(t, patience, "I2 watching at I1's generation, holding web at the LIST's version", func() (bool, error) {
		gen, open := i2.WatchGeneration()
		o, exists, err := i2.Indexer().GetByKey(h.NS + "/web")
		if err != nil || !exists || !open {
			return false, err
		}
		if gen != gen1 {
			return false, fmt.Errorf("I2's watch generation %d, I1's %d: the test needs them equal", gen, gen1)
		}
		return o.(*metav1.PartialObjectMetadata).ResourceVersion == version, nil
	})

	before := len(h.reads.of("web"))
	if _, err := obs.Observe(ctx, cfg, "web", format.Object{}); err != nil {
		t.Fatal(err)
	}
	if gets := len(h.reads.of("web")) - before; gets != 1 {
		t.Errorf("%d GETs of the trigger, want 1: the LIST of a stopped informer's time stood in for it", gets)
	}
	if reads, refused := h.ctrl.bulk.counts(); reads != 0 || refused != 1 {
		t.Errorf("counts %d read, %d refused; want 0, 1", reads, refused)
	}
}

// removalsSpy runs a pass of the controller when a removal ends, once:
// the pass that begins while a reconcile's removals run.
type removalsSpy struct {
	Helm
	h    *harness
	spec string
	once sync.Once
	// When the pass has run: how many reconciles of spec had finished, and
	// how many reads of its trigger had been made.
	mu       sync.Mutex
	passRan  bool
	finished float64
	reads    int
}

func (s *removalsSpy) UninstallWith(ctx context.Context, namespace, name string, current int, hide *redact.Redactor, p config.Policy) error {
	err := s.Helm.UninstallWith(ctx, namespace, name, current, hide, p)
	s.once.Do(func() {
		s.h.ctrl.runPass(ctx)
		s.mu.Lock()
		defer s.mu.Unlock()
		s.finished, s.reads, s.passRan = finishedReconciles(s.h.metrics, s.spec), len(s.h.reads.of(s.spec)), true
	})
	return err
}

// TestReobservationAfterRemovalsGets: the reconcile that removes a release
// spec's release and then upgrades another observes its key again after
// the removal with a GET, even though a pass began during the removal and
// LISTed the trigger (the first read of the key in that pass, the informer
// unchanged): the reobservation must see what the removals left.
func TestReobservationAfterRemovalsGets(t *testing.T) {
	h := newHarness(t)
	spy := &removalsSpy{h: h, spec: "web"}
	h.spy = func(helm Helm) Helm { spy.Helm = helm; return spy }
	h.Deployment("web", map[string]string{"app.kubernetes.io/version": "1"})
	h.start(h.config(webSpec(`      a: {chart: {path: {{.Charts}}/hello}, values: {greeting: one}}
      b: {chart: {path: {{.Charts}}/hello}}
`)), time.Hour)
	h.WaitRelease("web-a", "installed", deployedAt(1))
	h.WaitRelease("web-b", "installed", deployedAt(1))
	h.waitPass()

	// b leaves and a changes: one plan, its leading removal first.
	h.ctrl.Reconfigure(context.Background(), h.config(webSpec(`      a: {chart: {path: {{.Charts}}/hello}, values: {greeting: two}}
`)))
	h.WaitRelease("web-b", "uninstalled", gone)
	h.WaitRelease("web-a", "upgraded", deployedAt(2))
	spy.mu.Lock()
	finished, from, ran := spy.finished, spy.reads, spy.passRan
	spy.mu.Unlock()
	if !ran {
		t.Fatal("no pass ran during the removal")
	}
	// The reconcile that removed b is the one that counts as finished
	// once more than finished have (reconciles of one spec never overlap).
	testenv.Eventually(t, patience, "the reconcile that removed web-b finished", func() (bool, error) {
		return finishedReconciles(h.metrics, "web") > finished, nil
	})
	got := 0
	for _, r := range h.reads.of("web")[from:] {
		if r.finishedBefore == finished {
			got++
		}
	}
	if got != 1 {
		t.Errorf("%d GETs of the trigger by the reobservation after the removal, want 1", got)
	}
}

// TestTriggerDeletedBeforeItsDecision: the stale-informer scenario. A
// trigger is created (its add event queues a reconcile, held back while
// its spec is busy), a pass LISTs it, and it is deleted before the
// reconcile decides: no release is installed for it, whether the
// informer has seen the deletion or its watch fell behind and has not.
func TestTriggerDeletedBeforeItsDecision(t *testing.T) {
	for _, tc := range []struct {
		name    string
		lagging bool
	}{
		{"the informer saw the deletion", false},
		{"the informer's watch fell behind", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			frozen := &atomic.Bool{}
			h.informerFaults = &testenv.MetadataFaults{Frozen: frozen}
			spy := &orderSpy{}
			h.spy = func(helm Helm) Helm { spy.Helm = helm; return spy }
			cfg := h.bulkConfig([]string{"late"})
			h.start(cfg, time.Hour)
			h.waitPass() // late does not exist yet: nothing to install
			ctx := context.Background()
			k := observe.KeyFor(cfg.Specs["late"].Trigger)
			id := bulkObject{Group: "apps", Resource: "deployments", Namespace: h.NS, Name: "late"}

			// Its reconcile finds the spec busy and is tried again every
			// busyRetry until the lock is released.
			lock := h.ctrl.rec.locks.of("late")
			lock.Lock()
			unlocked := false
			unlock := func() {
				if !unlocked {
					unlocked = true
					lock.Unlock()
				}
			}
			defer unlock()
			h.Deployment("late", map[string]string{"app.kubernetes.io/version": "1"})
			testenv.Eventually(t, patience, "the add event of late at the controller", func() (bool, error) {
				h.ctrl.bulk.mu.Lock()
				defer h.ctrl.bulk.mu.Unlock()
				return h.ctrl.bulk.events[id] > 0, nil
			})
			// The pass LISTs late: its decision may now stand on that LIST.
			h.ctrl.runPass(ctx)
			h.ctrl.bulk.mu.Lock()
			e, listed := h.ctrl.bulk.objs[id]
			h.ctrl.bulk.mu.Unlock()
			if !listed || !e.read.Found {
				t.Fatal("the pass's LIST does not hold late")
			}

			frozen.Store(tc.lagging)
			if err := cluster.Client.AppsV1().Deployments(h.NS).Delete(ctx, "late", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			inStore := func() (bool, error) {
				_, exists, err := h.ctrl.informers.informer(k).Indexer().GetByKey(h.NS + "/late")
				return exists, err
			}
			if tc.lagging {
				if exists, err := inStore(); err != nil || !exists {
					t.Fatalf("the informer no longer holds late (%v): the scenario needs it stale", err)
				}
			} else {
				testenv.Eventually(t, patience, "the informer to see the deletion", func() (bool, error) {
					exists, err := inStore()
					return !exists, err
				})
			}

			finished := finishedReconciles(h.metrics, "late")
			unlock()
			testenv.Eventually(t, patience, "a reconcile of late after the deletion", func() (bool, error) {
				return finishedReconciles(h.metrics, "late") > finished, nil
			})
			if strings.Contains(spy.String(), "install late-a") {
				t.Errorf("a release installed for a trigger deleted before its decision:\n%s", spy)
			}
			if r := h.Release("late-a"); r != nil {
				t.Errorf("a release for a trigger deleted before its decision: revision %d", r.Revision)
			}
		})
	}
}

// TestEventMarkLastsUntilRead: the mark of a key an informer event queued
// outlives the passes until the key's next read, which it refuses the
// LIST, and goes with its spec when the spec leaves the config.
func TestEventMarkLastsUntilRead(t *testing.T) {
	b := newBulkReads(func(observe.ListKey) *metainformer.Informer { return nil })
	cfg := &config.Config{Specs: map[string]*config.Spec{"web": {}}}
	tr := config.Trigger{Group: "apps", Version: "v1", Resource: "deployments", Namespace: "ns", Name: "web"}
	b.eventQueued("web")
	b.eventQueued("gone")
	b.newPass(cfg)
	if !b.evented["web"] || b.evented["gone"] {
		t.Fatalf("marks after a pass: %v, want web's only", b.evented)
	}
	if _, ok := b.Take(cfg, "web", format.Object{}, tr); ok || b.evented["web"] {
		t.Errorf("the read of a marked key: LIST used %v, mark kept %v", ok, b.evented["web"])
	}
}
