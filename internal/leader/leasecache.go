package leader

import (
	"context"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	coordinationlisters "k8s.io/client-go/listers/coordination/v1"
	"k8s.io/client-go/tools/cache"
)

// leaseCache is one informer of the Leases of the election namespace,
// shared by a replica's shard campaigns and its heartbeats (RunShards): a
// candidate polling a shard Lease it does not hold, and the count of the
// replicas, read it instead of the API server, so standing by costs no
// request. It watches the whole namespace, not only Leases labelled for
// this election: the Leases client-go and older autox versions made carry
// no label, and the single Lease of a replica without shards must be seen
// whichever version made it. Until it has synced every read is live.
//
// A synced informer whose watch is broken stands still without saying so,
// and a cache that stood still would make replicas look stopped and a
// single leader's Lease look expired. So the cache is used only while it
// shows this replica's own heartbeat as renewed at least as recently as
// the write before the last one (vouch, each time the replicas are
// counted): it is then at most about two retry periods behind, and when
// it falls further behind every read is live again.
type leaseCache struct {
	factory  informers.SharedInformerFactory
	informer cache.SharedIndexInformer
	lister   coordinationlisters.LeaseNamespaceLister
	fresh    atomic.Bool
	// until is when the last vouch lapses (UnixNano; 0: never set): a
	// count that stops coming (a heartbeat write that hangs) stops the
	// cache being trusted too.
	until atomic.Int64
	now   func() time.Time
}

func newLeaseCache(client kubernetes.Interface, namespace string) *leaseCache {
	f := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(namespace),
		informers.WithTransform(stripManagedFields))
	leases := f.Coordination().V1().Leases()
	return &leaseCache{factory: f, informer: leases.Informer(), lister: leases.Lister().Leases(namespace), now: time.Now}
}

// stripManagedFields keeps the cache small; an update without them keeps
// the server's.
func stripManagedFields(obj interface{}) (interface{}, error) {
	if l, ok := obj.(*coordinationv1.Lease); ok {
		l.ManagedFields = nil
	}
	return obj, nil
}

// run watches until ctx ends, and returns once the informer has stopped.
func (c *leaseCache) run(ctx context.Context) {
	c.factory.Start(ctx.Done())
	<-ctx.Done()
	c.factory.Shutdown()
}

// vouch trusts the cache, for the next window, while it holds the
// heartbeat Lease own renewed at since or later and no more than window
// ago by this process's clock (since zero: within window). The clock bound
// keeps a cache that stopped while this replica's heartbeat writes fail
// from vouching for itself with an old renewal. c may be nil.
func (c *leaseCache) vouch(own string, since time.Time, window time.Duration) {
	if c == nil {
		return
	}
	now := c.now()
	if floor := now.Add(-window); floor.After(since) {
		since = floor
	}
	ok := false
	if c.informer.HasSynced() {
		l, err := c.lister.Get(own)
		ok = err == nil && l.Spec.RenewTime != nil && !l.Spec.RenewTime.Time.Before(since)
	}
	c.fresh.Store(ok)
	c.until.Store(now.Add(window).UnixNano())
}

// usable reports whether reads may come from the cache: synced, and the
// last vouch found it fresh and has not lapsed.
func (c *leaseCache) usable() bool {
	return c != nil && c.informer.HasSynced() && c.fresh.Load() && c.now().UnixNano() <= c.until.Load()
}

// get returns the cached Lease name; ok is false while the cache is not
// usable or has no such Lease (the caller reads live). The Lease is the
// cache's: copy it before changing it. c may be nil.
func (c *leaseCache) get(name string) (l *coordinationv1.Lease, ok bool) {
	if !c.usable() {
		return nil, false
	}
	l, err := c.lister.Get(name)
	return l, err == nil
}

// list returns the cached Leases sel selects; ok is false while the cache
// is not usable. c may be nil.
func (c *leaseCache) list(sel labels.Selector) (ls []*coordinationv1.Lease, ok bool) {
	if !c.usable() {
		return nil, false
	}
	ls, err := c.lister.List(sel)
	return ls, err == nil
}

// lookup is get for a Lease that may be absent: a usable cache without it
// answers NotFound. Otherwise it reads live.
func (c *leaseCache) lookup(ctx context.Context, leases coordinationv1client.LeaseInterface, name string) (*coordinationv1.Lease, error) {
	if c.usable() {
		l, err := c.lister.Get(name)
		if err == nil || apierrors.IsNotFound(err) {
			return l, err
		}
	}
	return leases.Get(ctx, name, metav1.GetOptions{})
}
