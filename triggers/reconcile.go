package triggers

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rs/zerolog"
	"k8s.io/client-go/tools/record"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/helmops"
	"github.com/autox-dev/autox/helmops/chartsource"
	"github.com/autox-dev/autox/triggers/apply"
	"github.com/autox-dev/autox/triggers/observe"
	"github.com/autox-dev/autox/triggers/plan"
)

// Helm is the part of helmops.Manager that a reconcile uses: the reads of
// observation and the writes of applying, as autox or, through As, as a
// release's service account.
type Helm interface {
	observe.Releases
	apply.Helm
	As(ctx context.Context, sa helmops.ServiceAccount) (*helmops.Manager, error)
}

// ReconcilerOptions is everything a Reconciler needs.
type ReconcilerOptions struct {
	Helm     Helm
	Charts   chartsource.ChartSource
	Triggers observe.Triggers
	// Inventory lists release records; selector specs need it to admit
	// objects within maxObjects when no pass has done so yet.
	Inventory observe.Records
	// Sources reads the Secrets and ConfigMaps of valuesFrom entries; nil
	// fails every release spec that has some.
	Sources observe.ValuesSources
	// Attempts reads and writes the failed attempts of release specs with
	// remediation retries (attempts.Store, with the term's fenced client);
	// nil fails every such release spec.
	Attempts Attempts
	// State holds the config in force (it changes on reload) and the
	// namespaces garbage collection looks in.
	State *ConfigState
	// Defaults are the policies of release specs that set none:
	// --helm-timeout (also what a pending release's unlock age is measured
	// from, DESIGN §5) and --max-history.
	Defaults config.PolicyDefaults
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	Log zerolog.Logger
	// Metrics and Events are optional.
	Metrics *Metrics
	Events  record.EventRecorder
	// DefaultServiceAccount is --default-service-account: the account, in
	// each release's namespace, of releases that name none ("" for autox).
	DefaultServiceAccount string
	// Managed, if set, records the namespaces this instance manages in the
	// cluster (DESIGN §4); installs wait until their namespace is recorded,
	// and a reconcile records it before them.
	Managed *ManagedSet
	// Recorded, without Managed, is the record as read once (plan, which
	// writes nothing); nil with neither: no record is kept, nothing waits.
	Recorded *plan.ManagedNamespaces
}

// Attempts reads and writes the records of failed attempts (attempts.Store).
type Attempts interface {
	observe.AttemptReader
	apply.AttemptWriter
}

// Reconciler runs one queue key through observe → plan → apply: the
// Observer reads, plan.Decide decides, the Applier acts, around again while
// an act changes what the decision read (run). It holds no per-spec state
// beyond what its Observer shares with the pass: every call starts from a
// live read of the cluster.
type Reconciler struct {
	opts     ReconcilerOptions
	observer *observe.Observer
	applier  *apply.Applier
	locks    specLocks
}

// NewReconciler returns a Reconciler with everything it needs.
func NewReconciler(opts ReconcilerOptions) *Reconciler {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	r := &Reconciler{opts: opts}
	var ops apply.Operations
	if opts.Metrics != nil {
		ops = opts.Metrics
	}
	var managed func() *plan.ManagedNamespaces
	switch {
	case opts.Managed != nil:
		managed = opts.Managed.Recorded
	case opts.Recorded != nil:
		managed = func() *plan.ManagedNamespaces { return opts.Recorded }
	}
	r.observer = observe.New(observe.Options{Releases: opts.Helm, Records: opts.Inventory, Triggers: opts.Triggers,
		Sources: opts.Sources, Charts: opts.Charts, GCNamespaces: opts.State.GCNamespaces, Managed: managed, Defaults: opts.Defaults,
		Attempts: opts.Attempts, Now: opts.Now, Log: opts.Log, DefaultServiceAccount: opts.DefaultServiceAccount, Departed: opts.State.Departed})
	r.applier = apply.New(apply.Options{Helm: opts.Helm, Charts: r.observer.LoadChart,
		ConfigDir: func() string { return opts.State.Config().Dir }, Attempts: opts.Attempts, Events: opts.Events, Operations: ops, Log: opts.Log,
		Impersonate: func(ctx context.Context, sa helmops.ServiceAccount) (apply.Helm, error) { return opts.Helm.As(ctx, sa) }})
	return r
}

// Managed is the record of managed namespaces the Reconciler keeps, or nil.
func (r *Reconciler) Managed() *ManagedSet { return r.opts.Managed }

// State is the config state the Reconciler decides with.
func (r *Reconciler) State() *ConfigState { return r.opts.State }

// Observer is what the Reconciler reads with; the periodic pass reads
// through it too, so that both share what one observation tells the next
// (the claim index, chart identities, selector admissions).
func (r *Reconciler) Observer() *observe.Observer { return r.observer }

// ErrBusy says the key was not reconciled because another key of its spec
// was being reconciled that may not run beside it (see specLocks): the
// caller tries again shortly; it is no failure.
var ErrBusy = errors.New("another reconcile of this spec is running")

// ErrStepFailed marks a failure of one release spec; the others went ahead.
var ErrStepFailed = apply.ErrStepFailed

// Reconcile observes one queue key, decides and applies the steps. A
// failing release step does not stop the others; the returned error (if
// any) makes the caller retry the key with backoff, and the retry starts
// again from a live read. follow are keys the caller must reconcile next:
// a selector spec's own key (its sweep) returns one per object, and an
// object key of a spec that lost its selector hands over to the spec's key.
func (r *Reconciler) Reconcile(ctx context.Context, key string) (follow []string, err error) {
	return r.ReconcileUnder(ctx, r.opts.State.Config(), key)
}

// ReconcileUnder is Reconcile under cfg, the config in force when the
// caller read it: one read of the config for the whole reconcile, so that
// what bounds it (Controller.Stuck) is what it runs with. A reload
// meanwhile is the next reconcile's: a config change queues the keys it
// touches again.
func (r *Reconciler) ReconcileUnder(ctx context.Context, cfg *config.Config, key string) (follow []string, err error) {
	start := time.Now()
	specName, obj := parseKey(key)
	// A key whose spec is busy is tried again shortly rather than waited
	// for: a waiting worker would start its Helm work after a stop, and
	// one busy spec would hold every worker.
	lock := r.locks.of(specName)
	if obj.IsZero() {
		if !lock.TryLock() {
			return nil, ErrBusy
		}
		defer lock.Unlock()
	} else {
		if !lock.TryRLock() {
			return nil, ErrBusy
		}
		defer lock.RUnlock()
	}
	spec := cfg.Specs[specName]
	switch {
	case !obj.IsZero() && (spec == nil || !spec.Trigger.IsSelector()):
		// The spec left the config or names one trigger now: its own key
		// decides about every release it has.
		return []string{specName}, nil
	case obj.IsZero() && spec != nil && spec.Trigger.IsSelector():
		return r.sweep(ctx, cfg, specName, start)
	}
	o, err := r.observer.Observe(ctx, cfg, specName, obj)
	if err != nil {
		r.opts.Log.Error().Err(err).Str("spec", specName).Str("object", obj.String()).Msg("cannot decide; nothing changed")
		r.count(specName, err, start)
		// Nothing could be read: every release spec of the key is failing.
		ids := r.releaseSpecIDs(specName)
		all := make(map[string]outcome, len(ids))
		for _, id := range ids {
			all[id] = outcome{failing: true}
		}
		r.opts.Metrics.releaseSpecOutcomes(specName, obj, ids, all)
		return nil, err
	}
	trigger, err := r.run(ctx, o, start, func(ctx context.Context) (*plan.Observation, error) {
		return r.observer.Observe(observe.LiveOnly(ctx), cfg, specName, obj)
	})
	if !obj.IsZero() && !trigger.Wanted() && trigger != plan.TriggerConflict {
		r.observer.Admissions().Leave(specName, obj)
	}
	return nil, err
}

// sweep reconciles a selector spec as a whole: its releases that name no
// object are removed, and every object it lists or has releases for is
// handed back to be reconciled on its own key. A listing that fails
// decides nothing.
func (r *Reconciler) sweep(ctx context.Context, cfg *config.Config, specName string, start time.Time) ([]string, error) {
	objs, unattributed, err := r.observer.SelectorObjects(ctx, cfg, specName)
	if err != nil {
		r.opts.Log.Error().Err(err).Str("spec", specName).Msg("cannot list the objects of a selector spec; nothing changed")
		r.count(specName, err, start)
		return nil, err
	}
	follow := make([]string, 0, len(objs))
	for _, o := range objs {
		follow = append(follow, ObjectKey(specName, o))
	}
	_, err = r.run(ctx, unattributed, start, nil)
	return follow, err
}

// run is the loop of one reconcile: decide what o observed, act, and go
// round again while an act changed what the decision read, in the same
// reconcile (never left to the next pass):
//   - a step waits for its namespace to be recorded (DESIGN §4): the record
//     is synced, once, and the plan decided again from it; a step still
//     waiting then fails, applied unrecorded never;
//   - the first act ran only the leading removals (apply.Acts): what they
//     freed, a name or objects, is another release spec's at once, so the
//     key is observed again (reobserve; nil when there is nothing to read
//     again) and decided anew;
//   - else every step was applied: done.
//
// It returns the trigger's state in the last plan.
func (r *Reconciler) run(ctx context.Context, o *plan.Observation, start time.Time, reobserve func(context.Context) (*plan.Observation, error)) (plan.TriggerState, error) {
	acts := r.applier.Start(reobserve != nil)
	recorded := false
	var p plan.Plan
	for {
		p = plan.Decide(*o)
		if p.Unrecorded() && !recorded && r.opts.Managed != nil {
			// Recorded first, and decided again from the record as written.
			recorded = true
			_ = r.opts.Managed.Sync(ctx) // its error is the record's: the waiting steps say it
			o.Managed = r.opts.Managed.Recorded()
			continue
		}
		if !acts.Act(ctx, p) {
			break
		}
		again, err := reobserve(ctx)
		if err != nil {
			// The rest waits for the retry, which observes anew.
			acts.Fail(fmt.Errorf("cannot decide again after the removals: %w", err))
			break
		}
		o = again
	}
	err := acts.Err()
	steps, stepErrs := acts.Done()
	r.count(p.Spec, err, start)
	r.opts.Metrics.releaseSpecOutcomes(p.Spec, p.Object, r.releaseSpecIDs(p.Spec), outcomes(p.Failed, steps, stepErrs))
	ev := r.opts.Log.Debug()
	if err != nil {
		ev = r.opts.Log.Error().Err(err)
	}
	if !p.Object.IsZero() {
		ev = ev.Str("object", p.Object.String())
	}
	ev.Str("spec", p.Spec).Dur("duration", time.Since(start)).Int("releases", len(p.Steps)).Msg("spec reconciled")
	return p.Trigger, err
}

// count records one reconcile of a spec, failed ones included (a trigger
// that cannot be read is what "a spec keeps failing" alerts are for).
func (r *Reconciler) count(specName string, err error, start time.Time) {
	if r.opts.Metrics == nil {
		return
	}
	if _, inConfig := r.opts.State.Config().Specs[specName]; !inConfig && err == nil {
		// The spec left the config and its releases are gone: its series go
		// too, so label values stay bounded by the config.
		r.opts.Metrics.forgetSpec(specName)
	} else {
		r.opts.Metrics.reconciles.WithLabelValues(specName, result(err)).Inc()
	}
	r.opts.Metrics.reconcileDuration.Observe(time.Since(start).Seconds())
}
