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
	"sync"
	"time"

	"github.com/rs/zerolog"
	"helm.sh/helm/v3/pkg/chart"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/helmops"
	"github.com/autox-dev/autox/internal/redact"
	"github.com/autox-dev/autox/triggers/observe"
	"github.com/autox-dev/autox/triggers/plan"
)

// Helm is the part of helmops.Manager that applying uses: its writes.
type Helm interface {
	Install(ctx context.Context, d helmops.Desired) (int, error)
	Upgrade(ctx context.Context, d helmops.Desired) (int, error)
	Reinstall(ctx context.Context, d helmops.Desired) (int, error)
	Uninstall(ctx context.Context, namespace, name string, hide *redact.Redactor) error
	Rollback(ctx context.Context, namespace, name string, toRevision int, hide *redact.Redactor) error
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
	return errors.Join(errs...)
}

// Apply applies one spec's steps and returns their errors in step order.
// Steps on different releases are independent, except that removals (the
// uninstalls the plan puts first) may free a name or objects that a release
// spec's step needs: so the leading uninstalls run first, then the other
// steps, each group StepsInParallel at a time. A step not yet started when
// ctx ends is not started (cancelled past the shutdown timeout or by a
// fenced term); the others finish.
func (a *Applier) Apply(ctx context.Context, o *observe.Observed, steps []plan.Step) []error {
	errs := make([]error, len(steps))
	removals := 0
	for removals < len(steps) && steps[removals].Action == plan.ActionUninstall {
		removals++
	}
	for _, group := range [][2]int{{0, removals}, {removals, len(steps)}} {
		var wg sync.WaitGroup
		slots := make(chan struct{}, StepsInParallel)
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
				if err := a.step(ctx, o, steps[i]); err != nil {
					errs[i] = fmt.Errorf("%w: %w", ErrStepFailed, err)
				}
			}(i)
		}
		wg.Wait()
	}
	return errs
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
		return nil
	case plan.ActionWait:
		log.Info().Int("revision", s.Revision).Msg("waiting: release is locked by another operation")
		return nil
	case plan.ActionConflict:
		if o.State == plan.TriggerConflict {
			log.Warn().Msg("trigger object claimed by more than one spec; leaving its releases alone")
			return nil // one TriggerConflict Event says it for the object
		}
		log.Warn().Msg("release name taken by a release autox does not own; leaving it alone")
		a.event(o.Ref, corev1.EventTypeWarning, "ReleaseConflict", "release %s/%s is not this autox's: %s; autox leaves it alone", s.Namespace, s.Release, s.Reason)
		return nil
	case plan.ActionInstall, plan.ActionUpgrade, plan.ActionReinstall, plan.ActionUninstall, plan.ActionRollback:
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
	return err
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
		return s.Revision, h.Uninstall(ctx, s.Namespace, s.Release, s.Hide)
	case plan.ActionRollback:
		return s.Revision + 1, h.Rollback(ctx, s.Namespace, s.Release, s.RollbackTo, s.Hide)
	}
	return a.install(ctx, h, o, s)
}

// install runs an install, upgrade or reinstall of the step's desired
// release with h, loading a repository chart first: the decision did not need it.
func (a *Applier) install(ctx context.Context, h Helm, o *observe.Observed, s plan.Step) (int, error) {
	ref := o.Config.ReleaseSpecs[s.ReleaseSpec].Chart
	ch := o.Loaded[s.ReleaseSpec]
	if ch == nil {
		if a.opts.Charts == nil {
			return 0, fmt.Errorf("chart %s %s cannot be loaded: this autox has no chart source", ref.Name, ref.Version)
		}
		var id plan.ChartID
		var err error
		if ch, id, err = a.opts.Charts(ctx, ref, a.opts.ConfigDir()); err != nil {
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
	case plan.ActionInstall:
		return h.Install(ctx, d)
	case plan.ActionUpgrade:
		return h.Upgrade(ctx, d)
	default:
		return h.Reinstall(ctx, d)
	}
}

var eventReasons = map[plan.Action]string{
	plan.ActionInstall: "ReleaseInstalled", plan.ActionUpgrade: "ReleaseUpgraded", plan.ActionReinstall: "ReleaseReinstalled",
	plan.ActionUninstall: "ReleaseUninstalled", plan.ActionRollback: "ReleaseRolledBack",
}

var pastTense = map[plan.Action]string{
	plan.ActionInstall: "installed", plan.ActionUpgrade: "upgraded", plan.ActionReinstall: "reinstalled",
	plan.ActionUninstall: "uninstalled", plan.ActionRollback: "rolled back",
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
