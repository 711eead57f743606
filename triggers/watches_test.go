package triggers

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/metadata"

	"github.com/autox-dev/autox/helmops"
	"github.com/autox-dev/autox/internal/shard"
	"github.com/autox-dev/autox/internal/testenv"
)

// openWatches is a metadata client that counts the watches open on the API
// server through it, by "resource namespace labelSelector fieldSelector".
type openWatches struct {
	metadata.Interface
	mu   sync.Mutex
	open map[string]int
}

func (o *openWatches) add(key string, d int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.open[key] += d; o.open[key] == 0 {
		delete(o.open, key)
	}
}

func (o *openWatches) now() map[string]int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return maps.Clone(o.open)
}

func (o *openWatches) Resource(gvr schema.GroupVersionResource) metadata.Getter {
	return countedGetter{Getter: o.Interface.Resource(gvr), o: o, resource: gvr.Resource}
}

type countedGetter struct {
	metadata.Getter
	o        *openWatches
	resource string
}

func (g countedGetter) Namespace(ns string) metadata.ResourceInterface {
	return countedResource{ResourceInterface: g.Getter.Namespace(ns), o: g.o, what: g.resource + " " + ns}
}

type countedResource struct {
	metadata.ResourceInterface
	o    *openWatches
	what string
}

func (r countedResource) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	w, err := r.ResourceInterface.Watch(ctx, opts)
	if err != nil {
		return nil, err
	}
	key := fmt.Sprintf("%s %s %s", r.what, opts.LabelSelector, opts.FieldSelector)
	r.o.add(key, 1)
	return &countedStop{Interface: w, stop: func() { r.o.add(key, -1) }}, nil
}

type countedStop struct {
	watch.Interface
	once sync.Once
	stop func()
}

func (w *countedStop) Stop() {
	w.once.Do(w.stop)
	w.Interface.Stop()
}

// specIn is a spec name with prefix in shard i of n.
func specIn(n shard.Count, i int, prefix string) string {
	for k := 0; ; k++ {
		if name := fmt.Sprintf("%s%d", prefix, k); n.OfSpec(name) == i {
			return name
		}
	}
}

// TestShardsShareOneWatchSet runs the controllers of two shards of one
// replica on one Watches against the real API server: each informer (a
// resource and namespace, a selector, a values source, the record index of
// a namespace) has one watch open however many of the shards need it, an
// event reaches the shard whose key it is, and when a shard is released the
// watches only it needed close while the others stay; the last shard's
// release closes them all.
func TestShardsShareOneWatchSet(t *testing.T) {
	n := shard.Count(2)
	a, b, c := specIn(n, 0, "a"), specIn(n, 1, "b"), specIn(n, 1, "c")
	h0 := newHarness(t)
	ns := h0.NS
	h0.Deployment(a, v("1"))
	h0.Deployment(b, v("1"))
	ctx := context.Background()
	for name, data := range map[string]map[string]string{c: {"x": "1"}, "b-values": {"values.yaml": "greeting: from-b-values\n"}} {
		if _, err := cluster.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: v("1")}, Data: data},
			metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	cfg := h0.config(fmt.Sprintf(`
namespaces: [{{.NS}}]
specs:
  %[1]s:
    trigger: {group: apps, version: v1, resource: deployments, name: %[1]s, namespace: {{.NS}}}
    releaseSpecs: {hello: {chart: {path: {{.Charts}}/hello}}}
  %[2]s:
    trigger: {group: apps, version: v1, resource: deployments, name: %[2]s, namespace: {{.NS}}}
    releaseSpecs: {hello: {chart: {path: {{.Charts}}/hello}, valuesFrom: [{kind: ConfigMap, name: b-values}]}}
  %[3]s:
    trigger: {version: v1, resource: configmaps, name: %[3]s, namespace: {{.NS}}}
    releaseSpecs: {hello: {chart: {path: {{.Charts}}/hello}}}
  exp:
    trigger: {group: apps, version: v1, resource: deployments, selector: {matchLabels: {autox.dev/experiment: enabled}}}
    releaseSpecs: {job: {chart: {path: {{.Charts}}/hello}}}
`, a, b, c))

	mc, err := metadata.NewForConfig(cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	counted := &openWatches{Interface: mc, open: map[string]int{}}
	records := helmops.NewSharedRecordIndex(counted, "", 0, zerolog.Nop())
	wctx, cancel := context.WithCancel(ctx)
	w := NewWatches(wctx, WatchesOptions{Metadata: counted, Records: records, Log: zerolog.New(zerolog.NewTestWriter(t))})
	// Cleanups run last first: the controllers stop before the watches.
	t.Cleanup(func() {
		w.Stop()
		cancel()
	})
	h0.shard, h0.watches, h0.sharedRecords = &Shard{Count: n, Index: 0}, w, records
	h1 := &harness{Scene: h0.Scene, t: t, home: h0.homeNS(), shard: &Shard{Count: n, Index: 1}, watches: w, sharedRecords: records}
	h0.start(cfg, time.Hour)
	h1.start(cfg, time.Hour)

	for _, spec := range []string{a, b, c} {
		h0.WaitRelease(spec+"-hello", "installed", deployedAt(1))
	}
	if got := h0.Release(b + "-hello").Values["greeting"]; got != "from-b-values" {
		t.Errorf("%s-hello: greeting %v", b, got)
	}
	deployments := "deployments " + ns + "  "
	selector := "deployments " + ns + " autox.dev/experiment=enabled "
	recordsWatch := "secrets " + ns + " owner=helm "
	onlyShard1 := []string{"configmaps " + ns + "  ", "configmaps " + ns + "  metadata.name=b-values"}
	waitOpen := func(what string, want map[string]int) {
		t.Helper()
		testenv.Eventually(t, patience, what, func() (bool, error) {
			got := counted.now()
			if !maps.Equal(got, want) {
				return false, fmt.Errorf("open watches %v, want %v", got, want)
			}
			return true, nil
		})
	}
	both := map[string]int{deployments: 1, selector: 1, recordsWatch: 1}
	for _, k := range onlyShard1 {
		both[k] = 1
	}
	waitOpen("one watch per informer for both shards", both)

	// A trigger change reaches the shard of its spec through the shared
	// informer (the pass runs once an hour).
	h0.Relabel(a, v("2"))
	h0.Relabel(b, v("2"))
	h0.WaitRelease(a+"-hello", "upgraded by shard 0", deployedAt(2))
	h0.WaitRelease(b+"-hello", "upgraded by shard 1", deployedAt(2))

	h1.halt()
	waitOpen("the watches only shard 1 needed closed", map[string]int{deployments: 1, selector: 1, recordsWatch: 1})
	h0.halt()
	waitOpen("every watch closed with the last shard", map[string]int{})
}
