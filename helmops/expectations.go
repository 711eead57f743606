package helmops

import (
	"context"
	"strings"
	"sync"
	"time"

	helmrelease "helm.sh/helm/v4/pkg/release"
	"helm.sh/helm/v4/pkg/storage/driver"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// expectations are the release record writes this process made that the
// index has not shown yet: read-your-writes for the index. A reconcile that
// follows its own install closely (an event, a pass) would otherwise find no
// record in an index a moment behind, and install again (which Helm
// refuses: an error and a retry for nothing). A release with a write not yet
// seen is waited for briefly, then read live.
//
// An expectation is registered before the write and dropped when the write
// fails; the index's handler drops it when it shows the record as written
// (its status label, or its deletion). A write the index will never show as
// such (overwritten by someone else before the watch delivered it, or
// folded into a relist) stops counting after expectationTTL: by then the
// index holds whatever came after it.
type expectations struct {
	mu sync.Mutex
	// byNS maps namespace → record key → what was written.
	byNS map[string]map[string]expectation
	// changed is closed, and replaced, whenever an expectation goes.
	changed chan struct{}
	now     func() time.Time
}

type expectation struct {
	release string
	labels  map[string]string // the release labels written (autox's), for lookups by spec
	status  string            // the status label written; "" for a deletion
	// at is when the write was registered, and once it succeeded, when it
	// ended: expectationTTL counts from there, so a write held long in the
	// API server's queues does not stop counting as soon as it lands.
	at time.Time
	// prev is the write of the same record this one replaced before the
	// index showed it: should this one fail, that one is still to be shown.
	prev *expectation
}

// shows reports whether the index's view of a record (its status label, or
// its deletion) is what x wrote.
func (x expectation) shows(status string, deleted bool) bool {
	return deleted == (x.status == "") && (deleted || status == x.status)
}

// expectationTTL bounds how long a write the index does not show is waited
// for by name.
const expectationTTL = 30 * time.Second

// awaitOwnWrites bounds how long a read waits for the index to show this
// process's own writes of a release before it reads that release live.
const awaitOwnWrites = 2 * time.Second

func newExpectations() *expectations {
	return &expectations{byNS: map[string]map[string]expectation{}, changed: make(chan struct{}), now: time.Now}
}

// pendingWrite is one write registered with expect; done says how it ended.
type pendingWrite struct {
	e              *expectations
	namespace, key string
	x              expectation
}

// expect registers a write of record key, before it is made.
func (e *expectations) expect(namespace, key string, x expectation) pendingWrite {
	if e == nil {
		return pendingWrite{}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.now()
	x.at = now
	if e.byNS[namespace] == nil {
		e.byNS[namespace] = map[string]expectation{}
	}
	if cur, ok := e.byNS[namespace][key]; ok && now.Sub(cur.at) < expectationTTL {
		x.prev = &cur
	}
	e.byNS[namespace][key] = x
	return pendingWrite{e: e, namespace: namespace, key: key, x: x}
}

// done ends the write: a failed one (err) is withdrawn, and the write it
// replaced, if the index has not shown that one yet, is expected again; a
// successful one counts expectationTTL from now.
func (w pendingWrite) done(err error) {
	e := w.e
	if e == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	cur, ok := e.byNS[w.namespace][w.key]
	if !ok || !cur.at.Equal(w.x.at) || cur.status != w.x.status {
		return // shown already, or replaced by a later write
	}
	switch {
	case err == nil:
		cur.at = e.now()
		e.byNS[w.namespace][w.key] = cur
	case cur.prev != nil:
		e.byNS[w.namespace][w.key] = *cur.prev
	default:
		e.drop(w.namespace, w.key)
	}
}

// seen is the index's handler: the record as the index now shows it.
func (e *expectations) seen(namespace string, obj interface{}, deleted bool) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj, deleted = d.Obj, true
	}
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	x, ok := e.byNS[namespace][m.Name]
	if !ok {
		return
	}
	if x.shows(m.Labels["status"], deleted) {
		e.drop(namespace, m.Name)
		return
	}
	// An earlier write the index shows now, and those before it, need no
	// longer be expected should the later one fail.
	for p := &x; p.prev != nil; p = p.prev {
		if p.prev.shows(m.Labels["status"], deleted) {
			p.prev = nil
			e.byNS[namespace][m.Name] = x
			return
		}
	}
}

// drop removes an expectation; e.mu is held.
func (e *expectations) drop(namespace, key string) {
	delete(e.byNS[namespace], key)
	if len(e.byNS[namespace]) == 0 {
		delete(e.byNS, namespace)
	}
	close(e.changed)
	e.changed = make(chan struct{})
}

// pending returns the releases of namespace with writes not yet seen whose
// labels match (nil matches every one), and a channel closed at the next
// change.
func (e *expectations) pending(namespace string, match func(labels map[string]string) bool) (map[string]bool, <-chan struct{}) {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := map[string]bool{}
	now := e.now()
	for _, x := range e.byNS[namespace] {
		if now.Sub(x.at) < expectationTTL && (match == nil || match(x.labels)) {
			out[x.release] = true
		}
	}
	return out, e.changed
}

// settled waits until release name in namespace has no write the index has
// not shown, for at most awaitOwnWrites; false means read it live.
func (e *expectations) settled(ctx context.Context, namespace, name string) bool {
	if e == nil {
		return true
	}
	return e.await(ctx, func() (bool, <-chan struct{}) {
		names, changed := e.pending(namespace, nil)
		return !names[name], changed
	})
}

// await checks cond now and at each change of the expectations, for at
// most awaitOwnWrites; false when it did not hold by then, or ctx ended.
// cond returns the channel its answer holds until (pending's).
func (e *expectations) await(ctx context.Context, cond func() (bool, <-chan struct{})) bool {
	ok, changed := cond()
	if ok {
		return true
	}
	timeout := time.NewTimer(awaitOwnWrites)
	defer timeout.Stop()
	for {
		select {
		case <-changed:
		case <-timeout.C:
			return false
		case <-ctx.Done():
			return false
		}
		if ok, changed = cond(); ok {
			return true
		}
	}
}

// caughtUpEach waits until the index shows every write of each
// namespace's records that was pending at the call: each record that had
// one has been seen without one since (its writes then shown by the index,
// failed, or past expectationTTL). It waits for all namespaces together, at
// most awaitOwnWrites in all, and reports those whose writes the index has
// shown; the others are to be read live. Writes registered after the call
// are not waited for: a LIST made at the call would not show them either. A
// busy namespace, where some write is always in flight, is so still read
// from the index once the writes of the moment have come through its watch.
func (e *expectations) caughtUpEach(ctx context.Context, namespaces []string) map[string]bool {
	return e.awaitEach(ctx, e.pendingEach(namespaces))
}

// pendingEach is the record keys with a write pending in each namespace.
func (e *expectations) pendingEach(namespaces []string) map[string]map[string]bool {
	out := make(map[string]map[string]bool, len(namespaces))
	for _, ns := range namespaces {
		out[ns] = nil
		if e != nil {
			out[ns], _ = e.pendingKeys(ns, nil)
		}
	}
	return out
}

// awaitEach waits until the index has shown the writes of waiting (record
// keys by namespace), at most awaitOwnWrites, and reports per namespace
// whether it has.
func (e *expectations) awaitEach(ctx context.Context, waiting map[string]map[string]bool) map[string]bool {
	left := make(map[string]map[string]bool, len(waiting))
	for ns, keys := range waiting {
		if len(keys) > 0 {
			left[ns] = keys
		}
	}
	if len(left) > 0 {
		e.await(ctx, func() (bool, <-chan struct{}) {
			var first <-chan struct{}
			for ns, keys := range left {
				var changed <-chan struct{}
				keys, changed = e.pendingKeys(ns, keys)
				if first == nil {
					// The channel of the first read: a change after
					// it, which a later namespace's read might not
					// show, has closed it.
					first = changed
				}
				if len(keys) == 0 {
					delete(left, ns) // not read again at the next change
				} else {
					left[ns] = keys
				}
			}
			return len(left) == 0, first
		})
	}
	out := make(map[string]bool, len(waiting))
	for ns := range waiting {
		_, pending := left[ns]
		out[ns] = !pending && ctx.Err() == nil
	}
	return out
}

// pendingKeys returns the record keys of namespace with a write not yet
// seen, among those of among (nil: all), and a channel closed at the next
// change.
func (e *expectations) pendingKeys(namespace string, among map[string]bool) (map[string]bool, <-chan struct{}) {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := map[string]bool{}
	now := e.now()
	for key, x := range e.byNS[namespace] {
		if now.Sub(x.at) < expectationTTL && (among == nil || among[key]) {
			out[key] = true
		}
	}
	return out, e.changed
}

// trackedDriver is the storage driver of one operation of a Manager with an
// index: it registers each record write with the index's expectations.
type trackedDriver struct {
	driver.Driver
	expect    *expectations
	namespace string
}

func (d *trackedDriver) Create(key string, rls helmrelease.Releaser) error {
	w := d.expect.expect(d.namespace, key, written(rls))
	err := d.Driver.Create(key, rls)
	w.done(err)
	return err
}

func (d *trackedDriver) Update(key string, rls helmrelease.Releaser) error {
	w := d.expect.expect(d.namespace, key, written(rls))
	err := d.Driver.Update(key, rls)
	w.done(err)
	return err
}

func (d *trackedDriver) Delete(key string) (helmrelease.Releaser, error) {
	w := d.expect.expect(d.namespace, key, expectation{release: releaseOfKey(key)})
	rls, err := d.Driver.Delete(key)
	w.done(err)
	return rls, err
}

// written is the expectation of a write of r; a release that is not of the
// API v1 (which the driver then refuses) is expected as of unknown status.
func written(r helmrelease.Releaser) expectation {
	var x expectation
	if rls, err := asV1(r); err == nil {
		x = expectation{release: rls.Name, labels: rls.Labels}
		if rls.Info != nil {
			x.status = rls.Info.Status.String()
		}
	}
	if x.status == "" {
		x.status = "unknown" // never "": that means a deletion
	}
	return x
}

// releaseOfKey is the release name in a record key, sh.helm.release.v1.<name>.v<revision>.
func releaseOfKey(key string) string {
	name := strings.TrimPrefix(key, recordKeyPrefix)
	if i := strings.LastIndex(name, ".v"); i >= 0 {
		name = name[:i]
	}
	return name
}
