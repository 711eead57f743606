package helmops

import (
	"context"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"

	"github.com/autox-dev/autox/internal/testenv"
)

// indexOpts shape the index of an indexedManager: the faults its watch and
// LISTs see (testenv.MetadataFaults), and noWait to return without waiting
// for it to sync.
type indexOpts struct {
	faults testenv.MetadataFaults
	noWait bool
	// pageSize is the page size of its LISTs (0: one response).
	pageSize int64
}

// indexedManager returns a Manager reading through a record index of
// namespaces, synced (unless o.noWait), and the counter of every request it
// sends by verb (list, get, ...). The index stops with the test.
func indexedManager(t *testing.T, driver string, o *indexOpts, namespaces ...string) (*Manager, *RecordIndex, *verbCounter) {
	t.Helper()
	counter := &verbCounter{n: map[string]int{}}
	cfg := rest.CopyConfig(cluster.Config)
	cfg.WrapTransport = func(next http.RoundTripper) http.RoundTripper { counter.next = next; return counter }
	opts := withClients(t, Options{RESTConfig: cfg, StorageDriver: driver, Timeout: time.Minute, MaxHistory: 3, ListPageSize: o.pageSize, Log: zerolog.Nop()})
	opts.Metadata = o.faults.Wrap(opts.Metadata)
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
		for _, o := range ri.Indexer().List() {
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
	// lists are the LISTs sent: path?labelSelector.
	lists []string
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
	if verb == "list" {
		c.lists = append(c.lists, req.URL.Path+"?"+q.Get("labelSelector"))
	}
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

// listsMatching counts the LISTs sent so far whose path?labelSelector
// contains every one of parts.
func (c *verbCounter) listsMatching(parts ...string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, l := range c.lists {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(l, p)
		}
		if all {
			n++
		}
	}
	return n
}
