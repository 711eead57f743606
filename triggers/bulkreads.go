package triggers

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/internal/format"
	"github.com/autox-dev/autox/internal/metainformer"
	"github.com/autox-dev/autox/triggers/observe"
	"github.com/autox-dev/autox/triggers/plan"
)

// A pass decides many triggers of one (resource, namespace, selector) from
// one consistent LIST, made live (no resourceVersion: the API server's
// current state); bulkReads lets that LIST stand in for the GET each
// reconcile of the pass would make (DESIGN §5), only while nothing can have
// changed the object unseen since (bulkReadOK). Otherwise, and for a
// second read of a key (a retry, the reobservation after removals), the
// reconcile GETs. So does the reconcile an informer event on its trigger
// queued (a single event GETs its one object), even when a pass LISTed the
// object after the event: the LIST says nothing of a change since that the
// informer has not delivered yet, such as the trigger's deletion.

const (
	// bulkReadMaxAge is how long after its start a LIST may stand in for
	// a GET.
	bulkReadMaxAge = 10 * time.Second
	// bulkWatchWait is how long a pass waits, in all, for informers to
	// open their watches before its LISTs (a LIST made without one is
	// never used).
	bulkWatchWait = time.Second
)

// bulkFacts are what bulkReadOK judges one use of a LIST by.
type bulkFacts struct {
	// Listed: the pass listed the key's (resource, namespace, selector)
	// under the config the reconcile runs with; Found: the object was in
	// the LIST. An absence is never used: an uninstall stands on a GET.
	Listed, Found bool
	// Used: the key has had its LIST read once already.
	Used bool
	// Queued: an informer event on the trigger queued the key since its
	// last read.
	Queued bool
	// Age is how long ago the LIST began.
	Age time.Duration
	// Event: an informer event on the object arrived since the LIST began.
	Event bool
	// WatchAtList and WatchNow are the informer's watch generation at the
	// LIST's start and now (0: no watch open then).
	WatchAtList, WatchNow uint64
	// ListVersion and StoreVersion are the object's resourceVersion in the
	// LIST and in the informer's store now ("" when not there).
	ListVersion, StoreVersion string
}

// bulkReadOK reports whether a LIST may be the live read of one key, and
// if not, why: the object was in it, nothing since says it changed (no
// event; the informer, whose one watch was open from the LIST's start until
// now, holds the same version), it is recent, it is the key's first read,
// and no informer event queued the key since its last read.
func bulkReadOK(f bulkFacts) (bool, string) {
	switch {
	case !f.Listed:
		return false, "not listed by this pass under this config"
	case !f.Found:
		return false, "not in the list"
	case f.Used:
		return false, "read once already"
	case f.Queued:
		return false, "an informer event queued the key"
	case f.Age < 0 || f.Age > bulkReadMaxAge:
		return false, "list too old"
	case f.Event:
		return false, "an event since the list"
	case f.WatchAtList == 0 || f.WatchNow != f.WatchAtList:
		return false, "no watch open all along since the list"
	case f.StoreVersion != f.ListVersion:
		return false, "the informer holds another version"
	}
	return true, ""
}

// bulkObject identifies a trigger object across the informers that see it.
type bulkObject struct {
	Group, Resource, Namespace, Name string
}

// bulkList is one LIST of the pass.
type bulkList struct {
	key   observe.ListKey
	began time.Time
	// seq is the event count when the LIST began: an object whose last
	// event counts more changed since.
	seq   uint64
	watch uint64 // the informer's watch generation then (0: none open)
	// inf is the informer whose generation watch is: generations count
	// per informer, so one started again after a config dropped and
	// restored k (and listed from the watch cache meanwhile) must not
	// pass for the one that watched since the LIST.
	inf *metainformer.Informer
}

type bulkEntry struct {
	list *bulkList
	read plan.TriggerRead
}

// bulkReads holds the LISTs of the controller's last pass.
type bulkReads struct {
	informer func(k observe.ListKey) *metainformer.Informer
	now      func() time.Time

	mu     sync.Mutex
	cfg    *config.Config
	wait   time.Time // when this pass stops waiting for watches
	objs   map[bulkObject]bulkEntry
	used   map[string]bool
	seq    uint64
	events map[bulkObject]uint64 // the seq of each object's last event this pass
	// evented are the keys an informer event on their trigger queued since
	// their last read; unlike the rest, kept across passes (a key queued
	// before a pass is read after its LISTs). A key whose spec left the
	// config is forgotten at the next pass.
	evented map[string]bool

	listReads, refused atomic.Int64
}

func newBulkReads(informer func(observe.ListKey) *metainformer.Informer) *bulkReads {
	return &bulkReads{informer: informer, now: time.Now}
}

// newPass forgets the last pass's LISTs: the pass about to start lists
// again under cfg, and its counts start at zero.
func (b *bulkReads) newPass(cfg *config.Config) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.cfg, b.wait = cfg, b.now().Add(bulkWatchWait)
	b.objs, b.used, b.events = map[bulkObject]bulkEntry{}, map[string]bool{}, map[bulkObject]uint64{}
	for key := range b.evented {
		if spec, _ := parseKey(key); cfg.Specs[spec] == nil {
			delete(b.evented, key)
		}
	}
	b.listReads.Store(0)
	b.refused.Store(0)
}

// counts are the reads this pass's LISTs stood in for, and those refused.
func (b *bulkReads) counts() (reads, refused int64) { return b.listReads.Load(), b.refused.Load() }

// event notes an informer event on an object.
func (b *bulkReads) event(k observe.ListKey, namespace, name string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.events == nil {
		return // no pass yet
	}
	b.seq++
	b.events[bulkObject{Group: k.GVR.Group, Resource: k.GVR.Resource, Namespace: namespace, Name: name}] = b.seq
}

// eventQueued notes that an informer event on its trigger queued key: its
// next read GETs.
func (b *bulkReads) eventQueued(key string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.evented == nil {
		b.evented = map[string]bool{}
	}
	b.evented[key] = true
}

// Listing is observe.BulkReads': it notes the start of a LIST of k (after
// waiting, within the pass's budget, for k's informer to watch) and keeps
// its objects.
func (b *bulkReads) Listing(ctx context.Context, cfg *config.Config, k observe.ListKey) func(map[string]plan.TriggerRead) {
	b.mu.Lock()
	if cfg != b.cfg {
		b.mu.Unlock()
		return func(map[string]plan.TriggerRead) {}
	}
	until := b.wait
	b.mu.Unlock()
	var watch uint64
	inf := b.informer(k)
	if inf != nil {
		wctx, cancel := context.WithDeadline(ctx, until)
		inf.WaitWatching(wctx)
		cancel()
		if gen, open := inf.WatchGeneration(); open {
			watch = gen
		}
	}
	b.mu.Lock()
	l := &bulkList{key: k, began: b.now(), seq: b.seq, watch: watch, inf: inf}
	b.mu.Unlock()
	return func(objs map[string]plan.TriggerRead) {
		b.mu.Lock()
		defer b.mu.Unlock()
		if cfg != b.cfg {
			return // another pass began meanwhile
		}
		for name, read := range objs {
			b.objs[bulkObject{Group: k.GVR.Group, Resource: k.GVR.Resource, Namespace: k.Namespace, Name: name}] = bulkEntry{list: l, read: read}
		}
		// Once too old to stand in for a GET, the LIST's objects are
		// dropped rather than kept until the next pass: at 10,000
		// triggers they were some 10 MB, and with --shards every held
		// shard's controller keeps its own copy of every LIST.
		time.AfterFunc(bulkReadMaxAge+time.Second, func() { b.expire(l) })
	}
}

// expire drops the objects of LIST l; what a reconcile asks of them after
// is read with a GET, as bulkReadOK would have said of a LIST that old.
func (b *bulkReads) expire(l *bulkList) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for id, e := range b.objs {
		if e.list == l {
			delete(b.objs, id)
		}
	}
}

// Take is observe.BulkReads': the LIST's read of t for the key (specName,
// obj) under cfg, if bulkReadOK; each key's first call only.
func (b *bulkReads) Take(cfg *config.Config, specName string, obj format.Object, t config.Trigger) (plan.TriggerRead, bool) {
	key := specName
	if !obj.IsZero() {
		key = ObjectKey(specName, obj)
	}
	id := bulkObject{Group: t.Group, Resource: t.Resource, Namespace: t.Namespace, Name: t.Name}
	b.mu.Lock()
	// Whatever the answer, this read is the one the event asked for.
	queued := b.evented[key]
	delete(b.evented, key)
	if b.objs == nil || cfg != b.cfg {
		b.mu.Unlock()
		return plan.TriggerRead{}, false
	}
	e, listed := b.objs[id]
	used := b.used[key]
	b.used[key] = true
	f := bulkFacts{Listed: listed, Found: listed && e.read.Found, Used: used, Queued: queued}
	if listed {
		f.Age, f.Event = b.now().Sub(e.list.began), b.events[id] > e.list.seq
		f.WatchAtList, f.ListVersion = e.list.watch, e.read.Version
	}
	b.mu.Unlock()
	if !listed {
		return plan.TriggerRead{}, false // nothing to refuse: an object no LIST of the pass holds
	}
	// Another informer than the LIST's (started again since) has no watch
	// open all along since the LIST: WatchNow stays 0.
	if inf := b.informer(e.list.key); inf != nil && inf == e.list.inf {
		if gen, open := inf.WatchGeneration(); open {
			f.WatchNow = gen
		}
		if o, exists, err := inf.Indexer().GetByKey(cache.NewObjectName(t.Namespace, t.Name).String()); err == nil && exists {
			if m, ok := o.(*metav1.PartialObjectMetadata); ok {
				f.StoreVersion = m.ResourceVersion
			}
		}
	}
	if ok, _ := bulkReadOK(f); !ok {
		b.refused.Add(1)
		return plan.TriggerRead{}, false
	}
	b.listReads.Add(1)
	return e.read, true
}
