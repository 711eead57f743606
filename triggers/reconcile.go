package triggers

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"helm.sh/helm/v3/pkg/chart"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/helmops"
	"github.com/autox-dev/autox/internal/redact"
	"github.com/autox-dev/autox/triggers/decide"
)

// Helm is the part of helmops.Manager that reconcile uses.
type Helm interface {
	SpecReleases(ctx context.Context, namespaces []string, spec string) ([]*helmops.Release, error)
	ObjectReleases(ctx context.Context, namespaces []string, spec string, obj decide.Object) ([]*helmops.Release, error)
	Lookup(ctx context.Context, namespace, name string) (*helmops.Release, error)
	NamesInUse(ctx context.Context, namespace string, names []string) (map[string]bool, error)
	Install(ctx context.Context, d helmops.Desired) (int, error)
	Upgrade(ctx context.Context, d helmops.Desired) (int, error)
	Reinstall(ctx context.Context, d helmops.Desired) (int, error)
	Uninstall(ctx context.Context, namespace, name string, hide *redact.Redactor) error
	Rollback(ctx context.Context, namespace, name string, toRevision int, hide *redact.Redactor) error
	// Instance is the autox instance whose releases these are.
	Instance() string
}

// Triggers reads trigger objects live: one object for a reconcile, every
// object of a (resource, namespace) for a pass. TriggerReader is the one
// implementation.
type Triggers interface {
	Get(ctx context.Context, t config.Trigger) (Observation, error)
	List(ctx context.Context, k informerKey) (map[string]decide.Trigger, error)
}

// ReconcilerOptions is everything a Reconciler needs.
type ReconcilerOptions struct {
	Helm     Helm
	Charts   helmops.ChartSource
	Triggers Triggers
	// Inventory lists release records; selector specs need it to admit
	// objects within maxObjects when no pass has done so yet.
	Inventory *helmops.Inventory
	// Sources reads the Secrets and ConfigMaps of valuesFrom entries; nil
	// fails every release spec that has some.
	Sources ValuesSources
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
}

// Reconciler observes one spec, decides with decide.Plan, and applies the
// steps, one spec at a time. It holds no per-spec state: every call starts
// from a live read of the cluster.
type Reconciler struct {
	opts   ReconcilerOptions
	charts *chartIdentities
	// admissions and claims serve selector specs: the objects each serves
	// within maxObjects, and who claims which object under the config in
	// force. locks keep a spec's own key apart from its objects' keys.
	admissions admissions
	claims     atomic.Pointer[decide.ClaimIndex]
	locks      specLocks
}

// NewReconciler returns a Reconciler with everything it needs.
func NewReconciler(opts ReconcilerOptions) *Reconciler {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Reconciler{opts: opts, charts: &chartIdentities{source: opts.Charts}}
}

// State is the config state the Reconciler decides with.
func (r *Reconciler) State() *ConfigState { return r.opts.State }

// ErrBusy says the key was not reconciled because another key of its spec
// was being reconciled that may not run beside it (see specLocks): the
// caller tries again shortly; it is no failure.
var ErrBusy = errors.New("another reconcile of this spec is running")

// ErrStepFailed marks a failure of one release spec; the others went ahead.
var ErrStepFailed = errors.New("release step failed")

// observed is one spec's observation, with what applying it needs beside
// the decision: the trigger's reference for Events and the local charts
// already loaded (a fresh load per operation; Helm mutates what it installs).
type observed struct {
	decide.Observation
	ref    *corev1.ObjectReference
	loaded map[string]*chart.Chart // release spec id -> chart
	// trigger is the trigger's state as decided (conflict and over-limit included).
	trigger decide.TriggerState
	// unattributed marks the releases of a selector spec that name no object.
	unattributed bool
	// sources reads each values source once for the whole observation.
	sources *sourceCache
	// failed are the release specs the plan could not decide (for metrics).
	failed []decide.Failure
}

// observe reads everything the decision for one spec needs, or for one
// object of a selector spec (obj not zero). An error means nothing can be
// decided (the trigger or every namespace unreadable); failures of one
// release spec are in its ReleaseSpecObservation.
func (r *Reconciler) observe(ctx context.Context, cfg *config.Config, specName string, obj decide.Object) (*observed, error) {
	spec := cfg.Specs[specName]
	if spec != nil && !obj.IsZero() {
		var err error
		if spec, err = spec.ForObject(specName, obj.Namespace, obj.Name); err != nil {
			return nil, err
		}
	}
	o := &observed{Observation: decide.Observation{Spec: specName, Config: spec, Object: obj, Instance: r.opts.Helm.Instance(),
		ReleaseSpecs: map[string]decide.ReleaseSpecObservation{}, StaleAfter: r.opts.StaleAfter},
		loaded: map[string]*chart.Chart{}, sources: newSourceCache(r.opts.Sources)}
	// A namespace whose records cannot be read fails the release specs
	// that live there; the others are decided from what could be read.
	var current []*helmops.Release
	var err error
	if obj.IsZero() {
		current, err = r.opts.Helm.SpecReleases(ctx, r.opts.State.GCNamespaces(), specName)
	} else {
		current, err = r.opts.Helm.ObjectReleases(ctx, r.opts.State.GCNamespaces(), specName, obj)
	}
	unread := helmops.FailedNamespaces(err)
	if err != nil && unread == nil {
		return nil, fmt.Errorf("cannot read releases of spec %s: %w", specName, err)
	}
	o.Current = current
	if len(unread) > 0 {
		var nerr *helmops.NamespacesError
		errors.As(err, &nerr)
		o.Unread = nerr.Failed
	}
	if spec == nil {
		o.Now = r.opts.Now()
		return o, nil
	}
	if !obj.IsZero() {
		o.OutOfScope = !cfg.Covers(cfg.Specs[specName].Trigger, obj.Namespace)
	}
	if !o.OutOfScope {
		// An object out of scope is decided from the config alone: its
		// namespace may no longer be readable at all.
		trig, err := r.opts.Triggers.Get(ctx, spec.Trigger)
		if err != nil {
			return nil, err
		}
		o.Trigger, o.ref = trig.Trigger, trig.Ref
	}
	t := spec.Trigger
	if o.Trigger.Found {
		// Who else claims this object is judged from its labels as read now.
		self := obj
		if self.IsZero() {
			self = decide.Object{Namespace: t.Namespace, Name: t.Name}
		}
		o.Claimants = r.claimIndex(cfg).Claimants(t.Group, t.Resource, self, o.Trigger.Labels)
	}
	o.trigger, _ = decide.TriggerOf(o.Observation)
	if !obj.IsZero() && o.trigger.Wanted() && len(o.Current) == 0 {
		if o.OverLimit, err = r.overLimit(ctx, cfg, specName, obj); err != nil {
			return nil, err
		}
		o.trigger, _ = decide.TriggerOf(o.Observation)
	}
	free := r.freeNames(ctx, o, spec)
	for _, id := range spec.ReleaseSpecIDs() {
		rs := spec.ReleaseSpecs[id]
		if o.Unread[rs.Namespace] != nil {
			continue
		}
		o.ReleaseSpecs[id] = r.observeReleaseSpec(ctx, o, id, rs, o.trigger.Wanted(), free[rs.Namespace+"/"+rs.ReleaseName], cfg.Dir)
	}
	o.Now = r.opts.Now()
	return o, nil
}

// ownsName reports whether one of the observed releases has the name
// release spec rs wants.
func ownsName(o *observed, rs *config.ReleaseSpec) bool {
	for _, c := range o.Current {
		if decide.Wants(rs, c.Namespace, c.Name) {
			return true
		}
	}
	return false
}

// freeNames are the names ("namespace/name") that release specs of spec
// want, that none of its releases has, and that no release record at all
// uses: one metadata LIST per namespace instead of a Lookup per release
// spec, the common case of a first install. A name it cannot vouch for
// (the LIST failed, or a record exists) is looked up as before.
func (r *Reconciler) freeNames(ctx context.Context, o *observed, spec *config.Spec) map[string]bool {
	byNS := map[string][]string{}
	for _, id := range spec.ReleaseSpecIDs() {
		rs := spec.ReleaseSpecs[id]
		if o.Unread[rs.Namespace] == nil && !ownsName(o, rs) {
			byNS[rs.Namespace] = append(byNS[rs.Namespace], rs.ReleaseName)
		}
	}
	free := map[string]bool{}
	for ns, names := range byNS {
		inUse, err := r.opts.Helm.NamesInUse(ctx, ns, names)
		if err != nil {
			continue
		}
		for _, n := range names {
			if !inUse[n] {
				free[ns+"/"+n] = true
			}
		}
	}
	return free
}

func (r *Reconciler) observeReleaseSpec(ctx context.Context, o *observed, id string, rs *config.ReleaseSpec, wanted, free bool, configDir string) decide.ReleaseSpecObservation {
	var ro decide.ReleaseSpecObservation
	if !free && !ownsName(o, rs) {
		// Not ours under this spec: is the name taken by someone else
		// (another tool, spec or autox instance)?
		other, err := r.opts.Helm.Lookup(ctx, rs.Namespace, rs.ReleaseName)
		if err != nil {
			ro.Err = err
			return ro
		}
		ro.Other = other
	}
	if !wanted {
		return ro // an unwanted trigger's releases go, whatever their sources hold
	}
	if len(rs.ValuesFrom) > 0 {
		if ro.Sources, ro.Err = o.sources.read(ctx, rs); ro.Err != nil {
			return ro
		}
	}
	ro.Chart = decide.ChartID{Name: rs.Chart.Name, Version: rs.Chart.Version}
	if rs.Chart.Path != "" {
		// Only a local chart must be read to learn its name and version;
		// a repository chart names them in the config, and is fetched
		// only when an operation needs it.
		ch, chartID, err := r.charts.load(ctx, rs.Chart, configDir)
		if err != nil {
			ro.Err = err
			return ro
		}
		ro.Chart, o.loaded[id] = chartID, ch
	}
	return ro
}

// Plan observes one queue key and decides, changing nothing: a spec, or
// one object of a selector spec; for a selector spec's own key, every
// object it lists or has releases for. Steps come in the order they are
// applied. An error returned with steps is the failure of some release specs
// only; an error without steps means nothing could be decided (e.g. the
// trigger read failed).
func (r *Reconciler) Plan(ctx context.Context, key string) ([]decide.Step, error) {
	return r.plan(ctx, r.opts.State.Config(), key)
}

func (r *Reconciler) plan(ctx context.Context, cfg *config.Config, key string) ([]decide.Step, error) {
	specName, obj := parseKey(key)
	if spec := cfg.Specs[specName]; obj.IsZero() && spec != nil && spec.Trigger.IsSelector() {
		return r.planSelector(ctx, cfg, specName)
	}
	o, err := r.observe(ctx, cfg, specName, obj)
	if err != nil {
		return nil, err
	}
	return r.decide(o)
}

// planSelector plans every object of a selector spec, and the spec's
// releases that name no object.
func (r *Reconciler) planSelector(ctx context.Context, cfg *config.Config, specName string) ([]decide.Step, error) {
	objs, unattributed, err := r.selectorObjects(ctx, cfg, specName)
	if err != nil {
		return nil, err
	}
	steps, err := r.decide(r.unattributed(specName, unattributed))
	errs := []error{err}
	for _, o := range objs {
		s, err := r.plan(ctx, cfg, ObjectKey(specName, o))
		steps = append(steps, s...)
		errs = append(errs, err)
	}
	return steps, errors.Join(errs...)
}

// unattributed is the observation of a selector spec's releases that name
// no object (made while the spec named one trigger): no object wants them,
// so they are decided like the releases of a removed spec.
func (r *Reconciler) unattributed(specName string, rels []*helmops.Release) *observed {
	return &observed{Observation: decide.Observation{Spec: specName, Instance: r.opts.Helm.Instance(), Current: rels,
		Now: r.opts.Now(), StaleAfter: r.opts.StaleAfter}, trigger: decide.TriggerSpecRemoved, unattributed: true}
}

// decide runs the pure plan and turns its failures into errors and Events.
func (r *Reconciler) decide(o *observed) ([]decide.Step, error) {
	res := decide.Plan(o.Observation)
	o.failed = res.Failed
	if o.unattributed {
		for i := range res.Steps {
			res.Steps[i].Reason = "made by this spec before it had a selector: no object's release"
		}
	}
	errs := []error{res.Incomplete}
	if res.Incomplete != nil {
		errs[0] = fmt.Errorf("%w: %w", ErrStepFailed, res.Incomplete)
	}
	for _, f := range res.Failed {
		err := fmt.Errorf("%w: release spec %s (release %s/%s): %w", ErrStepFailed, f.ReleaseSpec, f.Namespace, f.Release, f.Err)
		if !o.Object.IsZero() {
			err = fmt.Errorf("%w: object %s, release spec %s (release %s/%s): %w", ErrStepFailed, o.Object, f.ReleaseSpec, f.Namespace, f.Release, f.Err)
		}
		errs = append(errs, err)
		reason := "ReleaseFailed"
		var source *decide.SourceError
		if errors.As(f.Err, &source) {
			// A values source missing or unreadable: the release runs on as it is.
			reason = "ValuesSourceFailed"
		}
		r.event(o.ref, corev1.EventTypeWarning, reason, "%s", err.Error())
	}
	switch res.Trigger {
	case decide.TriggerConflict:
		r.event(o.ref, corev1.EventTypeWarning, "TriggerConflict", "%s", res.TriggerReason)
	case decide.TriggerOverLimit:
		r.event(o.ref, corev1.EventTypeWarning, "TriggerOverLimit", "spec %s: %s", o.Spec, res.TriggerReason)
	}
	return res.Steps, errors.Join(errs...)
}

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
	o, err := r.observe(ctx, cfg, specName, obj)
	if err != nil {
		r.opts.Log.Error().Err(err).Str("spec", specName).Str("object", obj.String()).Msg("cannot decide; nothing changed")
		r.count(specName, err, start)
		ids := r.releaseSpecIDs(specName)
		all := map[string]outcome{}
		for _, id := range ids {
			all[id] = outcome{failing: true}
		}
		r.opts.Metrics.releaseSpecOutcomes(specName, obj, ids, all)
		return nil, err
	}
	err = r.run(ctx, o, start)
	if !obj.IsZero() && !o.trigger.Wanted() && o.trigger != decide.TriggerConflict {
		r.admissions.leave(specName, obj)
	}
	return nil, err
}

// sweep reconciles a selector spec as a whole: its releases that name no
// object are removed, and every object it lists or has releases for is
// handed back to be reconciled on its own key. A listing that fails
// decides nothing.
func (r *Reconciler) sweep(ctx context.Context, cfg *config.Config, specName string, start time.Time) ([]string, error) {
	objs, unattributed, err := r.selectorObjects(ctx, cfg, specName)
	if err != nil {
		r.opts.Log.Error().Err(err).Str("spec", specName).Msg("cannot list the objects of a selector spec; nothing changed")
		r.count(specName, err, start)
		return nil, err
	}
	follow := make([]string, 0, len(objs))
	for _, o := range objs {
		follow = append(follow, ObjectKey(specName, o))
	}
	return follow, r.run(ctx, r.unattributed(specName, unattributed), start)
}

// run decides an observation and applies its steps.
func (r *Reconciler) run(ctx context.Context, o *observed, start time.Time) error {
	steps, planErr := r.decide(o)
	stepErrs := r.applyAll(ctx, o, steps)
	err := errors.Join(append([]error{planErr}, stepErrs...)...)
	r.count(o.Spec, err, start)
	r.opts.Metrics.releaseSpecOutcomes(o.Spec, o.Object, r.releaseSpecIDs(o.Spec), outcomes(o.Observation, o.failed, steps, stepErrs))
	ev := r.opts.Log.Debug()
	if err != nil {
		ev = r.opts.Log.Error().Err(err)
	}
	if !o.Object.IsZero() {
		ev = ev.Str("object", o.Object.String())
	}
	ev.Str("spec", o.Spec).Dur("duration", time.Since(start)).Int("releases", len(steps)).Msg("spec reconciled")
	return err
}

// stepsInParallel bounds the release operations of one spec that run at
// once. The workers bound the specs; this bounds what one spec with many
// release specs adds, so its share of the API server stays that of a few.
const stepsInParallel = 4

// applyAll applies one spec's steps and returns their errors in step order.
// Steps on different releases are independent, except that removals (the
// uninstalls the plan puts first) may free a name or objects that a release
// spec's step needs: so the leading uninstalls run first, then the other
// steps, each group stepsInParallel at a time. A step not yet started when
// ctx ends is not started (cancelled past the shutdown timeout or by a
// fenced term); the others finish.
func (r *Reconciler) applyAll(ctx context.Context, o *observed, steps []decide.Step) []error {
	errs := make([]error, len(steps))
	removals := 0
	for removals < len(steps) && steps[removals].Action == decide.ActionUninstall {
		removals++
	}
	for _, group := range [][2]int{{0, removals}, {removals, len(steps)}} {
		var wg sync.WaitGroup
		slots := make(chan struct{}, stepsInParallel)
		for i := group[0]; i < group[1]; i++ {
			slots <- struct{}{}
			if ctx.Err() != nil {
				<-slots
				s := steps[i]
				errs[i] = fmt.Errorf("release %s/%s not changed: %w", s.Namespace, s.Release, ctx.Err())
				continue
			}
			wg.Add(1)
			go func(i int) {
				defer func() { <-slots; wg.Done() }()
				if err := r.apply(ctx, o, steps[i]); err != nil {
					errs[i] = fmt.Errorf("%w: %w", ErrStepFailed, err)
				}
			}(i)
		}
		wg.Wait()
	}
	return errs
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

func (r *Reconciler) apply(ctx context.Context, o *observed, s decide.Step) error {
	log := r.opts.Log.With().Str("spec", s.Spec).Str("releaseSpec", s.ReleaseSpec).Str("release", s.Release).
		Str("namespace", s.Namespace).Str("action", string(s.Action)).Str("reason", s.Reason).Logger()
	start := time.Now()
	var (
		rev int
		err error
	)
	switch s.Action {
	case decide.ActionNone:
		log.Debug().Int("revision", s.Revision).Msg("nothing to do for release")
		return nil
	case decide.ActionWait:
		log.Info().Int("revision", s.Revision).Msg("waiting: release is locked by another operation")
		return nil
	case decide.ActionConflict:
		if o.trigger == decide.TriggerConflict {
			log.Warn().Msg("trigger object claimed by more than one spec; leaving its releases alone")
			return nil // one TriggerConflict Event says it for the object
		}
		log.Warn().Msg("release name taken by a release autox does not own; leaving it alone")
		r.event(o.ref, corev1.EventTypeWarning, "ReleaseConflict", "release %s/%s is not this autox's: %s; autox leaves it alone", s.Namespace, s.Release, s.Reason)
		return nil
	case decide.ActionInstall, decide.ActionUpgrade, decide.ActionReinstall:
		rev, err = r.install(ctx, o, s)
	case decide.ActionUninstall:
		err = r.opts.Helm.Uninstall(ctx, s.Namespace, s.Release, s.Hide)
		rev = s.Revision
	case decide.ActionRollback:
		err = r.opts.Helm.Rollback(ctx, s.Namespace, s.Release, s.RollbackTo, s.Hide)
		rev = s.Revision + 1
	default:
		return fmt.Errorf("unknown action %q", s.Action)
	}
	// helmops redacts its own errors; a chart load or anything else on the
	// way is redacted here, before the log and the Event see it.
	err = s.Hide.Error(err)
	ev := log.Info()
	if err != nil {
		ev = log.Error().Err(err)
	}
	ev.Int("revision", rev).Dur("duration", time.Since(start)).Msg("release " + string(s.Action))
	r.opts.Metrics.helmOperation(string(s.Action), err, time.Since(start))
	if err != nil {
		r.event(o.ref, corev1.EventTypeWarning, "ReleaseFailed", "%s of release %s/%s failed: %v", s.Action, s.Namespace, s.Release, err)
	} else {
		r.event(o.ref, corev1.EventTypeNormal, eventReasons[s.Action], "%s release %s/%s (revision %d): %s", pastTense[s.Action], s.Namespace, s.Release, rev, s.Reason)
	}
	return err
}

// install runs an install, upgrade or reinstall of the step's desired
// release, loading a repository chart first: the decision did not need it.
func (r *Reconciler) install(ctx context.Context, o *observed, s decide.Step) (int, error) {
	ref := o.Config.ReleaseSpecs[s.ReleaseSpec].Chart
	ch := o.loaded[s.ReleaseSpec]
	if ch == nil {
		var id decide.ChartID
		var err error
		if ch, id, err = r.charts.load(ctx, ref, r.opts.State.Config().Dir); err != nil {
			return 0, err
		}
		// Otherwise every pass would see a difference and upgrade again.
		if id.Name != ref.Name || id.Version != ref.Version {
			return 0, fmt.Errorf("chart %s %s from %s is named %s %s in its Chart.yaml; fix the repository or the config",
				ref.Name, ref.Version, ref.Repo, id.Name, id.Version)
		}
	}
	d := helmops.Desired{Spec: s.Spec, ReleaseSpec: s.ReleaseSpec, Object: o.Object, Name: s.Release, Namespace: s.Namespace, Chart: ch,
		Values: s.Desired.Values, Digest: s.Desired.Digest, Revision: s.Desired.Revision, Redact: s.Hide}
	switch s.Action {
	case decide.ActionInstall:
		return r.opts.Helm.Install(ctx, d)
	case decide.ActionUpgrade:
		return r.opts.Helm.Upgrade(ctx, d)
	default:
		return r.opts.Helm.Reinstall(ctx, d)
	}
}

var eventReasons = map[decide.Action]string{
	decide.ActionInstall: "ReleaseInstalled", decide.ActionUpgrade: "ReleaseUpgraded", decide.ActionReinstall: "ReleaseReinstalled",
	decide.ActionUninstall: "ReleaseUninstalled", decide.ActionRollback: "ReleaseRolledBack",
}

var pastTense = map[decide.Action]string{
	decide.ActionInstall: "installed", decide.ActionUpgrade: "upgraded", decide.ActionReinstall: "reinstalled",
	decide.ActionUninstall: "uninstalled", decide.ActionRollback: "rolled back",
}

// event records a Kubernetes Event on the trigger object, when there is one:
// a removed trigger has nothing to attach to, and logs cover it. Messages
// name releases and reasons, never values.
func (r *Reconciler) event(ref *corev1.ObjectReference, eventType, reason, format string, args ...interface{}) {
	if r.opts.Events == nil || ref == nil {
		return
	}
	r.opts.Events.Eventf(ref, eventType, reason, format, args...)
}
