package triggers

import (
	"context"
	"errors"
	"fmt"
	"sync"
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
	Lookup(ctx context.Context, namespace, name string) (*helmops.Release, error)
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

// ErrStepFailed marks a failure of one release spec; the others went ahead.
var ErrStepFailed = errors.New("release step failed")

// observed is one spec's observation, with what applying it needs beside
// the decision: the trigger's reference for Events and the local charts
// already loaded (a fresh load per operation; Helm mutates what it installs).
type observed struct {
	decide.Observation
	ref    *corev1.ObjectReference
	loaded map[string]*chart.Chart // release spec id -> chart
}

// observe reads everything the decision for one spec needs. An error means
// nothing can be decided (the trigger or every namespace unreadable);
// failures of one release spec are in its ReleaseSpecObservation.
func (r *Reconciler) observe(ctx context.Context, specName string) (*observed, error) {
	cfg := r.opts.State.Config()
	spec := cfg.Specs[specName]
	o := &observed{Observation: decide.Observation{Spec: specName, Config: spec, Instance: r.opts.Helm.Instance(),
		ReleaseSpecs: map[string]decide.ReleaseSpecObservation{}, StaleAfter: r.opts.StaleAfter},
		loaded: map[string]*chart.Chart{}}
	// A namespace whose records cannot be read fails the release specs
	// that live there; the others are decided from what could be read.
	current, err := r.opts.Helm.SpecReleases(ctx, r.opts.State.GCNamespaces(), specName)
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
	trig, err := r.opts.Triggers.Get(ctx, spec.Trigger)
	if err != nil {
		return nil, err
	}
	o.Trigger, o.ref = trig.Trigger, trig.Ref
	wanted, _ := decide.Evaluate(spec.Trigger, o.Trigger)
	for _, id := range spec.ReleaseSpecIDs() {
		rs := spec.ReleaseSpecs[id]
		if o.Unread[rs.Namespace] != nil {
			continue
		}
		o.ReleaseSpecs[id] = r.observeReleaseSpec(ctx, o, id, rs, wanted.Wanted(), cfg.Dir)
	}
	o.Now = r.opts.Now()
	return o, nil
}

func (r *Reconciler) observeReleaseSpec(ctx context.Context, o *observed, id string, rs *config.ReleaseSpec, wanted bool, configDir string) decide.ReleaseSpecObservation {
	var ro decide.ReleaseSpecObservation
	own := false
	for _, c := range o.Current {
		own = own || decide.Wants(rs, c.Namespace, c.Name)
	}
	if !own {
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
		return ro
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

// Plan observes one spec and decides, changing nothing. Steps come in the
// order they are applied. An error returned with steps is the failure of
// some release specs only; an error without steps means nothing could be
// decided (e.g. the trigger read failed).
func (r *Reconciler) Plan(ctx context.Context, specName string) ([]decide.Step, error) {
	o, err := r.observe(ctx, specName)
	if err != nil {
		return nil, err
	}
	steps, err := r.decide(o)
	return steps, err
}

// decide runs the pure plan and turns its failures into errors and Events.
func (r *Reconciler) decide(o *observed) ([]decide.Step, error) {
	res := decide.Plan(o.Observation)
	errs := []error{res.Incomplete}
	if res.Incomplete != nil {
		errs[0] = fmt.Errorf("%w: %w", ErrStepFailed, res.Incomplete)
	}
	for _, f := range res.Failed {
		err := fmt.Errorf("%w: release spec %s (release %s/%s): %w", ErrStepFailed, f.ReleaseSpec, f.Namespace, f.Release, f.Err)
		errs = append(errs, err)
		r.event(o.ref, corev1.EventTypeWarning, "ReleaseFailed", "%s", err.Error())
	}
	return res.Steps, errors.Join(errs...)
}

// Reconcile observes one spec, decides and applies the steps. A failing
// release step does not stop the others; the returned error (if any) makes
// the caller retry the spec with backoff, and the retry starts again from a
// live read.
func (r *Reconciler) Reconcile(ctx context.Context, specName string) error {
	start := time.Now()
	o, err := r.observe(ctx, specName)
	if err != nil {
		r.opts.Log.Error().Err(err).Str("spec", specName).Msg("cannot decide; nothing changed")
		r.count(specName, err, start)
		return err
	}
	steps, planErr := r.decide(o)
	errs := append([]error{planErr}, r.applyAll(ctx, o, steps)...)
	err = errors.Join(errs...)
	r.count(specName, err, start)
	ev := r.opts.Log.Debug()
	if err != nil {
		ev = r.opts.Log.Error().Err(err)
	}
	ev.Str("spec", specName).Dur("duration", time.Since(start)).Int("releases", len(steps)).Msg("spec reconciled")
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
	if r.opts.Metrics != nil {
		r.opts.Metrics.helmOperations.WithLabelValues(string(s.Action), result(err)).Inc()
	}
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
	d := helmops.Desired{Spec: s.Spec, ReleaseSpec: s.ReleaseSpec, Name: s.Release, Namespace: s.Namespace, Chart: ch,
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
