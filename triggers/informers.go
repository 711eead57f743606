package triggers

import (
	"context"
	"maps"

	"github.com/rs/zerolog"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/internal/metainformer"
	"github.com/autox-dev/autox/triggers/observe"
)

// informerSet runs one metadata-only informer per (GVR, namespace, label
// selector) that the config's triggers use; a selector informer watches with
// its selector, so objects outside it cost nothing. A second set runs one per
// values source, watching that one object by name (a field selector, which
// RBAC resourceNames can allow) and only its metadata: a Secret's content
// never sits in an informer cache. Informers are hints: their events only
// enqueue keys, and their caches are never read to decide anything. An
// object that stops matching a selector reaches its informer as a deletion.
// They list, then watch, without resync (internal/metainformer).
type informerSet struct {
	client metadata.Interface
	// keys are the informers a config needs.
	keys    func(cfg *config.Config) []observe.ListKey
	onEvent func(k observe.ListKey, namespace, name string)
	set     *metainformer.Set[observe.ListKey]
}

func newInformerSet(client metadata.Interface, keys func(*config.Config) []observe.ListKey, onEvent func(k observe.ListKey, namespace, name string), log zerolog.Logger) *informerSet {
	s := &informerSet{client: client, keys: keys, onEvent: onEvent}
	s.set = metainformer.NewSet(s.spec, func(k observe.ListKey, started bool) {
		msg := "informer stopped"
		if started {
			msg = "informer started"
		}
		log.Info().Str("resource", k.GVR.String()).Str("namespace", k.Namespace).Str("selector", k.Selector).Str("name", k.Name).Msg(msg)
	})
	return s
}

// watchSet is what a controller runs of its informers: a set of its own
// (informerSet), or its share of the replica's (informerShare).
type watchSet interface {
	// sync runs the informers cfg needs, and no longer those it does not.
	sync(ctx context.Context, cfg *config.Config)
	hasSynced() bool
	waitForSync(ctx context.Context) bool
	stopAll()
	// informer returns the running informer of k, or nil.
	informer(k observe.ListKey) *metainformer.Informer
}

// triggerInformerKeys are the informers of cfg's triggers that the
// controller of shard sh needs (nil: every one).
func triggerInformerKeys(cfg *config.Config, sh *Shard) []observe.ListKey {
	var out []observe.ListKey
	for name, spec := range cfg.Specs {
		if sh.watchesSpec(cfg, name) {
			out = append(out, observe.KeysFor(cfg, spec.Trigger)...)
		}
	}
	return out
}

// sync starts the informers cfg needs and stops those it no longer needs.
func (s *informerSet) sync(ctx context.Context, cfg *config.Config) { s.set.Sync(ctx, s.keys(cfg)) }

// hasSynced reports whether every running informer has listed its resource
// once. An informer of a resource the API server does not serve never does.
func (s *informerSet) hasSynced() bool { return s.set.HasSynced() }

// waitForSync waits until every informer running now has listed its
// resource once, or ctx ends; it reports whether all have.
func (s *informerSet) waitForSync(ctx context.Context) bool { return s.set.WaitForSync(ctx) }

func (s *informerSet) stopAll() { s.set.Stop() }

func (s *informerSet) informer(k observe.ListKey) *metainformer.Informer { return s.set.Get(k) }

// spec is the informer of k: its objects' metadata, selected by name or
// by label selector, each event handed to onEvent.
func (s *informerSet) spec(k observe.ListKey) metainformer.Spec {
	res := s.client.Resource(k.GVR).Namespace(k.Namespace)
	options := func(o metav1.ListOptions) metav1.ListOptions {
		switch {
		case k.Name != "":
			o.FieldSelector = "metadata.name=" + k.Name
		case k.Selector != "":
			o.LabelSelector = k.Selector
		}
		return o
	}
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
	return metainformer.Spec{
		List: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return res.List(ctx, options(o))
		},
		Watch: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return res.Watch(ctx, options(o))
		},
		// Only names, labels and versions are used: annotations (a Secret's
		// last-applied-configuration holds its data) and managed fields are
		// not kept in the cache.
		Transform: func(obj interface{}) (interface{}, error) {
			if m, ok := obj.(*metav1.PartialObjectMetadata); ok {
				m.Annotations, m.ManagedFields = nil, nil
			}
			return obj, nil
		},
		Handler: cache.ResourceEventHandlerDetailedFuncs{
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
				if ok1 && ok2 && k.Name == "" && maps.Equal(o.Labels, n.Labels) && (o.DeletionTimestamp == nil) == (n.DeletionTimestamp == nil) {
					return
				}
				emit(newObj)
			},
			DeleteFunc: emit,
		},
	}
}
