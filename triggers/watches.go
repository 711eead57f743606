package triggers

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/rs/zerolog"
	"k8s.io/client-go/metadata"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/internal/metainformer"
	"github.com/autox-dev/autox/triggers/observe"
)

// Watches are one replica's watches, shared by the controllers of the shards
// it holds (--shards above 1; DESIGN §9): one informer per trigger
// (resource, namespace, selector) and per values source, and one record
// index, each running for the union of what those controllers need. An
// informer's events go to every controller that needs it; a controller that
// stops (its shard handed over, its term ended) or whose config no longer
// needs an informer drops its need, and an informer nobody needs stops. So
// a replica keeps one copy of what its shards share, and what only the
// shards it gave up needed leaves its memory with them.
//
// The watches only read: they are built from the replica's own clients, not
// from a shard term's, and outlive every term. Without shards a controller
// runs watches of its own (Options.Watches nil), as it always has.
type Watches struct {
	triggers, sources *sharedInformers
	records           *sharedRecords
}

// WatchesOptions configure Watches.
type WatchesOptions struct {
	// Metadata reads the metadata of triggers and values sources.
	Metadata metadata.Interface
	// Records, if set, is the replica's record index
	// (helmops.NewSharedRecordIndex): each controller's Options.Records
	// becomes its share of it.
	Records RecordIndex
	Log     zerolog.Logger
}

// NewWatches returns the watches of a replica. Every informer they start
// runs under ctx (the replica's, not a term's) until nobody needs it or Stop.
func NewWatches(ctx context.Context, opts WatchesOptions) *Watches {
	w := &Watches{
		triggers: newSharedInformers(ctx, opts.Metadata, opts.Log),
		sources:  newSharedInformers(ctx, opts.Metadata, opts.Log),
	}
	if opts.Records != nil {
		w.records = &sharedRecords{ctx: ctx, index: opts.Records}
	}
	return w
}

// Stop stops every informer and the record index; nothing starts again.
func (w *Watches) Stop() {
	w.triggers.stop()
	w.sources.stop()
	if w.records != nil {
		w.records.stop()
	}
}

// needs keeps what each user of a shared set of watches needs, and applies
// their union whenever one user's need changes. Changes are applied one at
// a time, in order, under its lock.
type needs[K comparable] struct {
	mu     sync.Mutex
	closed bool
	by     map[any][]K
}

// set records that user needs keys (none: nil drops the user) and calls
// apply with the union and every user's need. After close it does nothing.
func (n *needs[K]) set(user any, keys []K, apply func(union []K, by map[any][]K)) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return
	}
	if n.by == nil {
		n.by = map[any][]K{}
	}
	if keys == nil {
		delete(n.by, user)
	} else {
		n.by[user] = keys
	}
	seen := map[K]bool{}
	var union []K
	for _, ks := range n.by {
		for _, k := range ks {
			if !seen[k] {
				seen[k] = true
				union = append(union, k)
			}
		}
	}
	apply(union, n.by)
}

// close makes set do nothing from now on, and runs stop under the lock.
func (n *needs[K]) close(stop func()) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.closed = true
	stop()
}

// sharedInformers run one informer per key that any share needs; each
// event goes to the shares that need its informer.
type sharedInformers struct {
	ctx   context.Context
	set   *informerSet
	needs needs[observe.ListKey]
	// routes maps an informer to the shares that need it; replaced whole
	// before informers start, so that an informer's first events find them.
	routes atomic.Pointer[map[observe.ListKey][]*informerShare]
}

func newSharedInformers(ctx context.Context, client metadata.Interface, log zerolog.Logger) *sharedInformers {
	s := &sharedInformers{ctx: ctx}
	s.routes.Store(&map[observe.ListKey][]*informerShare{})
	s.set = newInformerSet(client, nil, s.route, log)
	return s
}

// route hands an event to every share that needs its informer.
func (s *sharedInformers) route(k observe.ListKey, namespace, name string) {
	for _, sh := range (*s.routes.Load())[k] {
		sh.onEvent(k, namespace, name)
	}
}

// need records the informers one share needs (nil: none) and runs the
// union: informers nobody needs stop, new ones start.
func (s *sharedInformers) need(sh *informerShare, keys []observe.ListKey) {
	s.needs.set(sh, keys, func(union []observe.ListKey, by map[any][]observe.ListKey) {
		routes := map[observe.ListKey][]*informerShare{}
		for user, ks := range by {
			for _, k := range ks {
				routes[k] = append(routes[k], user.(*informerShare))
			}
		}
		s.routes.Store(&routes)
		s.set.set.Sync(s.ctx, union)
	})
}

func (s *sharedInformers) stop() { s.needs.close(s.set.stopAll) }

// running returns the keys of the informers running now.
func (s *sharedInformers) running() []observe.ListKey {
	var out []observe.ListKey
	s.needs.mu.Lock()
	defer s.needs.mu.Unlock()
	for _, ks := range s.needs.by {
		for _, k := range ks {
			if !slices.Contains(out, k) && s.set.set.Get(k) != nil {
				out = append(out, k)
			}
		}
	}
	return out
}

// share returns one controller's share: the informers keys(cfg) names,
// whose events go to onEvent.
func (s *sharedInformers) share(keys func(*config.Config) []observe.ListKey, onEvent func(k observe.ListKey, namespace, name string)) *informerShare {
	return &informerShare{shared: s, keys: keys, onEvent: onEvent}
}

// informerShare is one controller's share of sharedInformers. It does for
// the controller what an informerSet of its own would.
type informerShare struct {
	shared  *sharedInformers
	keys    func(*config.Config) []observe.ListKey
	onEvent func(k observe.ListKey, namespace, name string)

	mu     sync.Mutex
	closed bool
	mine   []observe.ListKey
}

// sync needs the informers cfg needs, and no longer those it does not.
// After stopAll it does nothing: a config applied while the controller
// stops must not leave an informer that nobody will drop.
func (sh *informerShare) sync(_ context.Context, cfg *config.Config) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.closed {
		return
	}
	sh.mine = sh.keys(cfg)
	if sh.mine == nil {
		sh.mine = []observe.ListKey{}
	}
	sh.shared.need(sh, sh.mine)
}

// hasSynced reports whether each informer of this share has listed once.
func (sh *informerShare) hasSynced() bool {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	for _, k := range sh.mine {
		if i := sh.shared.set.set.Get(k); i == nil || !i.HasSynced() {
			return false
		}
	}
	return true
}

// waitForSync waits for this share's informers only: another shard's
// informer of a resource not served must not hold this one's pass back.
func (sh *informerShare) waitForSync(ctx context.Context) bool {
	sh.mu.Lock()
	mine := slices.Clone(sh.mine)
	sh.mu.Unlock()
	return sh.shared.set.set.WaitForSyncOf(ctx, mine)
}

// informer returns the running informer of k, shared with other shares.
func (sh *informerShare) informer(k observe.ListKey) *metainformer.Informer {
	return sh.shared.set.set.Get(k)
}

// stopAll drops this share's need; informers others need run on.
func (sh *informerShare) stopAll() {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.closed = true
	sh.shared.need(sh, nil)
}

// sharedRecords is the replica's record index, watching the union of the
// namespaces its shares need.
type sharedRecords struct {
	ctx   context.Context
	index RecordIndex
	needs needs[string]
}

func (r *sharedRecords) stop() { r.needs.close(r.index.Stop) }

// share returns one controller's share of the index, a RecordIndex.
func (r *sharedRecords) share() *recordShare { return &recordShare{shared: r} }

// recordShare is one controller's share of the replica's record index: its
// Watch names the namespaces it needs, its Stop drops them.
type recordShare struct {
	shared *sharedRecords
	mu     sync.Mutex
	closed bool
}

func (rs *recordShare) Watch(_ context.Context, namespaces []string) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.closed {
		return
	}
	if namespaces == nil {
		namespaces = []string{}
	}
	rs.shared.needs.set(rs, namespaces, func(union []string, _ map[any][]string) {
		rs.shared.index.Watch(rs.shared.ctx, union)
	})
}

func (rs *recordShare) WaitForSync(ctx context.Context) bool { return rs.shared.index.WaitForSync(ctx) }

func (rs *recordShare) Stop() {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.closed = true
	rs.shared.needs.set(rs, nil, func(union []string, _ map[any][]string) {
		rs.shared.index.Watch(rs.shared.ctx, union)
	})
}
