package leader

import (
	"context"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// shardsGuard keeps a replica running without shards (--shards 1) from
// taking the one Lease while a replica of a sharded run still holds a shard
// Lease: during a rolling change from --shards N to 1 the old pods write
// their shards' releases until they stop, and the new one would write every
// release beside them. It reads the shard Leases <name>-shard-0, -1, … up to
// the first that does not exist (a sharded run takes them all, from 0), with
// get alone, which the base Role grants. A shard Lease is live while its
// holder renewed it less than the lease duration ago as this process saw it
// (the renewal it last saw change, timed by its own clock, as client-go
// times a leader), so clock skew does not matter; one seen for the first
// time counts as live, so a stale Lease delays the first term by at most
// the lease duration. It is asked only before taking the Lease, never
// before a renewal: without shard Leases it costs one GET per attempt.
type shardsGuard struct {
	client    kubernetes.Interface
	namespace string
	base      string
	duration  time.Duration

	mu       sync.Mutex
	observed map[string]observedBeat
}

func newShardsGuard(opts Options) *shardsGuard {
	return &shardsGuard{client: opts.Client, namespace: opts.Namespace, base: opts.Name, duration: opts.LeaseDuration,
		observed: map[string]observedBeat{}}
}

// maxShardLeases bounds the scan: --shards is at most 256.
const maxShardLeases = 256

// check returns an error naming a live shard Lease, or the read that
// failed (which refuses the Lease too: it cannot be told free).
func (g *shardsGuard) check(ctx context.Context) error {
	leases := g.client.CoordinationV1().Leases(g.namespace)
	now := time.Now()
	g.mu.Lock()
	defer g.mu.Unlock()
	for i := 0; i < maxShardLeases; i++ {
		name := ShardLeaseName(g.base, i)
		l, err := leases.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("cannot read the shard Lease %s/%s before taking the Lease of a single leader: %w", g.namespace, name, err)
		}
		if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" || l.Spec.RenewTime == nil {
			delete(g.observed, name)
			continue
		}
		o, ok := g.observed[name]
		if !ok || !o.renew.Equal(l.Spec.RenewTime.Time) {
			o = observedBeat{renew: l.Spec.RenewTime.Time, at: now}
			g.observed[name] = o
		}
		if now.Sub(o.at) <= g.duration {
			return fmt.Errorf("%w: shard Lease %s/%s is held by %s", errShardsLive, g.namespace, name, *l.Spec.HolderIdentity)
		}
	}
	return nil
}

// errShardsLive refuses the single Lease while a shard Lease is held.
var errShardsLive = fmt.Errorf("not taking the Lease: a replica running with --shards above 1 still writes; stop every replica before changing --shards")
