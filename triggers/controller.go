// Package triggers is the loop that keeps each spec's releases in line with
// its trigger object: informers and a periodic pass put spec names on one
// queue, workers take them off one at a time per spec, observe the spec (a
// live read of the trigger, its releases, its charts), let the pure package
// triggers/decide plan it, and act through helmops.
package triggers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/helmops"
	"github.com/autox-dev/autox/triggers/decide"
)

// Options configure a Controller.
type Options struct {
	// Reconciler decides and applies; its config state is the controller's.
	Reconciler *Reconciler
	Inventory  *helmops.Inventory
	Metadata   metadata.Interface
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

	// ValuesCoalesce is how long an event of a values source waits before
	// its keys are reconciled, so that sources changed together make one
	// upgrade (--values-coalesce; default 2s).
	ValuesCoalesce time.Duration
}

// Controller runs informers, the queue, the workers and the periodic pass.
type Controller struct {
	opts      Options
	rec       *Reconciler
	state     *ConfigState
	queue     workqueue.TypedDelayingInterface[string]
	informers *informerSet
	backoff   *Backoff

	// sources watch the values sources the config references; unlike
	// trigger informers they do not hold readiness back (a Secret autox
	// may not list is an error of its release spec, reported there).
	sources *informerSet

	index    atomic.Pointer[triggerIndex]
	stopping atomic.Bool
	ready    atomic.Bool

	pass     passTracker
	inFlight sync.Map // queue key -> time.Time its reconcile started
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
	c := &Controller{opts: opts, rec: opts.Reconciler, state: opts.Reconciler.State(), backoff: opts.Backoff}
	c.queue = workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[string]{
		Name: "autox", MetricsProvider: opts.Metrics.queueProvider()})
	c.informers = newInformerSet(opts.Metadata, triggerInformerKeys, c.onTriggerEvent, opts.Log)
	c.sources = newInformerSet(opts.Metadata, sourceInformerKeys, c.onSourceEvent, opts.Log)
	c.index.Store(buildIndex(c.Config()))
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

	c.cleanupOnStart(ctx, workCtx)
	if ctx.Err() != nil {
		return nil // stopped before the first pass: nothing else was started
	}

	c.informers.sync(ctx, c.Config())
	c.sources.sync(ctx, c.Config())
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
	cache.WaitForCacheSync(syncCtx.Done(), c.informers.hasSynced)
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

// cleanupOnStart uninstalls, before the first pass, the releases of specs and
// release specs the config no longer has (DESIGN §4). It retries until the
// inventory can be read: starting passes on a cluster we cannot read would
// only fail too.
func (c *Controller) cleanupOnStart(ctx, workCtx context.Context) {
	backoff := wait.Backoff{Duration: c.opts.RetryBase, Factor: 2, Jitter: 0.1, Steps: 1 << 30, Cap: c.opts.RetryMax}
	for {
		specs, err := c.orphanSpecs(ctx)
		if unread := helmops.FailedNamespaces(err); unread != nil {
			// The namespaces that could be read are cleaned up now; the
			// passes find the others' orphans once they can be read.
			c.opts.Log.Error().Err(err).Msg("cannot list autox releases of some namespaces for start-up cleanup; cleaning up the others")
			err = nil
		}
		if err == nil {
			for _, name := range specs {
				if ctx.Err() != nil {
					return // stopping: start nothing new
				}
				// The workers are not running yet, so no other reconcile of
				// this spec can overlap; an error here is retried with backoff.
				follow, err := c.rec.Reconcile(workCtx, name)
				if err != nil {
					c.retryLater(name)
				}
				for _, k := range follow {
					c.queue.Add(k)
				}
			}
			return
		}
		c.opts.Log.Error().Err(err).Msg("cannot list autox releases for start-up cleanup; retrying")
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff.Step()):
		}
	}
}

func (c *Controller) orphanSpecs(ctx context.Context) ([]string, error) {
	return OrphanSpecs(ctx, c.opts.Inventory, c.state)
}

// runPass starts a pass over every spec. It reads the cluster with a number
// of requests that does not grow with the number of specs or objects: one
// metadata LIST of release records per managed namespace and one live LIST
// per trigger (resource, namespace, selector). A spec, or an object of a
// selector spec, those prove in sync (InSync) is done; every other one, and
// every spec that still has releases the config does not want, is queued
// for the full reconcile.
func (c *Controller) runPass(ctx context.Context) {
	if ctx.Err() != nil {
		return // stopping: a pass that races the stop starts nothing
	}
	started := time.Now()
	cfg := c.Config()
	gcNamespaces := c.state.GCNamespaces()
	names := cfg.SpecNames()
	// What the listing below can speak for: nothing a reconcile still
	// running under an older config may write later.
	safeSince := c.oldestInFlight(started)
	requestsBefore := c.requestCount()
	var queued keyList
	add := queued.add
	defer func() {
		keys := queued.keys
		if ctx.Err() != nil {
			return // stopping: queue nothing
		}
		c.pass.start(keys, started, func(_ time.Time, took time.Duration) {
			c.opts.Log.Info().Int("specs", len(names)).Int("queued", len(keys)).Dur("duration", took).
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
	}()

	recs, err := c.opts.Inventory.Managed(ctx, gcNamespaces)
	if ctx.Err() != nil {
		return // stopping: a failed read is no reason to queue anything
	}
	unread := helmops.FailedNamespaces(err)
	if err != nil && unread == nil {
		c.opts.Log.Error().Err(err).Msg("cannot list autox release records; reconciling every spec in full")
		for _, name := range names {
			add(name)
		}
		return
	}
	if err != nil {
		c.opts.Log.Error().Err(err).Msg("cannot list autox release records of some namespaces; their specs get a full reconcile")
	}
	c.collectDropped(cfg, gcNamespaces, unread, recs, safeSince)
	if c.opts.Metrics != nil {
		byStatus := map[string]int{}
		for _, r := range recs {
			byStatus[r.Status]++
		}
		c.opts.Metrics.setReleases(byStatus)
	}
	for _, name := range decide.OrphanSpecs(cfg, recs) {
		// A selector spec's records are looked at per object below, and
		// only what cannot be tied to an object needs the spec's sweep.
		if spec := cfg.Specs[name]; spec == nil || !spec.Trigger.IsSelector() {
			add(name)
		}
	}
	bySpec := map[string][]helmops.Record{}
	for _, r := range recs {
		bySpec[r.Spec] = append(bySpec[r.Spec], r)
	}
	observed := c.listTriggers(ctx, cfg)
	if ctx.Err() != nil {
		return
	}
	// Values sources are read live, each object once for the whole pass.
	sources := newSourceCache(c.rec.opts.Sources)
	claims := c.rec.claimIndex(cfg)
	for _, name := range names {
		spec := cfg.Specs[name]
		if spec.Trigger.IsSelector() {
			c.passSelector(ctx, cfg, claims, sources, name, observed, bySpec[name], unread, add)
			continue
		}
		objects, listed := observed[keyFor(spec.Trigger)]
		t := spec.Trigger
		if obs := objects[t.Name]; listed && obs.Found &&
			len(claims.Claimants(t.Group, t.Resource, decide.Object{Namespace: t.Namespace, Name: t.Name}, obs.Labels)) > 1 {
			c.noticeOnce(name, add) // in conflict: nothing to do but say so, once
			continue
		}
		if listed && !usesAny(spec, unread) && decide.InSync(name, spec, decide.Object{}, objects[spec.Trigger.Name], bySpec[name], c.chartIDs(spec, cfg.Dir), sources.sourcesOf(ctx, spec)) {
			continue
		}
		add(name)
	}
}

// passSelector is the pass of one selector spec: from its listings and its
// records, the objects that need a reconcile of their own. Objects past
// maxObjects or in conflict are reconciled once per term (which records
// their Event) and then left alone: nothing can change for them until an
// event or a new config says otherwise. A listing that failed queues the
// spec's sweep, which reports it and retries; it removes nothing.
func (c *Controller) passSelector(ctx context.Context, cfg *config.Config, claims *decide.ClaimIndex, sources *sourceCache, name string, observed map[informerKey]map[string]decide.Trigger,
	recs []helmops.Record, unread map[string]bool, add func(string)) {
	spec := cfg.Specs[name]
	t := spec.Trigger
	listed := map[decide.Object]decide.Trigger{}
	for _, k := range keysFor(cfg, t) {
		objs, ok := observed[k]
		if !ok {
			add(name)
			return
		}
		for n, obs := range objs {
			listed[decide.Object{Namespace: k.Namespace, Name: n}] = obs
		}
	}
	byObject := map[decide.Object][]helmops.Record{}
	withReleases := map[decide.Object]bool{}
	for _, r := range recs {
		o := decide.Object{Namespace: r.ObjectNamespace, Name: r.ObjectName}
		byObject[o] = append(byObject[o], r)
		withReleases[o] = !o.IsZero()
	}
	admitted := c.rec.admit(cfg, name, listed, withReleases)
	ids := c.chartIDs(spec, cfg.Dir)
	var overLimit, conflicts int
	for o, obs := range listed {
		labelled := decide.Object{Namespace: o.Namespace, Name: decide.ObjectLabel(o.Name)}
		objRecs := byObject[labelled]
		delete(byObject, labelled)
		key := ObjectKey(name, o)
		if len(claims.Claimants(t.Group, t.Resource, o, obs.Labels)) > 1 {
			conflicts++
			c.noticeOnce(key, add)
			continue
		}
		if st, _ := decide.Evaluate(t, obs); st.Wanted() && !admitted[o] {
			overLimit++
			c.noticeOnce(key, add)
			continue
		}
		forObj, err := spec.ForObject(name, o.Namespace, o.Name)
		if err == nil && !usesAny(forObj, unread) && decide.InSync(name, forObj, o, obs, objRecs, ids, sources.sourcesOf(ctx, forObj)) {
			continue
		}
		add(key)
	}
	// Records of objects the listing did not return: deleted, or no longer
	// selected. Each object's own reconcile reads it by name before
	// anything is removed.
	for o := range byObject {
		switch {
		case o.IsZero():
			add(name) // releases from before the spec had a selector (OrphanSpecs queues it too)
		case decide.ObjectLabelIsName(o.Name):
			add(ObjectKey(name, o))
		default:
			add(name) // a long name: the sweep finds it in the release's values
		}
	}
	c.opts.Metrics.setObjects(name, len(admitted), overLimit, conflicts)
}

// noticeOnce queues a key in conflict or past maxObjects the first time
// a pass of this term sees it, so that its reconcile records the Event,
// and not again: a pass stays O(1) in such objects.
func (c *Controller) noticeOnce(key string, add func(string)) {
	if _, seen := c.noticed.LoadOrStore(key, true); !seen {
		add(key)
	}
}

// usesAny reports whether one of spec's releases lives in a namespace of set.
func usesAny(spec *config.Spec, set map[string]bool) bool {
	for _, rs := range spec.ReleaseSpecs {
		if set[rs.Namespace] {
			return true
		}
	}
	return false
}

// collectDropped forgets the dropped namespaces a listing read and found
// without releases of ours.
func (c *Controller) collectDropped(cfg *config.Config, listed []string, unread map[string]bool, recs []helmops.Record, safeSince time.Time) {
	used := map[string]bool{}
	for _, r := range recs {
		used[r.Namespace] = true
	}
	var empty []string
	for _, ns := range listed {
		if !cfg.Manages(ns) && !used[ns] && !unread[ns] {
			empty = append(empty, ns)
		}
	}
	c.state.Collected(empty, safeSince)
}

// oldestInFlight is when the oldest running reconcile started, or now.
func (c *Controller) oldestInFlight(now time.Time) time.Time {
	oldest := now
	c.inFlight.Range(func(_, v any) bool {
		if t := v.(time.Time); t.Before(oldest) {
			oldest = t
		}
		return true
	})
	return oldest
}

// retryLater queues a failed spec again after its backoff.
func (c *Controller) retryLater(name string) {
	c.queue.AddAfter(name, c.backoff.failed(name, time.Now()))
}

// forget ends a spec's backoff after a successful reconcile.
func (c *Controller) forget(name string) { c.backoff.succeeded(name) }

func (c *Controller) inBackoff(name string, now time.Time) bool { return c.backoff.waiting(name, now) }

// Backoff is the capped exponential retry delay of each failing spec, and
// when its next retry is due. The periodic pass leaves a spec alone until
// then; events and config changes still reconcile it at once.
type Backoff struct {
	limiter workqueue.TypedRateLimiter[string]
	retryAt sync.Map // spec name -> time.Time
}

// NewBackoff returns a Backoff whose delays start at base and double up to max.
func NewBackoff(base, max time.Duration) *Backoff {
	if base <= 0 {
		base = time.Second
	}
	if max <= 0 {
		max = 5 * time.Minute
	}
	return &Backoff{limiter: workqueue.NewTypedItemExponentialFailureRateLimiter[string](base, max)}
}

// failed records a failure and returns the delay before the retry.
func (b *Backoff) failed(name string, now time.Time) time.Duration {
	d := b.limiter.When(name)
	b.retryAt.Store(name, now.Add(d))
	return d
}

func (b *Backoff) succeeded(name string) {
	b.limiter.Forget(name)
	b.retryAt.Delete(name)
}

// due returns when each spec in backoff is due for its retry.
func (b *Backoff) due() map[string]time.Time {
	out := map[string]time.Time{}
	b.retryAt.Range(func(k, v any) bool {
		out[k.(string)] = v.(time.Time)
		return true
	})
	return out
}

func (b *Backoff) waiting(name string, now time.Time) bool {
	v, ok := b.retryAt.Load(name)
	return ok && now.Before(v.(time.Time))
}

// listTriggers makes one live LIST per (resource, namespace, selector) the
// config's triggers use. A failed LIST leaves its key out: its specs then get the full
// reconcile, whose live GET reports the error and changes nothing.
func (c *Controller) listTriggers(ctx context.Context, cfg *config.Config) map[informerKey]map[string]decide.Trigger {
	out := map[informerKey]map[string]decide.Trigger{}
	failed := map[informerKey]bool{}
	for _, spec := range cfg.Specs {
		for _, k := range keysFor(cfg, spec.Trigger) {
			if _, done := out[k]; done || failed[k] {
				continue
			}
			objs, err := c.rec.opts.Triggers.List(ctx, k)
			if err != nil {
				c.opts.Log.Debug().Err(err).Msg("cannot list triggers; their specs get a full reconcile")
				failed[k] = true
				continue
			}
			out[k] = objs
		}
	}
	return out
}

// chartIDs names the charts of spec's release specs that can be named
// without fetching anything; one that cannot is left out.
func (c *Controller) chartIDs(spec *config.Spec, configDir string) map[string]decide.ChartID {
	ids := make(map[string]decide.ChartID, len(spec.ReleaseSpecs))
	for id, rs := range spec.ReleaseSpecs {
		if cid, ok := c.rec.charts.id(rs.Chart, configDir); ok {
			ids[id] = cid
		}
	}
	return ids
}

func (c *Controller) requestCount() int64 {
	if c.opts.RequestCount == nil {
		return 0
	}
	return c.opts.RequestCount()
}

// Stuck reports a reconcile that has run far longer than its Helm operations
// may take: each is bounded by --helm-timeout, so this means a hung worker.
// Bad configs or charts never make a reconcile hang; they fail fast.
func (c *Controller) Stuck(now time.Time) error {
	var stuck error
	cfg := c.Config()
	c.inFlight.Range(func(k, v any) bool {
		name, started := k.(string), v.(time.Time)
		n := 1
		if s := cfg.Specs[specOf(name)]; s != nil {
			n += len(s.ReleaseSpecs)
		}
		limit := time.Duration(2*n)*c.rec.opts.StaleAfter + time.Minute
		if d := now.Sub(started); d > limit {
			what := "spec " + name
			if spec, obj := parseKey(name); !obj.IsZero() {
				what = fmt.Sprintf("object %s of spec %s", obj, spec)
			}
			stuck = fmt.Errorf("the reconcile of %s has run for %s (limit %s)", what, d.Round(time.Second), limit)
			return false
		}
		return true
	})
	return stuck
}

// ApplyConfig puts a new, valid config in force: informers follow its
// triggers, and every spec the change touches is reconciled — removed specs
// and release specs uninstall through the same reconcile.
func (c *Controller) ApplyConfig(ctx context.Context, cfg *config.Config) config.Changes {
	old := c.state.Apply(cfg)
	c.index.Store(buildIndex(cfg))
	changes := config.Diff(old, cfg)
	c.informers.sync(ctx, cfg)
	c.sources.sync(ctx, cfg)
	touched := append(append(append([]string{}, changes.RemovedSpecs...), changes.AddedSpecs...), changes.ChangedSpecs...)
	for _, r := range changes.RemovedReleaseSpecs {
		touched = append(touched, r.Spec)
	}
	if !slices.Equal(old.Namespaces, cfg.Namespaces) {
		// A selector spec without a namespace covers every managed one:
		// objects of a namespace just added are its now.
		for _, name := range cfg.SpecNames() {
			if t := cfg.Specs[name].Trigger; t.IsSelector() && t.Namespace == "" {
				touched = append(touched, name)
			}
		}
	}
	for _, key := range append(touched, claimNeighbours(old, cfg, touched)...) {
		c.queue.Add(key)
	}
	return changes
}

// keyList collects queue keys, each once, in the order first added.
type keyList struct {
	keys []string
	seen map[string]bool
}

func (l *keyList) add(key string) {
	if l.seen[key] {
		return
	}
	if l.seen == nil {
		l.seen = map[string]bool{}
	}
	l.seen[key] = true
	l.keys = append(l.keys, key)
}

// claimNeighbours are the keys whose conflicts a change of the touched
// specs may start or end: a touched named trigger's object under every
// selector spec of its resource that covers its namespace, and, for a
// touched selector spec, every other spec of its resource (a selector
// spec by its sweep). Both configs count: a removed spec's claim ends.
func claimNeighbours(old, cfg *config.Config, touched []string) []string {
	var out keyList
	for _, name := range touched {
		for _, c := range []*config.Config{old, cfg} {
			spec := c.Specs[name]
			if spec == nil {
				continue
			}
			t := spec.Trigger
			for _, other := range cfg.SpecNames() {
				ot := cfg.Specs[other].Trigger
				if other == name || ot.Group != t.Group || ot.Resource != t.Resource {
					continue
				}
				switch {
				case !t.IsSelector() && ot.IsSelector():
					if cfg.Covers(ot, t.Namespace) {
						out.add(ObjectKey(other, decide.Object{Namespace: t.Namespace, Name: t.Name}))
					}
				case t.IsSelector():
					out.add(other)
				}
			}
		}
	}
	return out.keys
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
	c.inFlight.Store(name, time.Now())
	follow, err := c.rec.Reconcile(ctx, name)
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

// onTriggerEvent queues what an informer event on one object may change:
// the named specs whose trigger it is, and, for a selector informer, that
// object under each selector spec watching with it.
func (c *Controller) onTriggerEvent(k informerKey, namespace, name string) {
	idx := c.index.Load()
	if k.Selector == "" {
		for _, spec := range idx.specs[triggerKey{Group: k.GVR.Group, Resource: k.GVR.Resource, Namespace: namespace, Name: name}] {
			c.queue.Add(spec)
		}
		return
	}
	for _, spec := range idx.selectors[k] {
		c.queue.Add(ObjectKey(spec, decide.Object{Namespace: namespace, Name: name}))
	}
}

// triggerKey identifies a trigger object; the API version is not part of it.
type triggerKey struct {
	Group, Resource, Namespace, Name string
}

func keyOf(t config.Trigger) triggerKey {
	return triggerKey{Group: t.Group, Resource: t.Resource, Namespace: t.Namespace, Name: t.Name}
}

// triggerIndex maps trigger objects to the named specs that name them,
// selector informers to the selector specs that watch with them, and values
// source informers to the keys that use the source.
type triggerIndex struct {
	specs     map[triggerKey][]string
	selectors map[informerKey][]string
	sources   map[informerKey][]sourceUser
}

func buildIndex(cfg *config.Config) *triggerIndex {
	idx := &triggerIndex{specs: map[triggerKey][]string{}, selectors: map[informerKey][]string{}, sources: sourceUsers(cfg)}
	for _, name := range cfg.SpecNames() {
		t := cfg.Specs[name].Trigger
		if t.IsSelector() {
			for _, k := range keysFor(cfg, t) {
				idx.selectors[k] = append(idx.selectors[k], name)
			}
			continue
		}
		k := keyOf(t)
		idx.specs[k] = append(idx.specs[k], name)
	}
	return idx
}

func (k triggerKey) String() string {
	return fmt.Sprintf("%s.%s %s/%s", k.Resource, k.Group, k.Namespace, k.Name)
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
