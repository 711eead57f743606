package triggers

import (
	"context"
	"sync"
	"time"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/helmops"
	"github.com/autox-dev/autox/internal/format"
	"github.com/autox-dev/autox/triggers/observe"
	"github.com/autox-dev/autox/triggers/plan"
)

// runPass starts a pass over every spec (with --shards, over the keys of
// the controller's shard). It reads the cluster with a number of requests
// that does not grow with the number of specs or objects: one metadata LIST
// of release records per managed namespace, one live LIST per trigger
// (resource, namespace, selector), and one GET per values source object of
// a wanted trigger (of the shard's keys). From that alone the pure plan.Triage decides
// which specs, or objects of selector specs, it cannot prove in sync
// (plan.InSync), and those get the full reconcile, whose live read of its
// trigger is the same LIST while nothing can have changed it since
// (bulkReads), a GET otherwise.
func (c *Controller) runPass(ctx context.Context) {
	if ctx.Err() != nil {
		return // stopping: a pass that races the stop starts nothing
	}
	started := time.Now()
	cfg := c.Config()
	gcNamespaces := c.state.GCNamespaces()
	if c.opts.Records != nil {
		// Namespaces a pass forgot (dropped, found empty) leave the index.
		c.opts.Records.Watch(ctx, gcNamespaces)
	}
	// What the listing below can speak for: nothing a reconcile still
	// running under an older config may write later, this controller's or
	// another's of the same state (another shard's of this replica). It
	// must be taken before the inventory's read, which shows the writes
	// of this process in flight at its call: a reconcile begun before
	// safeSince had ended, its writes registered, before that call.
	safeSince := c.state.oldestInFlight(started)
	requestsBefore := c.requestCount()
	c.bulk.newPass(cfg)

	verdict, ok := c.survey(ctx, cfg, gcNamespaces, safeSince)
	if !ok {
		return // stopping: queue nothing
	}
	// The namespaces the survey found empty leave the record; one it
	// could not read at start-up is read again.
	c.syncManaged(ctx)
	keys := verdict.Keys
	for _, key := range verdict.Noticed {
		c.noticed.Store(key, true)
	}
	obs := c.rec.Observer()
	for name, admitted := range verdict.Admitted {
		spec := cfg.Specs[name]
		obs.Admissions().Set(name, observe.Identity(cfg, spec.Trigger), admitted, spec.Trigger.MaxObjects)
	}
	if c.opts.Metrics != nil {
		for name, n := range verdict.Objects {
			c.opts.Metrics.setObjects(name, n.Served, n.OverLimit, n.Conflict)
		}
	}
	c.pass.start(keys, started, func(_ time.Time, took time.Duration) {
		listReads, refused := c.bulk.counts()
		c.opts.Log.Info().Int64("listReads", listReads).Int64("listReadsRefused", refused).Int("specs", len(cfg.Specs)).Int("queued", len(keys)).Dur("duration", took).
			Int64("apiRequests", c.requestCount()-requestsBefore).Msg("pass complete")
		if c.opts.Metrics != nil {
			c.opts.Metrics.lastPass.Set(float64(time.Now().Unix()))
			c.opts.Metrics.passDuration.Observe(took.Seconds())
		}
	})
	now := time.Now()
	for _, key := range keys {
		// A key in backoff is retried when its backoff ends, not sooner.
		if c.inBackoff(key, now) {
			c.pass.done(key)
			continue
		}
		c.queue.Add(key)
	}
}

// survey makes the pass's reads and triages them; ok is false when a stop
// cut it short.
func (c *Controller) survey(ctx context.Context, cfg *config.Config, gcNamespaces []string, safeSince time.Time) (plan.Verdict, bool) {
	obs := c.rec.Observer()
	s := plan.Survey{Config: cfg, Claims: obs.Claims(cfg), Served: map[string][]format.Object{}, Noticed: map[string]bool{}, Digests: c.digests}
	if sh := c.opts.Shard; sh != nil {
		// A shard's pass decides only its own keys, as processNext
		// reconciles only those: the replica's other shards' passes
		// decide theirs, each reading its own values sources.
		s.Owns = func(key string) bool { return sh.OwnsKey(cfg, key) }
	}
	recs, err := c.opts.Inventory.Managed(ctx, gcNamespaces)
	if ctx.Err() != nil {
		return plan.Verdict{}, false // a failed read is no reason to queue anything
	}
	s.Unread = helmops.FailedNamespaces(err)
	if err != nil && s.Unread == nil {
		c.opts.Log.Error().Err(err).Msg("cannot list autox release records; reconciling every spec in full")
		s.RecordsFailed = true
		return plan.Triage(s), true
	}
	if err != nil {
		c.opts.Log.Error().Err(err).Msg("cannot list autox release records of some namespaces; their specs get a full reconcile")
	}
	s.Records = recs
	c.countShardReleases(recs)
	c.state.Collected(plan.EmptyNamespaces(cfg, gcNamespaces, s.Unread, recs), safeSince)
	// A shard's pass lists only the triggers of the specs whose key it
	// owns, its named specs and the selectors (whose objects spread over
	// every shard): a listing only other shards' specs use is theirs.
	s.Listed = observe.Listings(cfg, obs.ListTriggers(ctx, cfg, s.Owns))
	if ctx.Err() != nil {
		return plan.Verdict{}, false
	}
	s.Charts = make(map[string]map[string]plan.ChartID, len(cfg.Specs))
	charts := observe.PassCharts{}
	for name, spec := range cfg.Specs {
		if s.Owns != nil && !s.Owns(name) {
			continue // another shard's named spec: not triaged here
		}
		s.Charts[name] = obs.ChartIDs(spec, cfg.Dir, charts)
		if spec.Trigger.IsSelector() {
			s.Served[name], _ = obs.Admissions().Served(name, observe.Identity(cfg, spec.Trigger))
		}
	}
	c.noticed.Range(func(k, _ any) bool {
		s.Noticed[k.(string)] = true
		return true
	})
	// Values sources are read live, each object once for the whole pass.
	s.Sources = obs.ReadSources(ctx, plan.SourcesNeeded(s))
	verdict := plan.Triage(s)
	if c.opts.Metrics != nil {
		c.opts.Metrics.setReleases(verdict.ByStatus)
	}
	return verdict, true
}

func (c *Controller) requestCount() int64 {
	if c.opts.RequestCount == nil {
		return 0
	}
	return c.opts.RequestCount()
}

// passTracker knows which specs of the current pass are still to be reconciled.
type passTracker struct {
	mu         sync.Mutex
	pending    map[string]bool
	started    time.Time
	onComplete func(started time.Time, took time.Duration)
}

func (p *passTracker) start(names []string, now time.Time, onComplete func(time.Time, time.Duration)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pending = make(map[string]bool, len(names))
	for _, n := range names {
		p.pending[n] = true
	}
	p.started, p.onComplete = now, onComplete
	if len(names) == 0 {
		p.complete()
	}
}

func (p *passTracker) done(name string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.pending[name] {
		return
	}
	delete(p.pending, name)
	if len(p.pending) == 0 {
		p.complete()
	}
}

func (p *passTracker) complete() {
	if p.onComplete != nil {
		p.onComplete(p.started, time.Since(p.started))
		p.onComplete = nil
	}
}
