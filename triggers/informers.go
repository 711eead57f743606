package triggers

import (
	"context"
	"sync"

	"github.com/rs/zerolog"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/triggers/observe"
)

type runningInformer struct {
	cancel context.CancelFunc
	done   chan struct{}
	// synced is done once the informer has listed its resource: a channel,
	// so a wait for it ends at once (client-go's WaitForCacheSync polls
	// every 100 ms, which was a third of a start-up's time).
	synced cache.DoneChecker
}

// informerSet runs one metadata-only informer per (GVR, namespace, label
// selector) that the config's triggers use; a selector informer watches with
// its selector, so objects outside it cost nothing. A second set runs one per
// values source, watching that one object by name (a field selector, which
// RBAC resourceNames can allow) and only its metadata: a Secret's content
// never sits in an informer cache. Informers are hints:
// their events only enqueue keys, and their caches are never read to decide
// anything. An object that stops matching a selector reaches its informer
// as a deletion.
type informerSet struct {
	client metadata.Interface
	// keys are the informers a config needs.
	keys    func(cfg *config.Config) []observe.ListKey
	onEvent func(k observe.ListKey, namespace, name string)
	log     zerolog.Logger

	mu      sync.Mutex
	running map[observe.ListKey]*runningInformer
	// closed is set by stopAll; a late sync (a config applied while
	// stopping) must not start informers nobody will stop.
	closed bool
}

func newInformerSet(client metadata.Interface, keys func(*config.Config) []observe.ListKey, onEvent func(k observe.ListKey, namespace, name string), log zerolog.Logger) *informerSet {
	return &informerSet{client: client, keys: keys, onEvent: onEvent, log: log, running: map[observe.ListKey]*runningInformer{}}
}

// triggerInformerKeys are the informers of cfg's triggers.
func triggerInformerKeys(cfg *config.Config) []observe.ListKey {
	var out []observe.ListKey
	for _, spec := range cfg.Specs {
		out = append(out, observe.KeysFor(cfg, spec.Trigger)...)
	}
	return out
}

// sync starts the informers cfg needs and stops those it no longer needs.
func (s *informerSet) sync(ctx context.Context, cfg *config.Config) {
	need := map[observe.ListKey]bool{}
	for _, k := range s.keys(cfg) {
		need[k] = true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	for k, ri := range s.running {
		if !need[k] {
			ri.cancel()
			<-ri.done
			delete(s.running, k)
			s.log.Info().Str("resource", k.GVR.String()).Str("namespace", k.Namespace).Str("selector", k.Selector).Str("name", k.Name).Msg("informer stopped")
		}
	}
	for k := range need {
		if _, ok := s.running[k]; ok {
			continue
		}
		s.running[k] = s.start(ctx, k)
		s.log.Info().Str("resource", k.GVR.String()).Str("namespace", k.Namespace).Str("selector", k.Selector).Str("name", k.Name).Msg("informer started")
	}
}

func (s *informerSet) start(ctx context.Context, k observe.ListKey) *runningInformer {
	ictx, cancel := context.WithCancel(ctx)
	// No resync: the periodic pass re-reads everything live anyway.
	var tweak metadatainformer.TweakListOptionsFunc
	switch {
	case k.Name != "":
		tweak = func(o *metav1.ListOptions) { o.FieldSelector = "metadata.name=" + k.Name }
	case k.Selector != "":
		tweak = func(o *metav1.ListOptions) { o.LabelSelector = k.Selector }
	}
	inf := cache.NewSharedIndexInformer(listThenWatch(s.client, k, tweak), &metav1.PartialObjectMetadata{}, 0, cache.Indexers{})
	// Only names, labels and versions are used: annotations (a Secret's
	// last-applied-configuration holds its data) and managed fields are
	// not kept in the cache.
	_ = inf.SetTransform(func(obj interface{}) (interface{}, error) {
		if m, ok := obj.(*metav1.PartialObjectMetadata); ok {
			m.Annotations, m.ManagedFields = nil, nil
		}
		return obj, nil
	})
	emit := func(obj interface{}) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		m, ok := obj.(*metav1.PartialObjectMetadata)
		if !ok {
			return
		}
		s.onEvent(k, m.Namespace, m.Name)
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj interface{}, isInInitialList bool) {
			// The initial list names every existing trigger; the pass that
			// runs at start (or the reconcile a config change queues) has
			// read them live already. Queuing them all again would put a
			// thousand full reconciles ahead of the first real event.
			// A values source's informer (watching one object by name) is
			// the exception: it starts with a config that references the
			// object, and the object may have changed between the
			// reconcile that read it and this first list.
			if !isInInitialList || k.Name != "" {
				emit(obj)
			}
		},
		UpdateFunc: func(oldObj, newObj interface{}) {
			// Most updates of a Deployment are status changes; only label
			// changes can change what autox wants. The periodic pass covers
			// anything an event filter could miss.
			o, ok1 := oldObj.(*metav1.PartialObjectMetadata)
			n, ok2 := newObj.(*metav1.PartialObjectMetadata)
			if ok1 && ok2 && k.Name != "" && o.ResourceVersion == n.ResourceVersion {
				return // a values source: any write may change its content; a relist does not
			}
			if ok1 && ok2 && k.Name == "" && labelsEqual(o.Labels, n.Labels) && (o.DeletionTimestamp == nil) == (n.DeletionTimestamp == nil) {
				return
			}
			emit(newObj)
		},
		DeleteFunc: emit,
	})
	done := make(chan struct{})
	go func() {
		defer close(done)
		inf.RunWithContext(ictx)
	}()
	return &runningInformer{cancel: cancel, done: done, synced: inf.HasSyncedChecker()}
}

// listThenWatch lists and watches the metadata of k's objects, as
// metadatainformer does, but opts out of client-go's watch-list mode (a watch
// that streams the initial objects, on by default since client-go 0.35): in
// that mode a failed watch (connection refused, 429) backs off for up to a
// minute (0.8s doubling to 30s, plus as much jitter) without heeding the
// informer's stop, and a term's end or a stop waits for its informers
// (stopAll). Listed then watched, the reflector's backoff ends with the stop.
func listThenWatch(client metadata.Interface, k observe.ListKey, tweak metadatainformer.TweakListOptionsFunc) cache.ListerWatcher {
	res := client.Resource(k.GVR).Namespace(k.Namespace)
	options := func(o metav1.ListOptions) metav1.ListOptions {
		if tweak != nil {
			tweak(&o)
		}
		return o
	}
	return noWatchList{&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return res.List(ctx, options(o))
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return res.Watch(ctx, options(o))
		},
	}}
}

// noWatchList tells the reflector (watchlist.DoesClientNotSupportWatchListSemantics)
// to list, then watch.
type noWatchList struct{ *cache.ListWatch }

func (noWatchList) IsWatchListSemanticsUnSupported() bool { return true }

// hasSynced reports whether every running informer has listed its resource
// once. An informer of a resource the API server does not serve never does.
func (s *informerSet) hasSynced() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ri := range s.running {
		select {
		case <-ri.synced.Done():
		default:
			return false
		}
	}
	return true
}

// waitForSync waits until every informer running now has listed its
// resource once, or ctx ends; it reports whether all have.
func (s *informerSet) waitForSync(ctx context.Context) bool {
	s.mu.Lock()
	checkers := make([]cache.DoneChecker, 0, len(s.running))
	for _, ri := range s.running {
		checkers = append(checkers, ri.synced)
	}
	s.mu.Unlock()
	return cache.WaitFor(ctx, "", checkers...)
}

func (s *informerSet) stopAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for k, ri := range s.running {
		ri.cancel()
		<-ri.done
		delete(s.running, k)
	}
}

func labelsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
