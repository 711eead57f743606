// Package triggers is the loop that keeps each spec's releases in line with
// its trigger object: informers and a periodic pass put keys (a spec, or one
// object of a selector spec) on one queue, workers take them off one at a
// time per key, and a Reconciler runs each through observe (triggers/observe:
// live reads) → plan (triggers/plan: the pure decision) → apply
// (triggers/apply: the Helm operations through helmops).
package triggers

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/util/workqueue"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/helmops"
	"github.com/autox-dev/autox/triggers/observe"
	"github.com/autox-dev/autox/triggers/plan"
)

// Options configure a Controller.
type Options struct {
	// Reconciler decides and applies; its config state is the controller's.
	Reconciler *Reconciler
	Inventory  *helmops.Inventory
	Metadata   metadata.Interface
	// Records, if set, is the index of release record metadata that the
	// Reconciler's helmops.Manager and Inventory read through
	// (helmops.RecordIndex): Run starts it on the namespaces garbage
	// collection covers before start-up cleanup, waits (a while) for it to
	// sync, keeps it on those namespaces and stops it when it returns.
	Records RecordIndex
	// Workers is how many specs are reconciled in parallel (--workers).
	Workers int
	// Resync is the period of the pass that enqueues every spec (--resync).
	Resync time.Duration
	// ShutdownTimeout bounds how long a stop waits for running reconciles.
	ShutdownTimeout time.Duration
	// RetryBase and RetryMax bound the per-spec backoff after an error.
	RetryBase, RetryMax time.Duration
	// Backoff holds the per-spec retry delays. Share one across the
	// controllers of successive leadership terms, so that a term that ends
	// and a new one that starts do not retry failing specs at once; nil
	// makes one from RetryBase and RetryMax.
	Backoff *Backoff
	// Fenced, if set, is closed when the leadership term this controller
	// works for has ended: running reconciles are cancelled at once, since
	// their writes are refused anyway, and nothing new starts.
	Fenced <-chan struct{}
	// Metrics is optional; the Reconciler's should be the same.
	Metrics *Metrics
	// RequestCount, if set, counts API requests made so far (for the pass log).
	RequestCount func() int64
	Log          zerolog.Logger

	// Shard, if set, is the one shard this controller works for
	// (--shards above 1): it reconciles only that shard's keys, and its
	// Reconciler must read releases through ShardReleases of the same.
	Shard *Shard
	// Watches, if set, are the replica's watches the controllers of its
	// shards share: this controller's informers are its share of them, and
	// so is its record index when the Watches have one (Records is then
	// replaced). nil: informers of its own, as without shards.
	Watches *Watches

	// ValuesCoalesce is how long an event of a values source waits before
	// its keys are reconciled, so that sources changed together make one
	// upgrade (--values-coalesce; default 2s).
	ValuesCoalesce time.Duration
}

// RecordIndex is what the Controller runs of a helmops.RecordIndex.
type RecordIndex interface {
	Watch(ctx context.Context, namespaces []string)
	WaitForSync(ctx context.Context) bool
	Stop()
}

// recordIndexSync bounds the wait for the record index at start: a
// namespace it cannot list is read live until it can.
const recordIndexSync = 10 * time.Second

// Controller runs informers, the queue, the workers and the periodic pass.
type Controller struct {
	opts      Options
	rec       *Reconciler
	state     *ConfigState
	queue     workqueue.TypedDelayingInterface[string]
	informers watchSet
	backoff   *Backoff

	// sources watch the values sources the config references; unlike
	// trigger informers they do not hold readiness back (a Secret autox
	// may not list is an error of its release spec, reported there).
	sources watchSet
	// bulk lets the pass's LISTs stand in for reconciles' GETs.
	bulk *bulkReads
	// digests are the digests of desired values the passes computed:
	// a pass over a fleet nothing changed in computes none again.
	digests *plan.Digests

	index    atomic.Pointer[triggerIndex]
	stopping atomic.Bool
	ready    atomic.Bool

	pass     passTracker
	inFlight sync.Map // queue key -> running: when its reconcile started, its liveness limit
	// noticed holds the object keys in conflict or past maxObjects that a
	// pass of this term has already queued once.
	noticed sync.Map
}

// Ready reports whether start-up cleanup is done, the workers run and every
// informer has synced.
func (c *Controller) Ready() bool { return c.ready.Load() && c.informers.hasSynced() }

// NewController returns a controller for the config in force in the
// Reconciler's state.
func NewController(opts Options) *Controller {
	if opts.Workers <= 0 {
		opts.Workers = 4
	}
	if opts.Resync <= 0 {
		opts.Resync = time.Minute
	}
	if opts.RetryBase <= 0 {
		opts.RetryBase = time.Second
	}
	if opts.RetryMax <= 0 {
		opts.RetryMax = 5 * time.Minute
	}
	if opts.ValuesCoalesce <= 0 {
		opts.ValuesCoalesce = defaultValuesCoalesce
	}
	if opts.Backoff == nil {
		opts.Backoff = NewBackoff(opts.RetryBase, opts.RetryMax)
	}
	c := &Controller{opts: opts, rec: opts.Reconciler, state: opts.Reconciler.State(), backoff: opts.Backoff, digests: plan.NewDigests()}
	c.queue = workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[string]{
		Name: "autox", MetricsProvider: opts.Metrics.queueProvider()})
	triggerKeys := func(cfg *config.Config) []observe.ListKey { return triggerInformerKeys(cfg, opts.Shard) }
	sourceKeys := func(cfg *config.Config) []observe.ListKey { return sourceInformerKeys(cfg, opts.Shard) }
	if w := opts.Watches; w != nil {
		c.informers = w.triggers.share(triggerKeys, c.onTriggerEvent)
		c.sources = w.sources.share(sourceKeys, c.onSourceEvent)
		if w.records != nil {
			c.opts.Records = w.records.share()
		}
	} else {
		c.informers = newInformerSet(opts.Metadata, triggerKeys, c.onTriggerEvent, opts.Log)
		c.sources = newInformerSet(opts.Metadata, sourceKeys, c.onSourceEvent, opts.Log)
	}
	c.bulk = newBulkReads(c.informers.informer)
	c.rec.Observer().SetBulk(c.bulk)
	c.index.Store(buildIndex(c.Config()))
	opts.Metrics.setSuspended(c.Config())
	return c
}

// Config returns the config in force.
func (c *Controller) Config() *config.Config { return c.state.Config() }

// Run cleans up releases of removed specs, then reconciles every spec on
// informer events and every Resync, until ctx ends. It then starts no new
// spec, lets running reconciles finish (up to ShutdownTimeout) and returns.
// When Fenced closes, running reconciles are cancelled at once.
func (c *Controller) Run(ctx context.Context) error {
	// A process that no longer leads knows nothing of the releases.
	defer c.opts.Metrics.endTerm()
	// Its reconciles in flight count for every pass of the state.
	defer c.state.track(&c.inFlight)()
	// From the stop on, no worker starts a reconcile, whatever is queued.
	stopStopping := context.AfterFunc(ctx, func() { c.stopping.Store(true) })
	defer stopStopping()
	// Whichever way Run returns, the queue and the informers (a config
	// applied during start-up cleanup may have started some) end with it.
	defer c.informers.stopAll()
	defer c.sources.stopAll()
	defer c.queue.ShutDown()
	// Helm operations run on their own context: a stop must not cut a chart
	// group in half. It is cancelled only when the shutdown timeout runs out,
	// or when the term is fenced.
	workCtx, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWork()
	runDone := make(chan struct{})
	defer close(runDone)
	go c.boundWork(ctx, runDone, cancelWork)

	// The informers list while the record index does (at 10,000 triggers
	// each LIST takes about half a second). Until the workers start, their
	// events only queue keys, and their initial lists queue nothing.
	c.informers.sync(ctx, c.Config())
	c.sources.sync(ctx, c.Config())
	if c.opts.Records != nil {
		defer c.opts.Records.Stop()
		c.opts.Records.Watch(ctx, c.state.GCNamespaces())
		syncCtx, cancelSync := context.WithTimeout(ctx, recordIndexSync)
		if !c.opts.Records.WaitForSync(syncCtx) && ctx.Err() == nil {
			c.opts.Log.Warn().Dur("waited", recordIndexSync).Msg("the release record index has not synced; unsynced namespaces are read with live LISTs")
		}
		cancelSync()
	}
	c.cleanupOnStart(ctx, workCtx)
	if ctx.Err() != nil {
		return nil // stopped before the first pass
	}
	// Retries a previous term scheduled went with its queue: schedule them
	// again, when they are due, or the pass would leave them waiting.
	now := time.Now()
	for name, at := range c.backoff.due() {
		c.queue.AddAfter(name, at.Sub(now))
	}
	var workers sync.WaitGroup
	for i := 0; i < c.opts.Workers; i++ {
		workers.Add(1)
		go func() {
			defer workers.Done()
			for c.processNext(workCtx) {
			}
		}()
	}

	// The first pass lists the triggers after the informers have (a moment
	// to) list them too: their initial objects make no events, so a change
	// is then either in the pass's LIST or a watch event. An informer that
	// cannot sync (a resource not served) does not hold the pass back long.
	syncCtx, cancelSync := context.WithTimeout(ctx, 10*time.Second)
	c.informers.waitForSync(syncCtx)
	cancelSync()
	c.runPass(ctx)
	c.ready.Store(true)
	ticker := time.NewTicker(c.opts.Resync)
	defer ticker.Stop()
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case <-ticker.C:
			c.runPass(ctx)
		}
	}

	c.opts.Log.Info().Msg("stopping: no new reconcile starts, waiting for running ones")
	c.queue.ShutDown()
	workers.Wait()
	return nil
}

// boundWork cancels the work context when the term is fenced, or when a
// stop has waited ShutdownTimeout for running reconciles; it returns when
// Run does.
func (c *Controller) boundWork(ctx context.Context, runDone <-chan struct{}, cancelWork context.CancelFunc) {
	select {
	case <-c.opts.Fenced:
		cancelWork()
		return
	case <-runDone:
		return
	case <-ctx.Done():
	}
	timeout := time.NewTimer(c.opts.ShutdownTimeout)
	defer timeout.Stop()
	select {
	case <-timeout.C:
		c.opts.Log.Warn().Dur("shutdownTimeout", c.opts.ShutdownTimeout).Msg("reconciles still running at the shutdown timeout; cancelling them")
		cancelWork()
	case <-c.opts.Fenced:
		cancelWork()
	case <-runDone:
	}
}

// Stuck reports a reconcile that has run far longer than its Helm operations
// may take: each is bounded by its release spec's timeout (--helm-timeout
// by default), so this means a hung worker. The limit is the one the
// reconcile started with, from the config it runs under: a reload that
// shortens a timeout does not shorten the operations already running.
// Bad configs or charts never make a reconcile hang; they fail fast.
func (c *Controller) Stuck(now time.Time) error {
	var stuck error
	c.inFlight.Range(func(k, v any) bool {
		name, r := k.(string), v.(running)
		if d := now.Sub(r.started); d > r.limit {
			what := "spec " + name
			if spec, obj := parseKey(name); !obj.IsZero() {
				what = fmt.Sprintf("object %s of spec %s", obj, spec)
			}
			stuck = fmt.Errorf("the reconcile of %s has run for %s (limit %s)", what, d.Round(time.Second), r.limit)
			return false
		}
		return true
	})
	return stuck
}

// running is a reconcile in flight: when it started, and how long it may
// run before it counts as stuck.
type running struct {
	started time.Time
	limit   time.Duration
}

// livenessLimit bounds a reconcile of key under cfg: two rounds of every
// operation it may run (one per release spec, and one for the removals),
// each bounded by the longest unlock age of the spec, and a minute more.
func livenessLimit(cfg *config.Config, key string, d config.PolicyDefaults) time.Duration {
	n := 1
	s := cfg.Specs[specOf(key)]
	if s != nil {
		n += len(s.ReleaseSpecs)
	}
	return time.Duration(2*n)*staleAfter(s, d) + time.Minute
}

// busyRetry is how soon a key whose spec was busy is tried again.
const busyRetry = 500 * time.Millisecond

func (c *Controller) processNext(ctx context.Context) bool {
	name, shutdown := c.queue.Get()
	if shutdown {
		return false
	}
	defer c.queue.Done(name)
	if c.stopping.Load() {
		return true // stopping: drain without starting anything
	}
	// The reconcile runs under the config read here, and its liveness
	// limit comes from the same config. It counts as in flight from before
	// that read: a pass (of any shard) that lists after a config change
	// must see it begun before the change, or it could forget a namespace
	// the change dropped and this reconcile, under the old config, may
	// still write to (ConfigState.Collected).
	started := time.Now()
	c.inFlight.Store(name, running{started: started, limit: time.Duration(math.MaxInt64)})
	cfg := c.Config()
	if !c.opts.Shard.OwnsKey(cfg, name) {
		// Another shard's: its holder reconciles it.
		c.inFlight.Delete(name)
		c.pass.done(name)
		return true
	}
	c.inFlight.Store(name, running{started: started, limit: livenessLimit(cfg, name, c.rec.Observer().Defaults())})
	follow, err := c.rec.ReconcileUnder(ctx, cfg, name)
	c.inFlight.Delete(name)
	if errors.Is(err, ErrBusy) {
		c.queue.AddAfter(name, busyRetry)
		return true // not done: the pass waits for it
	}
	for _, k := range follow {
		c.queue.Add(k)
	}
	c.pass.done(name)
	switch {
	case err == nil:
		c.forget(name)
	case ctx.Err() != nil:
		// Cancelled by a stop past its timeout or by a fenced term: the
		// next leader, or the next term, starts from a live read anyway.
	default:
		c.retryLater(name)
	}
	return true
}

// staleAfter is the longest unlock age of spec's release specs (the
// defaults' for none): what bounds one of its operations.
func staleAfter(spec *config.Spec, d config.PolicyDefaults) time.Duration {
	longest := d.Of(nil).StaleAfter()
	if spec == nil {
		return longest
	}
	for _, rs := range spec.ReleaseSpecs {
		longest = max(longest, d.Of(rs).StaleAfter())
	}
	return longest
}
