package helmops

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"

	"github.com/autox-dev/autox/internal/testenv"
)

// indexOpts shape the index of an indexedManager.
type indexOpts struct {
	// frozen, when set, gives the index watches that never deliver an
	// event while it is true: an index that looks healthy and falls
	// behind, the worst case of a lagging watch.
	frozen *atomic.Bool
	// listFails, when set, fails the index's LISTs while it is true: an
	// index that cannot sync (the Manager's live LISTs still work).
	listFails *atomic.Bool
	// watchFails, when set, refuses the index's watches while it is true;
	// watches, when set, holds every watch handed out, so that a test can
	// end them.
	watchFails *atomic.Bool
	watches    *watchSet
	// noWait returns without waiting for the index to sync.
	noWait bool
}

// indexedManager returns a Manager reading through a record index of
// namespaces, synced (unless o.noWait), and the counter of every request it
// sends by verb (list, get, ...). The index stops with the test.
func indexedManager(t *testing.T, driver string, o indexOpts, namespaces ...string) (*Manager, *RecordIndex, *verbCounter) {
	t.Helper()
	counter := &verbCounter{n: map[string]int{}}
	cfg := rest.CopyConfig(cluster.Config)
	cfg.WrapTransport = func(next http.RoundTripper) http.RoundTripper { counter.next = next; return counter }
	opts := withClients(t, Options{RESTConfig: cfg, StorageDriver: driver, Timeout: time.Minute, MaxHistory: 3, Log: zerolog.Nop()})
	opts.Metadata = &testMeta{Interface: opts.Metadata, o: o}
	m, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ix := m.NewRecordIndex()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { ix.Stop(); cancel() })
	ix.Watch(ctx, namespaces)
	if !o.noWait {
		wctx, wcancel := context.WithTimeout(ctx, time.Minute)
		defer wcancel()
		if !ix.WaitForSync(wctx) {
			t.Fatal("the record index did not sync")
		}
		testenv.Eventually(t, time.Minute, "the record index watching", func() (bool, error) {
			for _, ns := range namespaces {
				if ix.usable(ns) == nil {
					return false, nil
				}
			}
			return true, nil
		})
	}
	return m, ix, counter
}

// caughtUp waits until the index holds exactly the records a live LIST of
// namespace shows, at the same resourceVersions.
func caughtUp(t *testing.T, ix *RecordIndex, namespace string) {
	t.Helper()
	mc, err := metadata.NewForConfig(cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, "the record index caught up with "+namespace, func() (bool, error) {
		list, err := mc.Resource(ix.gvr).Namespace(namespace).List(context.Background(), metav1.ListOptions{LabelSelector: "owner=helm"})
		if err != nil {
			return false, err
		}
		var live []string
		for _, item := range list.Items {
			live = append(live, item.Name+"@"+item.ResourceVersion)
		}
		ri := ix.usable(namespace)
		if ri == nil {
			return false, nil
		}
		var held []string
		for _, o := range ri.inf.GetStore().List() {
			m := o.(*metav1.PartialObjectMetadata)
			held = append(held, m.Name+"@"+m.ResourceVersion)
		}
		sort.Strings(live)
		sort.Strings(held)
		return strings.Join(live, ",") == strings.Join(held, ","), nil
	})
}

// verbCounter counts requests by verb: list, watch, get, create, update, delete.
type verbCounter struct {
	next http.RoundTripper
	mu   sync.Mutex
	n    map[string]int
}

func (c *verbCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	verb := strings.ToLower(req.Method)
	q := req.URL.Query()
	switch {
	case req.Method == http.MethodGet && q.Get("watch") == "true":
		verb = "watch"
	case req.Method == http.MethodGet && !isNamed(req.URL.Path):
		verb = "list"
	}
	c.mu.Lock()
	c.n[verb]++
	c.mu.Unlock()
	return c.next.RoundTrip(req)
}

// isNamed reports whether a resource path names one object
// (/api/v1/namespaces/NS/secrets/NAME).
func isNamed(path string) bool {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	return len(parts) == 6 && parts[2] == "namespaces"
}

func (c *verbCounter) snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int, len(c.n))
	for k, v := range c.n {
		out[k] = v
	}
	return out
}

// since returns the requests of verb sent after before was taken.
func (c *verbCounter) since(before map[string]int, verb string) int {
	return c.snapshot()[verb] - before[verb]
}

// testMeta is a metadata client whose watches and LISTs indexOpts can
// freeze or fail; everything else goes to the API server.
type testMeta struct {
	metadata.Interface
	o indexOpts
}

func (m *testMeta) Resource(gvr schema.GroupVersionResource) metadata.Getter {
	return &testGetter{Getter: m.Interface.Resource(gvr), o: m.o}
}

type testGetter struct {
	metadata.Getter
	o indexOpts
}

func (g *testGetter) Namespace(ns string) metadata.ResourceInterface {
	return &testResource{ResourceInterface: g.Getter.Namespace(ns), o: g.o}
}

type testResource struct {
	metadata.ResourceInterface
	o indexOpts
}

func (r *testResource) List(ctx context.Context, opts metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
	// Only the informer's LISTs, which ask for a resourceVersion: the
	// Manager's own live LISTs go through.
	if r.o.listFails != nil && r.o.listFails.Load() && opts.ResourceVersion != "" {
		return nil, fmt.Errorf("listing refused by the test")
	}
	return r.ResourceInterface.List(ctx, opts)
}

func (r *testResource) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	if r.o.watchFails != nil && r.o.watchFails.Load() {
		return nil, fmt.Errorf("watch refused by the test")
	}
	w, err := r.ResourceInterface.Watch(ctx, opts)
	if err != nil {
		return w, err
	}
	frozen := r.o.frozen
	if frozen == nil {
		frozen = &atomic.Bool{}
	}
	held := frozenWatch(w, frozen)
	if r.o.watches != nil {
		r.o.watches.add(held)
	}
	return held, nil
}

// watchSet holds watches a test can end, as an API server closing them.
type watchSet struct {
	mu sync.Mutex
	ws []watch.Interface
}

func (s *watchSet) add(w watch.Interface) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ws = append(s.ws, w)
}

func (s *watchSet) endAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, w := range s.ws {
		w.Stop()
	}
	s.ws = nil
}

// frozenWatch passes the events of w on only while frozen is false; the
// others are dropped, as a watch that has fallen behind never delivers them
// in time.
func frozenWatch(w watch.Interface, frozen *atomic.Bool) *heldWatch {
	out := make(chan watch.Event)
	stop := make(chan struct{})
	var once sync.Once
	go func() {
		defer close(out)
		for {
			select {
			case ev, ok := <-w.ResultChan():
				if !ok {
					return
				}
				if frozen.Load() {
					continue
				}
				select {
				case out <- ev:
				case <-stop:
					return
				}
			case <-stop:
				return
			}
		}
	}()
	return &heldWatch{ch: out, stop: func() { once.Do(func() { close(stop); w.Stop() }) }}
}

type heldWatch struct {
	ch   chan watch.Event
	stop func()
}

func (w *heldWatch) ResultChan() <-chan watch.Event { return w.ch }
func (w *heldWatch) Stop()                          { w.stop() }
