// Package metainformer runs keyed sets of metadata-only informers, the way
// autox needs them in two places: the trigger and values-source informers of
// triggers, and the record index of helmops. Every informer of a Set lists,
// then watches (client-go's watch-list stream is off: in that mode a failed
// watch backs off for up to a minute without heeding the informer's stop),
// has no resync, counts its open watches, and starts and stops with its key;
// a stop waits for it to end, and nothing starts after the Set's Stop.
package metainformer

import (
	"context"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// Spec is what one informer lists and watches, and what it does with it.
type Spec struct {
	// List and Watch read the objects' metadata (a metadata client's List
	// and Watch, with the caller's selectors and page size).
	List  func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error)
	Watch func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error)
	// Indexers index its store (nil: none); Transform, if set, slims what
	// it keeps; Handler hears its events.
	Indexers  cache.Indexers
	Transform cache.TransformFunc
	Handler   cache.ResourceEventHandler
}

// Informer is one running informer of a Set.
type Informer struct {
	inf    cache.SharedIndexInformer
	cancel context.CancelFunc
	done   chan struct{}
	// watches counts its open watches (0 or 1): none while it lists,
	// relists or waits to watch again, when its store may miss changes the
	// API server has; and every watch it opens.
	watches watches
}

// start runs an informer of spec until ctx ends or it is stopped.
func start(ctx context.Context, spec Spec) *Informer {
	ictx, cancel := context.WithCancel(ctx)
	i := &Informer{cancel: cancel, done: make(chan struct{}), watches: watches{changed: make(chan struct{})}}
	lw := &countedListWatch{ListWatch: &cache.ListWatch{ListWithContextFunc: spec.List, WatchFuncWithContext: spec.Watch}, watches: &i.watches}
	indexers := spec.Indexers
	if indexers == nil {
		indexers = cache.Indexers{}
	}
	// No resync: whoever needs everything again reads it live.
	i.inf = cache.NewSharedIndexInformer(lw, &metav1.PartialObjectMetadata{}, 0, indexers)
	if spec.Transform != nil {
		_ = i.inf.SetTransform(spec.Transform)
	}
	if spec.Handler != nil {
		_, _ = i.inf.AddEventHandler(spec.Handler)
	}
	go func() {
		defer close(i.done)
		i.inf.RunWithContext(ictx)
	}()
	return i
}

// stop ends the informer and waits until it has.
func (i *Informer) stop() {
	i.cancel()
	<-i.done
}

// HasSynced reports whether the informer has listed its objects once.
func (i *Informer) HasSynced() bool { return i.inf.HasSynced() }

// Watching reports whether the informer has a watch open: only then does
// its store follow the API server.
func (i *Informer) Watching() bool {
	_, open, _ := i.watches.state()
	return open
}

// WatchGeneration is how many watches the informer has opened, and whether
// one is open now. The same generation, open, at two moments means one
// watch was open all along: every change the API server made to its
// objects in between reached the informer, in order (a watch that ended,
// a relist, a watch opened again each count).
func (i *Informer) WatchGeneration() (gen uint64, open bool) {
	gen, open, _ = i.watches.state()
	return gen, open
}

// WaitWatching waits until the informer has a watch open, or ctx ends; it
// reports whether one is open.
func (i *Informer) WaitWatching(ctx context.Context) bool {
	for {
		_, open, changed := i.watches.state()
		if open {
			return true
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return false
		}
	}
}

// Indexer is the informer's store and its indexes.
func (i *Informer) Indexer() cache.Indexer { return i.inf.GetIndexer() }

// Set runs one informer per key of those it was last told to run.
type Set[K comparable] struct {
	spec func(K) Spec
	// changed, if set, hears each informer started (true) or stopped (false).
	changed func(k K, started bool)

	mu      sync.Mutex
	running map[K]*Informer
	// closed is set by Stop; a late Sync (a config applied while stopping)
	// must not start informers nobody will stop.
	closed bool
}

// NewSet returns a Set whose informer of key k runs spec(k); changed, if
// set, hears each informer started and stopped.
func NewSet[K comparable](spec func(K) Spec, changed func(k K, started bool)) *Set[K] {
	return &Set[K]{spec: spec, changed: changed, running: map[K]*Informer{}}
}

// Sync runs exactly the informers of keys: it stops the others (waiting for
// each), then starts those not running. After Stop it does nothing.
func (s *Set[K]) Sync(ctx context.Context, keys []K) {
	need := make(map[K]bool, len(keys))
	for _, k := range keys {
		need[k] = true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	for k, i := range s.running {
		if !need[k] {
			i.stop()
			delete(s.running, k)
			s.tell(k, false)
		}
	}
	for k := range need {
		if _, ok := s.running[k]; !ok {
			s.running[k] = start(ctx, s.spec(k))
			s.tell(k, true)
		}
	}
}

func (s *Set[K]) tell(k K, started bool) {
	if s.changed != nil {
		s.changed(k, started)
	}
}

// Get returns the informer of k, nil when none runs.
func (s *Set[K]) Get(k K) *Informer {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.running[k]
}

// HasSynced reports whether every running informer has listed its objects
// once. An informer of a resource the API server does not serve never does.
func (s *Set[K]) HasSynced() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, i := range s.running {
		if !i.HasSynced() {
			return false
		}
	}
	return true
}

// WaitForSync waits until every informer running now has listed its
// objects once, or ctx ends; it reports whether all have. It does not poll
// (client-go's WaitForCacheSync steps 100 ms, a third of a start once).
func (s *Set[K]) WaitForSync(ctx context.Context) bool {
	s.mu.Lock()
	checkers := make([]cache.DoneChecker, 0, len(s.running))
	for _, i := range s.running {
		checkers = append(checkers, i.inf.HasSyncedChecker())
	}
	s.mu.Unlock()
	return cache.WaitFor(ctx, "", checkers...)
}

// WaitForSyncOf waits until the informers of keys have listed their
// objects once, or ctx ends; it reports whether all have. A key with no
// informer running counts as not synced: a Set shared by several users
// (triggers.Watches) lets each wait for its own informers only.
func (s *Set[K]) WaitForSyncOf(ctx context.Context, keys []K) bool {
	s.mu.Lock()
	checkers := make([]cache.DoneChecker, 0, len(keys))
	missing := false
	for _, k := range keys {
		if i := s.running[k]; i != nil {
			checkers = append(checkers, i.inf.HasSyncedChecker())
		} else {
			missing = true
		}
	}
	s.mu.Unlock()
	return cache.WaitFor(ctx, "", checkers...) && !missing
}

// Stop stops every informer, waiting for each; the Set starts none again.
func (s *Set[K]) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for k, i := range s.running {
		i.stop()
		delete(s.running, k)
	}
}

// countedListWatch is a ListWatch that counts its open watches, and that
// asks the reflector for a plain LIST then a watch rather than a watch-list
// stream (watchlist.DoesClientNotSupportWatchListSemantics): in that mode a
// failed watch (connection refused, 429) backs off for up to a minute
// without heeding the informer's stop, and a stop waits for its informers;
// and the end of a LIST is when the store holds the API server's state
// again, which a stream's initial events do not tell from outside.
type countedListWatch struct {
	*cache.ListWatch
	watches *watches
}

func (lw *countedListWatch) IsWatchListSemanticsUnSupported() bool { return true }

func (lw *countedListWatch) WatchWithContext(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	w, err := lw.ListWatch.WatchWithContext(ctx, o)
	if err != nil {
		return nil, err
	}
	lw.watches.add(1)
	return &countedWatch{Interface: w, watches: lw.watches}, nil
}

// countedWatch gives back its count when the reflector stops it, which it
// does whenever the watch ends (closed by the server, an error, a stop).
type countedWatch struct {
	watch.Interface
	watches *watches
	once    sync.Once
}

func (w *countedWatch) Stop() {
	w.once.Do(func() { w.watches.add(-1) })
	w.Interface.Stop()
}

// watches counts an informer's open watches and the watches it opened;
// changed is closed (and replaced) at each change, for those waiting.
type watches struct {
	mu      sync.Mutex
	open    int
	gen     uint64
	changed chan struct{}
}

// add counts a watch opened (1) or ended (-1).
func (w *watches) add(n int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.open += n
	if n > 0 {
		w.gen++
	}
	close(w.changed)
	w.changed = make(chan struct{})
}

func (w *watches) state() (gen uint64, open bool, changed <-chan struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.gen, w.open > 0, w.changed
}
