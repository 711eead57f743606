package leader

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

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
