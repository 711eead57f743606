package leader

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
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
	"k8s.io/client-go/tools/leaderelection/resourcelock"
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
}

func newLeaseCache(client kubernetes.Interface, namespace string) *leaseCache {
	f := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(namespace),
		informers.WithTransform(stripManagedFields))
	leases := f.Coordination().V1().Leases()
	return &leaseCache{factory: f, informer: leases.Informer(), lister: leases.Lister().Leases(namespace)}
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

// vouch trusts the cache while it holds the heartbeat Lease own renewed
// at since or later (since zero: present at all). c may be nil.
func (c *leaseCache) vouch(own string, since time.Time) {
	if c == nil {
		return
	}
	ok := false
	if c.informer.HasSynced() {
		l, err := c.lister.Get(own)
		ok = err == nil && l.Spec.RenewTime != nil && !l.Spec.RenewTime.Time.Before(since)
	}
	c.fresh.Store(ok)
}

// usable reports whether reads may come from the cache.
func (c *leaseCache) usable() bool {
	return c != nil && c.informer.HasSynced() && c.fresh.Load()
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

// leaseLock is client-go's Lease lock (resourcelock.LeaseLock, whose record
// it reads and writes the same way) with reads from the Lease informer
// while this process does not hold the Lease. Those reads only decide
// whether to try to take it, and taking it is an update conditional on the
// resourceVersion read: from a stale cache it fails with a Conflict and
// writes nothing. A stale read that shows an older record restarts
// client-go's wait for the Lease to expire, which only delays a takeover.
// Everything else reads live: a holder's renewal (its term is timed by
// live renewals, and a read naming another holder ends it at once), the
// read before a release, and the next read after any failed write, so a
// Conflict is followed by a fresh look rather than a retry from the same
// stale cache.
type leaseLock struct {
	client    coordinationv1client.LeasesGetter
	namespace string
	name      string
	identity  string
	cache     *leaseCache // nil: every read is live
	// idle (optional) is told when a read that could come from the cache
	// goes to the API server because the cache is not usable.
	idle func()

	mu sync.Mutex
	// lease is the Lease as last read or written; Update writes its
	// resourceVersion.
	lease *coordinationv1.Lease
	// live makes the next Get read live: a write failed since the last
	// live read.
	live bool
}

var _ resourcelock.Interface = (*leaseLock)(nil)

func (l *leaseLock) leases() coordinationv1client.LeaseInterface {
	return l.client.Leases(l.namespace)
}

// readsCache reports whether the next Get may read the cache: this process
// does not hold the Lease as it last knew it, and no write failed since
// its last live read.
func (l *leaseLock) readsCache() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cache == nil || l.live {
		return false
	}
	return l.lease == nil || l.lease.Spec.HolderIdentity == nil || *l.lease.Spec.HolderIdentity != l.identity
}

func (l *leaseLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	if l.readsCache() {
		if cached, ok := l.cache.get(l.name); ok {
			return l.keep(cached.DeepCopy(), false)
		}
		if l.idle != nil && !l.cache.usable() {
			l.idle()
		}
	}
	lease, err := l.leases().Get(ctx, l.name, metav1.GetOptions{})
	if err != nil {
		return nil, nil, err
	}
	return l.keep(lease, true)
}

// keep remembers lease as the one to update and returns its record.
func (l *leaseLock) keep(lease *coordinationv1.Lease, live bool) (*resourcelock.LeaderElectionRecord, []byte, error) {
	l.mu.Lock()
	l.lease = lease
	if live {
		l.live = false
	}
	l.mu.Unlock()
	rec := resourcelock.LeaseSpecToLeaderElectionRecord(&lease.Spec)
	raw, err := json.Marshal(*rec)
	if err != nil {
		return nil, nil, fmt.Errorf("cannot encode the record of Lease %s: %w", l.Describe(), err)
	}
	return rec, raw, nil
}

// wrote remembers the Lease a write returned, or after a failed write
// makes the next Get read live.
func (l *leaseLock) wrote(lease *coordinationv1.Lease, err error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		l.live = true
		return err
	}
	l.lease = lease
	return nil
}

func (l *leaseLock) Create(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: l.name, Namespace: l.namespace},
		Spec:       resourcelock.LeaderElectionRecordToLeaseSpec(&rec),
	}
	return l.wrote(l.leases().Create(ctx, lease, metav1.CreateOptions{}))
}

// errNoRead: client-go always reads before it updates.
var errNoRead = errors.New("lease not read yet: call Get or Create first")

func (l *leaseLock) Update(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	l.mu.Lock()
	if l.lease == nil {
		l.mu.Unlock()
		return errNoRead
	}
	lease := l.lease.DeepCopy()
	l.mu.Unlock()
	lease.Spec = resourcelock.LeaderElectionRecordToLeaseSpec(&rec)
	return l.wrote(l.leases().Update(ctx, lease, metav1.UpdateOptions{}))
}

func (l *leaseLock) RecordEvent(string) {}

func (l *leaseLock) Describe() string { return l.namespace + "/" + l.name }

func (l *leaseLock) Identity() string { return l.identity }
