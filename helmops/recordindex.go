package helmops

import (
	"context"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/rs/zerolog"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"

	"github.com/autox-dev/autox/internal/format"
)

// RecordIndex keeps the metadata of every Helm release record (labels and
// resourceVersion, never the payload) of the namespaces it watches, fed by
// one metadata informer per namespace on the storage driver's resource with
// the label owner=helm. A Manager with an index finds a spec's (or an
// object's) releases, their newest revisions and the names in use there
// instead of with label-selected LISTs, each of which makes the API server
// scan every record of the namespace; it then reads the newest record of
// each release by name (see indexedRelease). The quiet pass reads the
// records from it too.
//
// The index is a view that may lag the API server by its watch's delay. It
// is used only where that is safe (docs/design.md §3, "the record index"):
// every release it names is read live by name before anything is decided
// from it, and a record read whose resourceVersion is not the index's, or
// that is gone, sends that release to a live LIST; the releases this
// process wrote and the index has not shown yet are read live too
// (expectations); a namespace whose informer has not synced, or has no open
// watch (lost, or relisting), is read with live LISTs as without an index.
// What it says is absent is guarded by Helm at write time: an install's
// first write creates revision 1's record only if none exists.
//
// One index serves one leadership term: it reads with the term's clients
// and stops with it.
type RecordIndex struct {
	meta   metadata.Interface
	gvr    schema.GroupVersionResource
	log    zerolog.Logger
	expect *expectations
	// pageSize is the page size of the informers' LISTs (0: one response).
	pageSize int64

	mu     sync.Mutex
	spaces map[string]*recordInformer
	closed bool
}

// recordInformer is the informer of one namespace's records.
type recordInformer struct {
	inf    cache.SharedIndexInformer
	cancel context.CancelFunc
	done   chan struct{}
	// watching counts the informer's open watches (0 or 1): none while it
	// lists, relists or waits to watch again, when its store may miss
	// changes the API server has.
	watching atomic.Int32
}

// Indexer names of a recordInformer's store.
const (
	byReleaseName = "name"
	bySpecLabel   = "spec"
	// byObject keys the records of a selector spec's releases by the spec
	// and the trigger object they name (recordObjectKey): a reconcile of one
	// object finds its releases without going through the spec's others
	// (at 5,000 objects, each reconcile went through 5,000 names).
	byObject = "object"
)

// recordObjectKey is the byObject key of labels spec, object namespace and object
// (as the object label spells it).
func recordObjectKey(spec, namespace, object string) string {
	return spec + "\x00" + namespace + "\x00" + object
}

// NewRecordIndex returns an index of the Manager's storage driver's records
// and makes the Manager read through it. It watches nothing until Watch.
func (m *Manager) NewRecordIndex() *RecordIndex {
	ix := &RecordIndex{meta: m.meta, gvr: recordResource(m.opts.StorageDriver), log: m.opts.Log,
		expect: newExpectations(), spaces: map[string]*recordInformer{}, pageSize: m.opts.ListPageSize}
	m.index.Store(ix)
	return ix
}

// Watch makes the index watch exactly these namespaces: informers start for
// new ones (they are used once synced) and stop for the others. After Stop
// it does nothing.
func (ix *RecordIndex) Watch(ctx context.Context, namespaces []string) {
	need := make(map[string]bool, len(namespaces))
	for _, ns := range namespaces {
		need[ns] = true
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.closed {
		return
	}
	for ns, ri := range ix.spaces {
		if !need[ns] {
			ri.stop()
			delete(ix.spaces, ns)
			ix.log.Info().Str("namespace", ns).Msg("index of release records stopped")
		}
	}
	for ns := range need {
		if ix.spaces[ns] == nil {
			ix.spaces[ns] = ix.start(ctx, ns)
			ix.log.Info().Str("namespace", ns).Msg("index of release records started")
		}
	}
}

// WaitForSync waits until every watched namespace has synced, or ctx ends;
// it reports whether all have.
func (ix *RecordIndex) WaitForSync(ctx context.Context) bool {
	ix.mu.Lock()
	synced := make([]cache.DoneChecker, 0, len(ix.spaces))
	for _, ri := range ix.spaces {
		synced = append(synced, ri.inf.HasSyncedChecker())
	}
	ix.mu.Unlock()
	// Without polling (WaitForCacheSync's 100 ms steps delayed every start).
	return cache.WaitFor(ctx, "", synced...)
}

// Stop stops every informer; the Manager then reads live.
func (ix *RecordIndex) Stop() {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.closed = true
	for ns, ri := range ix.spaces {
		ri.stop()
		delete(ix.spaces, ns)
	}
}

func (ri *recordInformer) stop() {
	ri.cancel()
	<-ri.done
}

// expectations are the index's record of this process's writes; nil (no
// writes tracked) without an index.
func (ix *RecordIndex) expectations() *expectations {
	if ix == nil {
		return nil
	}
	return ix.expect
}

// usable returns the informer of namespace when its store can be read: it
// has synced and has a watch open. nil means: read live.
func (ix *RecordIndex) usable(namespace string) *recordInformer {
	if ix == nil {
		return nil
	}
	ix.mu.Lock()
	ri := ix.spaces[namespace]
	ix.mu.Unlock()
	if ri == nil || !ri.inf.HasSynced() || ri.watching.Load() == 0 {
		return nil
	}
	return ri
}

func (ix *RecordIndex) start(ctx context.Context, namespace string) *recordInformer {
	ictx, cancel := context.WithCancel(ctx)
	ri := &recordInformer{cancel: cancel, done: make(chan struct{})}
	client := ix.meta.Resource(ix.gvr).Namespace(namespace)
	lw := &countedListWatch{ListWatch: &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = "owner=helm"
			// The reflector pages with its own size; ours, kept on every
			// page of one listing, keeps its continuations valid.
			o.Limit = ix.pageSize
			if ix.pageSize > 0 && o.ResourceVersion == "0" {
				// The reflector's first LIST asks for resourceVersion 0,
				// which the API server answers whole from its watch cache
				// whatever the limit: paged, it is a consistent read (the
				// LIST BENCHMARKS.md measured), or it is not paged at all.
				o.ResourceVersion = ""
			}
			return client.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = "owner=helm"
			return client.Watch(ctx, o)
		},
	}, watching: &ri.watching}
	ri.inf = cache.NewSharedIndexInformer(lw, &metav1.PartialObjectMetadata{}, 0, cache.Indexers{
		byReleaseName: func(obj interface{}) ([]string, error) {
			return []string{obj.(*metav1.PartialObjectMetadata).Labels["name"]}, nil
		},
		bySpecLabel: func(obj interface{}) ([]string, error) {
			if s := obj.(*metav1.PartialObjectMetadata).Labels[format.LabelSpec]; s != "" {
				return []string{s}, nil
			}
			return nil, nil
		},
		byObject: func(obj interface{}) ([]string, error) {
			l := obj.(*metav1.PartialObjectMetadata).Labels
			if l[format.LabelSpec] == "" || l[format.LabelObject] == "" {
				return nil, nil
			}
			return []string{recordObjectKey(l[format.LabelSpec], l[format.LabelObjectNamespace], l[format.LabelObject])}, nil
		},
	})
	_ = ri.inf.SetTransform(slimRecord)
	_, _ = ri.inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { ix.expect.seen(namespace, obj, false) },
		UpdateFunc: func(_, obj interface{}) { ix.expect.seen(namespace, obj, false) },
		DeleteFunc: func(obj interface{}) { ix.expect.seen(namespace, obj, true) },
	})
	go func() {
		defer close(ri.done)
		ri.inf.RunWithContext(ictx)
	}()
	return ri
}

// slimRecord keeps of a record's metadata what the index reads: name,
// namespace, resourceVersion and labels. Annotations and managed fields
// would be most of the memory of 20,000 records.
func slimRecord(obj interface{}) (interface{}, error) {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return obj, nil
	}
	return &metav1.PartialObjectMetadata{TypeMeta: m.TypeMeta, ObjectMeta: metav1.ObjectMeta{
		Name: m.Name, Namespace: m.Namespace, ResourceVersion: m.ResourceVersion, Labels: m.Labels}}, nil
}

// countedListWatch is a ListWatch that counts its open watches, and that
// asks the reflector for a plain LIST rather than a watch-list stream: the
// end of a LIST is when the store holds the API server's state again, which
// a stream's initial events do not tell from outside.
type countedListWatch struct {
	*cache.ListWatch
	watching *atomic.Int32
}

func (lw *countedListWatch) IsWatchListSemanticsUnSupported() bool { return true }

func (lw *countedListWatch) WatchWithContext(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	w, err := lw.ListWatch.WatchWithContext(ctx, o)
	if err != nil {
		return nil, err
	}
	lw.watching.Add(1)
	return &countedWatch{Interface: w, watching: lw.watching}, nil
}

// countedWatch gives back its count when the reflector stops it, which it
// does whenever the watch ends (closed by the server, an error, a stop).
type countedWatch struct {
	watch.Interface
	watching *atomic.Int32
	once     sync.Once
}

func (w *countedWatch) Stop() {
	w.once.Do(func() { w.watching.Add(-1) })
	w.Interface.Stop()
}

// indexedRecord is one record's metadata as the index holds it.
type indexedRecord struct {
	key             string // the record's object name
	revision        int
	resourceVersion string
	labels          map[string]string
}

func toIndexed(obj interface{}) (indexedRecord, bool) {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return indexedRecord{}, false
	}
	rev, err := strconv.Atoi(m.Labels["version"])
	if err != nil || m.Labels["name"] == "" {
		return indexedRecord{}, false // not a Helm release record after all
	}
	return indexedRecord{key: m.Name, revision: rev, resourceVersion: m.ResourceVersion, labels: m.Labels}, true
}

// records returns the records of release name, oldest revision first.
func (ri *recordInformer) records(name string) []indexedRecord {
	objs, _ := ri.inf.GetIndexer().ByIndex(byReleaseName, name)
	out := make([]indexedRecord, 0, len(objs))
	for _, o := range objs {
		if r, ok := toIndexed(o); ok {
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].revision < out[j].revision })
	return out
}

// namesWith returns the releases with a record of any revision that
// carries every label of match that the index keys by: the spec label, and
// with the object labels the spec and object. It is a superset of the
// releases match names (the newest revision decides).
func (ri *recordInformer) namesWith(match map[string]string) []string {
	index, key := bySpecLabel, match[format.LabelSpec]
	if obj, ok := match[format.LabelObject]; ok {
		index, key = byObject, recordObjectKey(key, match[format.LabelObjectNamespace], obj)
	}
	objs, _ := ri.inf.GetIndexer().ByIndex(index, key)
	seen := map[string]bool{}
	var out []string
	for _, o := range objs {
		if r, ok := toIndexed(o); ok && !seen[r.labels["name"]] {
			seen[r.labels["name"]] = true
			out = append(out, r.labels["name"])
		}
	}
	return out
}

// all returns the labels of every record.
func (ri *recordInformer) all() []map[string]string {
	objs := ri.inf.GetStore().List()
	out := make([]map[string]string, 0, len(objs))
	for _, o := range objs {
		if m, ok := o.(*metav1.PartialObjectMetadata); ok {
			out = append(out, m.Labels)
		}
	}
	return out
}
