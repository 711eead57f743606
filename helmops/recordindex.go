package helmops

import (
	"context"
	"sort"
	"strconv"

	"github.com/rs/zerolog"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"

	"github.com/autox-dev/autox/internal/format"
	"github.com/autox-dev/autox/internal/metainformer"
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
// and stops with it. With --shards above 1 one index serves every shard term
// of a replica (NewSharedRecordIndex): the shards' records share namespaces,
// so one copy is kept, not one per shard held.
type RecordIndex struct {
	meta   metadata.Interface
	gvr    schema.GroupVersionResource
	log    zerolog.Logger
	expect *expectations
	// pageSize is the page size of the informers' LISTs (0: one response).
	pageSize int64
	// spaces runs one informer per namespace (internal/metainformer).
	spaces *metainformer.Set[string]
}

// recordInformer is the informer of one namespace's records.
type recordInformer struct{ *metainformer.Informer }

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
	ix := NewSharedRecordIndex(m.meta, m.opts.StorageDriver, m.opts.ListPageSize, m.opts.Log)
	m.UseRecordIndex(ix)
	return ix
}

// NewSharedRecordIndex returns an index of the records of storageDriver
// (DriverSecret for "") read with meta, for the Managers of several terms at
// once (UseRecordIndex): with --shards above 1, one per replica instead of
// one per shard term, each a copy of the same records. The index only
// reads, so meta need not be a term's fenced client; what the Managers
// write reaches it through its expectations, whichever term wrote.
func NewSharedRecordIndex(meta metadata.Interface, storageDriver string, pageSize int64, log zerolog.Logger) *RecordIndex {
	ix := &RecordIndex{meta: meta, gvr: recordResource(storageDriver), log: log,
		expect: newExpectations(), pageSize: pageSize}
	ix.spaces = metainformer.NewSet(ix.spec, func(ns string, started bool) {
		msg := "index of release records stopped"
		if started {
			msg = "index of release records started"
		}
		ix.log.Info().Str("namespace", ns).Msg(msg)
	})
	return ix
}

// UseRecordIndex makes m read through ix (see NewSharedRecordIndex).
func (m *Manager) UseRecordIndex(ix *RecordIndex) { m.index.Store(ix) }

// Watch makes the index watch exactly these namespaces: informers start for
// new ones (they are used once synced) and stop for the others. After Stop
// it does nothing.
func (ix *RecordIndex) Watch(ctx context.Context, namespaces []string) {
	ix.spaces.Sync(ctx, namespaces)
}

// WaitForSync waits until every watched namespace has synced, or ctx ends;
// it reports whether all have.
func (ix *RecordIndex) WaitForSync(ctx context.Context) bool { return ix.spaces.WaitForSync(ctx) }

// Stop stops every informer; the Manager then reads live.
func (ix *RecordIndex) Stop() { ix.spaces.Stop() }

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
	i := ix.spaces.Get(namespace)
	if i == nil || !i.HasSynced() || !i.Watching() {
		return nil
	}
	return &recordInformer{i}
}

// spec is the informer of one namespace's records: their metadata, with
// the label owner=helm, indexed by release name, spec and object.
func (ix *RecordIndex) spec(namespace string) metainformer.Spec {
	client := ix.meta.Resource(ix.gvr).Namespace(namespace)
	return metainformer.Spec{
		List: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
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
		Watch: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = "owner=helm"
			return client.Watch(ctx, o)
		},
		Indexers: cache.Indexers{
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
		},
		Transform: slimRecord,
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj interface{}) { ix.expect.seen(namespace, obj, false) },
			UpdateFunc: func(_, obj interface{}) { ix.expect.seen(namespace, obj, false) },
			DeleteFunc: func(obj interface{}) { ix.expect.seen(namespace, obj, true) },
		},
	}
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
	objs, _ := ri.Indexer().ByIndex(byReleaseName, name)
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
	objs, _ := ri.Indexer().ByIndex(index, key)
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
	objs := ri.Indexer().List()
	out := make([]map[string]string, 0, len(objs))
	for _, o := range objs {
		if m, ok := o.(*metav1.PartialObjectMetadata); ok {
			out = append(out, m.Labels)
		}
	}
	return out
}
