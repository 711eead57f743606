package leader

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"

	"github.com/autox-dev/autox/internal/format"
)

// LabelReplicaOf marks the heartbeat Leases of the replicas that share the
// shard Leases of one election (its value: the election's Lease name, in
// label form).
const LabelReplicaOf = "autox.dev/replica-of"

// annotationShards on a heartbeat Lease is the --shards its replica runs
// with: a replica takes no shard while a live one runs with another count.
const annotationShards = "autox.dev/shards"

// staleHeartbeat is how long after its last renewal a heartbeat Lease of a
// replica that never deleted it (killed) is removed by the others: far past
// any clock skew, so a live replica's heartbeat is never removed.
const staleHeartbeat = time.Hour

// members keeps this replica's heartbeat Lease renewed and counts the live
// replicas from theirs. A heartbeat is live while it was renewed less than
// the lease duration ago as this process observed it (the renewal it last
// saw change, timed by this process's clock, as client-go times a leader's
// Lease), so clock skew between replicas does not matter.
type members struct {
	client    kubernetes.Interface
	namespace string
	base      string // the election's Lease name
	id        string
	duration  time.Duration
	period    time.Duration
	shards    string // this replica's --shards
	// cache serves the count's reads (nil or unsynced: live).
	cache *leaseCache

	// own is this replica's heartbeat as its last write returned: the
	// next renewal updates it without reading it first.
	own *coordinationv1.Lease
	// wrote are the renewal times of this replica's last two heartbeat
	// writes (as the API server stored them), newest last: the cache
	// must show the older one to be trusted (leaseCache.vouch).
	wrote [2]time.Time

	mu       sync.Mutex
	observed map[string]observedBeat
	live     int
	counted  int // how many times the replicas were counted
	// foreign names what keeps this replica from taking shards: a live
	// replica running with another --shards, or a holder of the one
	// Lease of --shards 1 ("" for nothing). Both would write releases
	// this replica's shards hold too.
	foreign string
}

type observedBeat struct {
	renew time.Time // as written by its replica
	at    time.Time // when this process saw it change
}

func newMembers(opts Options, id string, shards int) *members {
	return &members{client: opts.Client, namespace: opts.Namespace, base: opts.Name, id: id, shards: fmt.Sprint(shards),
		duration: opts.LeaseDuration, period: opts.RetryPeriod, cache: opts.cache, observed: map[string]observedBeat{}}
}

// heartbeatName is the Lease name of replica id's heartbeat.
func heartbeatName(base, id string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(id) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') || r == '-' || r == '.' {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	name := base + "-replica-" + strings.Trim(b.String(), "-.")
	if len(name) > 253 {
		name = name[:253]
	}
	return strings.TrimRight(name, "-.")
}

// Live is the number of live replicas last counted (this one included).
func (m *members) Live() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return max(m.live, 1)
}

// settled reports whether the replicas were counted twice, a period
// apart: the others' heartbeats are known before any shard is taken, so a
// replica starting with the others does not take every shard at first.
func (m *members) settled() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.counted >= 2 && m.foreign == ""
}

// blocked is what keeps this replica from taking shards, "" for nothing.
func (m *members) blocked() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.foreign
}

// run beats and counts until ctx ends, then deletes this replica's
// heartbeat so the others count one less at once.
func (m *members) run(ctx context.Context, log func(error)) {
	name := heartbeatName(m.base, m.id)
	t := time.NewTicker(m.period)
	defer t.Stop()
	for {
		if err := m.beat(ctx, name); err != nil && ctx.Err() == nil {
			log(err)
		}
		if err := m.count(ctx, name); err != nil && ctx.Err() == nil {
			log(err)
		}
		select {
		case <-ctx.Done():
			dctx, cancel := context.WithTimeout(context.Background(), m.period+time.Second)
			defer cancel()
			_ = m.client.CoordinationV1().Leases(m.namespace).Delete(dctx, name, metav1.DeleteOptions{})
			return
		case <-t.C:
		}
	}
}

// beat renews this replica's heartbeat: an update of the Lease its last
// write returned, or, without one or when that update finds the Lease
// changed or gone, a live read (and a create when it is gone).
func (m *members) beat(ctx context.Context, name string) error {
	if m.own != nil {
		err := m.renew(ctx, m.own.DeepCopy())
		if err == nil || !(apierrors.IsConflict(err) || apierrors.IsNotFound(err)) {
			return err
		}
		m.own = nil
	}
	leases := m.client.CoordinationV1().Leases(m.namespace)
	l, err := leases.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		now := metav1.NewMicroTime(time.Now())
		seconds := int32(m.duration.Seconds())
		l = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: m.namespace,
			Labels:      map[string]string{LabelReplicaOf: format.ObjectLabel(m.base), "app.kubernetes.io/managed-by": "autox"},
			Annotations: map[string]string{annotationShards: m.shards}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &m.id, LeaseDurationSeconds: &seconds, RenewTime: &now}}
		created, err := leases.Create(ctx, l, metav1.CreateOptions{FieldManager: "autox"})
		if err != nil {
			return fmt.Errorf("cannot create the heartbeat Lease %s/%s: %w", m.namespace, name, err)
		}
		m.wrote1(created)
		return nil
	}
	if err != nil {
		return fmt.Errorf("cannot read the heartbeat Lease %s/%s: %w", m.namespace, name, err)
	}
	return m.renew(ctx, l)
}

// renew writes l, read or last written, as renewed now.
func (m *members) renew(ctx context.Context, l *coordinationv1.Lease) error {
	now := metav1.NewMicroTime(time.Now())
	seconds := int32(m.duration.Seconds())
	l.Spec.RenewTime, l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds = &now, &m.id, &seconds
	if l.Annotations == nil {
		l.Annotations = map[string]string{}
	}
	l.Annotations[annotationShards] = m.shards
	updated, err := m.client.CoordinationV1().Leases(m.namespace).Update(ctx, l, metav1.UpdateOptions{FieldManager: "autox"})
	if err != nil {
		return fmt.Errorf("cannot renew the heartbeat Lease %s/%s: %w", m.namespace, l.Name, err)
	}
	m.wrote1(updated)
	return nil
}

// wrote1 remembers a heartbeat write's answer.
func (m *members) wrote1(l *coordinationv1.Lease) {
	m.own = l
	if l.Spec.RenewTime != nil {
		m.wrote = [2]time.Time{m.wrote[1], l.Spec.RenewTime.Time}
	}
}

func (m *members) count(ctx context.Context, own string) error {
	leases := m.client.CoordinationV1().Leases(m.namespace)
	// Two periods: the renewal this count follows, and one more for the
	// watch's delay.
	m.cache.vouch(own, m.wrote[0], 2*m.period)
	beats, err := m.heartbeats(ctx)
	if err != nil {
		return err
	}
	// The one Lease of --shards 1: its holder writes every release.
	single, err := m.cache.lookup(ctx, leases, m.base)
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("cannot read the Lease %s/%s of a single leader: %w", m.namespace, m.base, err)
	}
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	seen := map[string]observedBeat{}
	foreign := ""
	if err == nil && single.Spec.HolderIdentity != nil && *single.Spec.HolderIdentity != "" && single.Spec.RenewTime != nil {
		// Timed like a heartbeat, by when this process saw it renewed.
		key := "single/" + single.Name
		o, ok := m.observed[key]
		if !ok || !o.renew.Equal(single.Spec.RenewTime.Time) {
			o = observedBeat{renew: single.Spec.RenewTime.Time, at: now}
		}
		seen[key] = o
		if now.Sub(o.at) <= m.duration {
			foreign = fmt.Sprintf("Lease %s/%s is held by %s (a replica running without shards)", m.namespace, m.base, *single.Spec.HolderIdentity)
		}
	}
	live := 1 // this replica
	for _, l := range beats {
		if l.Name == own || l.Spec.RenewTime == nil {
			continue
		}
		renew := l.Spec.RenewTime.Time
		o, ok := m.observed[l.Name]
		if !ok || !o.renew.Equal(renew) {
			o = observedBeat{renew: renew, at: now}
		}
		seen[l.Name] = o
		if now.Sub(o.at) <= m.duration {
			live++
			if other := l.Annotations[annotationShards]; other != m.shards && foreign == "" {
				foreign = fmt.Sprintf("replica %s runs with --shards %s", l.Name, other)
			}
		}
		if now.Sub(renew) > staleHeartbeat {
			rv := l.ResourceVersion
			_ = leases.Delete(ctx, l.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &rv}})
		}
	}
	m.observed, m.live, m.foreign = seen, live, foreign
	m.counted++
	return nil
}

// heartbeats are the heartbeat Leases of this election's replicas, from
// the Lease informer once it has synced, else listed live.
func (m *members) heartbeats(ctx context.Context) ([]*coordinationv1.Lease, error) {
	sel := labels.SelectorFromSet(labels.Set{LabelReplicaOf: format.ObjectLabel(m.base)})
	if cached, ok := m.cache.list(sel); ok {
		return cached, nil
	}
	list, err := m.client.CoordinationV1().Leases(m.namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return nil, fmt.Errorf("cannot list the heartbeat Leases of the replicas in %s: %w", m.namespace, err)
	}
	out := make([]*coordinationv1.Lease, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out, nil
}
