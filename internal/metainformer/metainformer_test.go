package metainformer

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"

	"github.com/autox-dev/autox/internal/testenv"
)

var cluster *testenv.Cluster

func TestMain(m *testing.M) {
	code := testenv.RunMain(m, &cluster)
	if code == 0 {
		if err := goleak.Find(goleak.IgnoreTopFunction("k8s.io/klog/v2.(*flushDaemon).run.func1")); err != nil {
			fmt.Fprintln(os.Stderr, "goroutines leaked:", err)
			code = 1
		}
	}
	os.Exit(code)
}

const patience = 60 * time.Second // a bound for a broken build, not a performance goal

var deployments = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}

// TestSet runs one informer per namespace of a Set against the real API
// server: each lists, then watches (an open watch is counted) and hears
// its namespace's objects; Sync stops the informers of keys it no longer
// names and starts the new ones, saying which; after Stop, Sync starts
// nothing.
func TestSet(t *testing.T) {
	mc, err := metadata.NewForConfig(cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	a, b := cluster.Namespace(t), cluster.Namespace(t)
	cluster.CreateDeployment(t, a, "in-a", nil)
	cluster.CreateDeployment(t, b, "in-b", nil)
	var (
		mu      sync.Mutex
		heard   []string
		changes []string
	)
	set := NewSet(func(ns string) Spec {
		res := mc.Resource(deployments).Namespace(ns)
		return Spec{
			List: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return res.List(ctx, o) },
			Watch: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				return res.Watch(ctx, o)
			},
			Handler: cache.ResourceEventHandlerFuncs{AddFunc: func(obj interface{}) {
				mu.Lock()
				defer mu.Unlock()
				heard = append(heard, obj.(*metav1.PartialObjectMetadata).Name)
			}},
		}
	}, func(ns string, started bool) {
		mu.Lock()
		defer mu.Unlock()
		changes = append(changes, fmt.Sprintf("%s %v", ns, started))
	})
	ctx := context.Background()
	set.Sync(ctx, []string{a})
	syncCtx, cancel := context.WithTimeout(ctx, patience)
	defer cancel()
	if !set.WaitForSync(syncCtx) || !set.HasSynced() {
		t.Fatal("the informer of a never synced")
	}
	testenv.Eventually(t, patience, "a watch open", func() (bool, error) { return set.Get(a).Watching(), nil })
	if objs := set.Get(a).Indexer().List(); len(objs) != 1 {
		t.Errorf("the store of a holds %d objects, want in-a", len(objs))
	}

	set.Sync(ctx, []string{b})
	if set.Get(a) != nil || set.Get(b) == nil {
		t.Errorf("after Sync(b): a running %v, b running %v", set.Get(a) != nil, set.Get(b) != nil)
	}
	if !set.WaitForSync(syncCtx) {
		t.Fatal("the informer of b never synced")
	}
	set.Stop()
	set.Sync(ctx, []string{a, b})
	if set.Get(a) != nil || set.Get(b) != nil {
		t.Error("Sync after Stop started informers")
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{a + " true", a + " false", b + " true"}; !slices.Equal(changes, want) {
		t.Errorf("changes told %q, want %q", changes, want)
	}
	slices.Sort(heard)
	if !slices.Equal(heard, []string{"in-a", "in-b"}) {
		t.Errorf("heard %q, want in-a and in-b", heard)
	}
}

// TestWatchGeneration: an informer's watch generation names the watch it
// has open; a watch that ends (the API server closing it) and the next one
// opened each change it, so whoever compares two readings learns that its
// store may have missed changes in between.
func TestWatchGeneration(t *testing.T) {
	mc, err := metadata.NewForConfig(cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	ns := cluster.Namespace(t)
	var (
		mu      sync.Mutex
		current watch.Interface
	)
	set := NewSet(func(ns string) Spec {
		res := mc.Resource(deployments).Namespace(ns)
		return Spec{
			List: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return res.List(ctx, o) },
			Watch: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				w, err := res.Watch(ctx, o)
				mu.Lock()
				defer mu.Unlock()
				current = w
				return w, err
			},
		}
	}, nil)
	defer set.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	set.Sync(ctx, []string{ns})
	inf := set.Get(ns)
	if !inf.WaitWatching(ctx) {
		t.Fatal("no watch opened")
	}
	first, open := inf.WatchGeneration()
	if !open || first == 0 {
		t.Fatalf("watching: generation %d, open %v", first, open)
	}
	mu.Lock()
	current.Stop() // as the API server ending it
	mu.Unlock()
	testenv.Eventually(t, patience, "another watch open", func() (bool, error) {
		gen, open := inf.WatchGeneration()
		return open && gen > first, nil
	})
}
