// Package apply carries out a plan: it runs the Helm operations of a
// plan.Plan's steps through helmops, in the plan's order and a few at a
// time, and reports what happened — one log line per operation, a metric,
// and a Kubernetes Event on the trigger object — for the failures the plan
// found as well. It decides nothing: every choice was made by the pure
// package triggers/plan from an observation of package triggers/observe.
package apply

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/rs/zerolog"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/helmops"
	"github.com/autox-dev/autox/internal/format"
	"github.com/autox-dev/autox/internal/redact"
	"github.com/autox-dev/autox/triggers/observe"
	"github.com/autox-dev/autox/triggers/plan"
)

// Helm is the part of helmops.Manager that applying uses: its writes.
type Helm interface {
	Install(ctx context.Context, d helmops.Desired) (int, error)
	Upgrade(ctx context.Context, d helmops.Desired) (int, error)
	Reinstall(ctx context.Context, d helmops.Desired) (int, error)
	UninstallWith(ctx context.Context, namespace, name string, current int, hide *redact.Redactor, p helmops.Policy) error
	RollbackWith(ctx context.Context, namespace, name string, current, toRevision int, hide *redact.Redactor, p helmops.Policy) error
	Adopt(ctx context.Context, a helmops.Adoption) error
	DryRunReplacement(ctx context.Context, d helmops.Desired, old helmops.Ref) error
}

// Charts loads a chart for an operation (observe.Observer.LoadChart).
type Charts func(ctx context.Context, ref config.Chart, configDir string) (*chart.Chart, plan.ChartID, error)

// Operations counts Helm operations by action and outcome, and how long
// they took; nil counts nothing.
type Operations interface {
	HelmOperation(action plan.Action, err error, took time.Duration)
}

// Options are what an Applier acts with.
type Options struct {
	Helm   Helm
	Charts Charts
	// ConfigDir is the directory chart paths are relative to (the config in force).
	ConfigDir func() string
	// Attempts records the failed attempts of release specs with
	// remediation retries; nil records nothing (their failures then fail
	// the step).
	Attempts AttemptRecords
	// Events and Operations are optional.
	Events     record.EventRecorder
	Operations Operations
	Log        zerolog.Logger
	// Impersonate runs the operations of steps that name a service account
	// as that account; nil fails those steps.
	Impersonate Impersonate
}

// Applier applies plans.
type Applier struct{ opts Options }

// New returns an Applier acting with opts.
func New(opts Options) *Applier {
	if opts.ConfigDir == nil {
		opts.ConfigDir = func() string { return "" }
	}
	return &Applier{opts: opts}
}

// ErrStepFailed marks a failure of one release spec; the others went ahead.
var ErrStepFailed = errors.New("release step failed")

// StepsInParallel bounds the release operations of one spec that run at
// once. The workers bound the specs; this bounds what one spec with many
// release specs adds, so its share of the API server stays that of a few.
const StepsInParallel = 4

// Report turns the failures of a plan into errors and Events: a release
// spec that could not be decided (ReleaseFailed, or ValuesSourceFailed for a
// values source missing or unreadable: the release runs on as it is), a
// removed spec whose releases could not all be seen, and a trigger in
// conflict or past maxObjects.
func (a *Applier) Report(o *observe.Observed, p plan.Plan) error {
	errs := []error{p.Incomplete}
	if p.Incomplete != nil {
		errs[0] = fmt.Errorf("%w: %w", ErrStepFailed, p.Incomplete)
	}
	for _, f := range p.Failed {
		err := fmt.Errorf("%w: release spec %s (release %s/%s): %w", ErrStepFailed, f.ReleaseSpec, f.Namespace, f.Release, f.Err)
		if !o.Object.IsZero() {
			err = fmt.Errorf("%w: object %s, release spec %s (release %s/%s): %w", ErrStepFailed, o.Object, f.ReleaseSpec, f.Namespace, f.Release, f.Err)
		}
		errs = append(errs, err)
		reason := "ReleaseFailed"
		var source *plan.SourceError
		if errors.As(f.Err, &source) {
			reason = "ValuesSourceFailed"
		}
		a.event(o.Ref, corev1.EventTypeWarning, reason, "%s", err.Error())
	}
	switch p.Trigger {
	case plan.TriggerConflict:
		a.event(o.Ref, corev1.EventTypeWarning, "TriggerConflict", "%s", p.TriggerReason)
	case plan.TriggerOverLimit:
		a.event(o.Ref, corev1.EventTypeWarning, "TriggerOverLimit", "spec %s: %s", o.Spec, p.TriggerReason)
	}
	a.reportSuspended(o, p)
	return errors.Join(errs...)
}

// Apply applies one spec's steps and returns their errors in step order.
// Steps on different releases are independent, except that removals (the
// uninstalls the plan puts first) may free a name or objects that a release
// spec's step needs: so the leading uninstalls run first, then the other
// steps, each group StepsInParallel at a time. A removal whose release spec
// installs its replacement (plan.Step.ReplacedBy) waits for that install's
// dry run, and when it fails neither runs. A step not yet started when ctx
// ends is not started (cancelled past the shutdown timeout or by a fenced
// term); the others finish.
func (a *Applier) Apply(ctx context.Context, o *observe.Observed, steps []plan.Step) []error {
	errs, removed := a.RemoveFirst(ctx, o, steps)
	return append(errs, a.ApplyAfter(ctx, o, steps[len(errs):], removed)...)
}

// Removed is what RemoveFirst did: the releases it tried to uninstall
// (namespace/name), and the release specs whose new release failed the dry
// run that its old one's removal waited for, with the error.
type Removed struct {
	Tried   map[string]bool
	Blocked map[string]error
	// Failed are the release specs whose removal failed: a step ordered
	// after one of them (dependsOn) does not run.
	Failed map[string]bool
}

// RemoveFirst applies the leading removals of steps (plan.LeadingRemovals)
// and returns their errors, in order. A reconcile then decides again from
// what the cluster is after them (ApplyAfter).
func (a *Applier) RemoveFirst(ctx context.Context, o *observe.Observed, steps []plan.Step) ([]error, Removed) {
	n := plan.LeadingRemovals(steps)
	errs := make([]error, n)
	done := Removed{Tried: map[string]bool{}, Blocked: map[string]error{}, Failed: map[string]bool{}}
	var mu sync.Mutex
	a.each(ctx, steps[:n], errs, func(s plan.Step) error {
		mu.Lock()
		done.Tried[s.Namespace+"/"+s.Release] = true
		mu.Unlock()
		if s.ReplacedBy != "" {
			if err := a.proveReplacement(ctx, o, s, steps[n:]); err != nil {
				mu.Lock()
				done.Blocked[s.ReplacedBy] = err
				mu.Unlock()
				return err
			}
		}
		err := a.step(ctx, o, s)
		if err != nil {
			mu.Lock()
			done.Failed[s.ReleaseSpec] = true
			mu.Unlock()
		}
		return err
	})
	return errs, done
}

// ApplyAfter applies steps, which a reconcile decided after RemoveFirst
// applied the removals of prior (the same plan, or one decided again from
// what the cluster is after them): removals already tried are not tried
// again, and the steps of release specs whose replacement failed its dry
// run fail with that error; the rest is applied as Apply does, each step
// after those it is ordered after (dependsOn, see ordered).
func (a *Applier) ApplyAfter(ctx context.Context, o *observe.Observed, steps []plan.Step, prior Removed) []error {
	n := plan.LeadingRemovals(steps)
	kept := make([]plan.Step, 0, len(steps))
	at := make([]int, 0, len(steps))
	for i, s := range steps {
		if i < n && prior.Tried[s.Namespace+"/"+s.Release] {
			continue // reported when it was tried
		}
		kept, at = append(kept, s), append(at, i)
	}
	removalErrs, removed := a.RemoveFirst(ctx, o, kept)
	maps.Copy(removed.Blocked, prior.Blocked)
	maps.Copy(removed.Failed, prior.Failed)
	m := len(removalErrs)
	rest := make([]error, len(kept)-m)
	a.ordered(ctx, kept[m:], rest, removed.Failed, func(s plan.Step) error {
		if err := removed.Blocked[s.ReleaseSpec]; err != nil && s.Changes() {
			return fmt.Errorf("release %s/%s not changed: %w", s.Namespace, s.Release, err)
		}
		return a.step(ctx, o, s)
	})
	errs := make([]error, len(steps))
	for j, err := range append(removalErrs, rest...) {
		errs[at[j]] = err
	}
	return errs
}

// each runs do for every step, StepsInParallel at a time, and puts its
// errors in errs (marked ErrStepFailed); a step not started when ctx ends is
// not started.
func (a *Applier) each(ctx context.Context, steps []plan.Step, errs []error, do func(plan.Step) error) {
	var wg sync.WaitGroup
	slots := make(chan struct{}, StepsInParallel)
	for i := range steps {
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
			if err := do(steps[i]); err != nil {
				errs[i] = fmt.Errorf("%w: %w", ErrStepFailed, err)
			}
		}(i)
	}
	wg.Wait()
}

// proveReplacement runs the dry run of the install that replaces the
// release removal s removes (among rest, the plan's other steps), before
// the removal: an old release is removed only once the new one loads and
// renders. A failure is logged, counted and put in an Event as the
// removal's.
func (a *Applier) proveReplacement(ctx context.Context, o *observe.Observed, s plan.Step, rest []plan.Step) error {
	var next *plan.Step
	for i := range rest {
		if rest[i].ReleaseSpec == s.ReplacedBy && rest[i].Desired != nil {
			next = &rest[i]
		}
	}
	if next == nil {
		// The plan tied the removal to an install that is not among the
		// steps (held back): nothing proves the replacement, so the old
		// release stays.
		return fmt.Errorf("release %s/%s is kept: the install of its replacement (release spec %s) is not in this reconcile",
			s.Namespace, s.Release, s.ReplacedBy)
	}
	d, err := a.desired(ctx, o, *next)
	var h Helm
	if err == nil {
		// As the replacement's account: its dry run proves what it may do.
		h, err = a.helmFor(ctx, *next)
	}
	if err == nil {
		err = h.DryRunReplacement(ctx, d, helmops.Ref{Namespace: s.Namespace, Name: s.Release})
	}
	if err == nil {
		return nil
	}
	err = fmt.Errorf("release %s/%s is kept, not replaced by %s/%s: %w", s.Namespace, s.Release, next.Namespace, next.Release, next.Hide.Error(s.Hide.Error(err)))
	a.opts.Log.Error().Err(err).Str("spec", s.Spec).Str("releaseSpec", s.ReleaseSpec).Str("release", s.Release).
		Str("namespace", s.Namespace).Str("action", string(s.Action)).Str("reason", s.Reason).Msg("release " + string(s.Action))
	if a.opts.Operations != nil {
		a.opts.Operations.HelmOperation(s.Action, err, 0)
	}
	a.event(o.Ref, corev1.EventTypeWarning, "ReleaseFailed", "%s of release %s/%s failed: %v", s.Action, s.Namespace, s.Release, err)
	return err
}

func (a *Applier) step(ctx context.Context, o *observe.Observed, s plan.Step) error {
	lc := a.opts.Log.With().Str("spec", s.Spec).Str("releaseSpec", s.ReleaseSpec).Str("release", s.Release).
		Str("namespace", s.Namespace).Str("action", string(s.Action)).Str("reason", s.Reason)
	if s.ServiceAccount != "" {
		lc = lc.Str("serviceAccount", s.ServiceAccount)
	}
	log := lc.Logger()
	start := time.Now()
	var (
		rev int
		err error
	)
	switch s.Action {
	case plan.ActionNone:
		log.Debug().Int("revision", s.Revision).Msg("nothing to do for release")
		return a.remember(ctx, s, nil)
	case plan.ActionWait:
		log.Info().Int("revision", s.Revision).Msg("waiting: " + s.Reason)
		return nil
	case plan.ActionSuspended, plan.ActionExhausted:
		ev := log.Info()
		if !(plan.Step{Action: s.Pending}).Changes() {
			ev = log.Debug()
		}
		ev.Int("revision", s.Revision).Str("pending", string(s.Pending)).Msg("held, no Helm write: " + s.Reason)
		return nil // a suspended release spec gets no write at all, its records included
	case plan.ActionConflict:
		if o.State == plan.TriggerConflict {
			log.Warn().Msg("trigger object claimed by more than one spec; leaving its releases alone")
			return nil // one TriggerConflict Event says it for the object
		}
		log.Warn().Msg("release name taken by a release autox does not own; leaving it alone")
		a.event(o.Ref, corev1.EventTypeWarning, "ReleaseConflict", "release %s/%s is not this autox's: %s; autox leaves it alone", s.Namespace, s.Release, s.Reason)
		return nil
	case plan.ActionInstall, plan.ActionUpgrade, plan.ActionReinstall, plan.ActionUninstall, plan.ActionRollback, plan.ActionAdopt:
		rev, err = a.write(ctx, o, s)
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
	if a.opts.Operations != nil {
		a.opts.Operations.HelmOperation(s.Action, err, time.Since(start))
	}
	if err != nil {
		a.event(o.Ref, corev1.EventTypeWarning, "ReleaseFailed", "%s of release %s/%s%s failed: %v", s.Action, s.Namespace, s.Release, asAccount(s), err)
	} else {
		a.event(o.Ref, corev1.EventTypeNormal, eventReasons[s.Action], "%s release %s/%s (revision %d)%s: %s", pastTense[s.Action], s.Namespace, s.Release, rev, asAccount(s), s.Reason)
	}
	return a.attempted(ctx, o, s, err)
}

// write runs the step's Helm operation as the step's identity and returns
// the revision it leaves.
func (a *Applier) write(ctx context.Context, o *observe.Observed, s plan.Step) (int, error) {
	h, err := a.helmFor(ctx, s)
	if err != nil {
		return 0, err
	}
	switch s.Action {
	case plan.ActionUninstall:
		return s.Revision, h.UninstallWith(ctx, s.Namespace, s.Release, s.Revision, s.Hide, policyOf(o, s))
	case plan.ActionRollback:
		return s.Revision + 1, h.RollbackWith(ctx, s.Namespace, s.Release, s.Revision, s.RollbackTo, s.Hide, policyOf(o, s))
	case plan.ActionAdopt:
		// Relabelling writes the release's records: as its account too.
		if s.AdoptFrom == nil {
			return 0, fmt.Errorf("adoption of release %s/%s names no previous owner", s.Namespace, s.Release)
		}
		return s.Revision, h.Adopt(ctx, helmops.Adoption{Namespace: s.Namespace, Name: s.Release, Revision: s.Revision, From: *s.AdoptFrom,
			To: format.Owner{Spec: s.Spec, ReleaseSpec: s.ReleaseSpec, Instance: s.AdoptFrom.Instance, Object: o.Object}})
	}
	return a.install(ctx, h, o, s)
}

// install runs an install, upgrade or reinstall of the step's desired
// release with h.
func (a *Applier) install(ctx context.Context, h Helm, o *observe.Observed, s plan.Step) (int, error) {
	d, err := a.desired(ctx, o, s)
	if err != nil {
		return 0, err
	}
	switch s.Action {
	case plan.ActionInstall:
		return h.Install(ctx, d)
	case plan.ActionUpgrade:
		return h.Upgrade(ctx, d)
	default:
		return h.Reinstall(ctx, d)
	}
}

// desired is the release a step makes, loading a repository chart first:
// the decision did not need it.
func (a *Applier) desired(ctx context.Context, o *observe.Observed, s plan.Step) (helmops.Desired, error) {
	ref := o.Config.ReleaseSpecs[s.ReleaseSpec].Chart
	ch := o.Loaded[s.ReleaseSpec]
	if ch == nil {
		if a.opts.Charts == nil {
			return helmops.Desired{}, fmt.Errorf("chart %s %s cannot be loaded: this autox has no chart source", ref.Name, ref.Version)
		}
		var id plan.ChartID
		var err error
		if ch, id, err = a.opts.Charts(ctx, ref, a.opts.ConfigDir()); err != nil {
			return helmops.Desired{}, fmt.Errorf("%w: %w", errNoAttempt, err)
		}
		// Otherwise every pass would see a difference and upgrade again.
		if id.Name != ref.Name || id.Version != ref.Version {
			return helmops.Desired{}, fmt.Errorf("%w: chart %s %s from %s is named %s %s in its Chart.yaml; fix the repository or the config",
				errNoAttempt, ref.Name, ref.Version, ref.Repo, id.Name, id.Version)
		}
	}
	return helmops.Desired{Spec: s.Spec, ReleaseSpec: s.ReleaseSpec, Object: o.Object, Name: s.Release, Namespace: s.Namespace, Chart: ch,
		Values: s.Desired.Values, Digest: s.Desired.Digest, Revision: s.Desired.Revision, Current: s.Revision, Redact: s.Hide, Policy: policyOf(o, s)}, nil
}

var eventReasons = map[plan.Action]string{
	plan.ActionInstall: "ReleaseInstalled", plan.ActionUpgrade: "ReleaseUpgraded", plan.ActionReinstall: "ReleaseReinstalled",
	plan.ActionUninstall: "ReleaseUninstalled", plan.ActionRollback: "ReleaseRolledBack", plan.ActionAdopt: "ReleaseAdopted",
}

var pastTense = map[plan.Action]string{
	plan.ActionInstall: "installed", plan.ActionUpgrade: "upgraded", plan.ActionReinstall: "reinstalled",
	plan.ActionUninstall: "uninstalled", plan.ActionRollback: "rolled back", plan.ActionAdopt: "adopted",
}

// event records a Kubernetes Event on the trigger object, when there is one:
// a removed trigger has nothing to attach to, and logs cover it. Messages
// name releases and reasons, never values.
func (a *Applier) event(ref *corev1.ObjectReference, eventType, reason, format string, args ...interface{}) {
	if a.opts.Events == nil || ref == nil {
		return
	}
	a.opts.Events.Eventf(ref, eventType, reason, format, args...)
}
