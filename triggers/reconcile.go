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
	// StaleAfter is how old a pending release must be before it is unlocked:
	// --helm-timeout plus a grace period (DESIGN §5).
	StaleAfter time.Duration
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
	// cluster (DESIGN §4); installs wait until their namespace is recorded.
	Managed *ManagedSet
}

// Attempts reads and writes the records of failed attempts (attempts.Store).
type Attempts interface {
	observe.AttemptRecords
	apply.AttemptRecords
}

// Reconciler runs one queue key through observe → plan → apply: the
// Observer reads, plan.Decide decides, the Applier acts. It holds no
// per-spec state beyond what its Observer shares with the pass: every call
// starts from a live read of the cluster.
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
	r.observer = observe.New(observe.Options{Releases: opts.Helm, Records: opts.Inventory, Triggers: opts.Triggers,
		Sources: opts.Sources, Charts: opts.Charts, GCNamespaces: opts.State.GCNamespaces, StaleAfter: opts.StaleAfter,
		Attempts: opts.Attempts, Now: opts.Now, Log: opts.Log, DefaultServiceAccount: opts.DefaultServiceAccount})
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
	// One read of the config for the whole reconcile: a reload meanwhile
	// is the next reconcile's.
	cfg := r.opts.State.Config()
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
	err = r.run(ctx, o, start, func(ctx context.Context) (*observe.Observed, error) {
		return r.observer.Observe(ctx, cfg, specName, obj)
	})
	if !obj.IsZero() && !o.State.Wanted() && o.State != plan.TriggerConflict {
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
	return follow, r.run(ctx, unattributed, start, nil)
}

// run decides an observation and applies its plan. The steps after the
// plan's removals were decided on the cluster before them: a name or
// objects a removal frees are another release spec's at once. So when a
// removal ran and other steps follow, the key is observed again (reobserve,
// nil when there is nothing to read again) and those steps decided anew,
// in the same reconcile: never left to the next pass.
func (r *Reconciler) run(ctx context.Context, o *observe.Observed, start time.Time, reobserve func(context.Context) (*observe.Observed, error)) error {
	// An install into a namespace the record of managed namespaces does
	// not hold yet waits (ManagedSet.Admit: a failure of its release spec),
	// and so does the removal that waits for it as its replacement; the
	// other steps go on. applied and stepErrs are the steps run and their
	// errors, for the outcomes.
	p := r.opts.Managed.Admit(ctx, plan.Decide(o.Observation))
	var errs, stepErrs []error
	var applied []plan.Step
	if n := plan.LeadingRemovals(p.Steps); n == 0 || reobserve == nil || (n == len(p.Steps) && len(p.Failed) == 0) {
		applied, stepErrs = p.Steps, r.applier.Apply(ctx, o, p.Steps)
		errs = append([]error{r.applier.Report(o, p)}, stepErrs...)
	} else {
		removalErrs, removed := r.applier.RemoveFirst(ctx, o, p.Steps)
		applied, stepErrs = p.Steps[:len(removalErrs)], removalErrs
		errs = removalErrs
		again, err := reobserve(ctx)
		if err != nil {
			// The rest waits for the retry, which observes anew.
			errs = append(errs, r.applier.Report(o, p), fmt.Errorf("cannot decide again after the removals: %w", err))
		} else {
			o, p = again, r.opts.Managed.Admit(ctx, plan.Decide(again.Observation))
			after := r.applier.ApplyAfter(ctx, o, p.Steps, removed)
			applied, stepErrs = append(applied, p.Steps...), append(stepErrs, after...)
			errs = append(append(errs, r.applier.Report(o, p)), after...)
		}
	}
	err := errors.Join(errs...)
	r.count(o.Spec, err, start)
	r.opts.Metrics.releaseSpecOutcomes(o.Spec, o.Object, r.releaseSpecIDs(o.Spec), outcomes(o.Observation, p.Failed, applied, stepErrs))
	ev := r.opts.Log.Debug()
	if err != nil {
		ev = r.opts.Log.Error().Err(err)
	}
	if !o.Object.IsZero() {
		ev = ev.Str("object", o.Object.String())
	}
	ev.Str("spec", o.Spec).Dur("duration", time.Since(start)).Int("releases", len(p.Steps)).Msg("spec reconciled")
	return err
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
