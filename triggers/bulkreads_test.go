package triggers

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/internal/format"
	"github.com/autox-dev/autox/internal/metainformer"
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
// informer has seen the deletion: the stale-informer scenario.)
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
