// Package apply carries out a plan: it runs the Helm operations of a
// plan.Plan's steps through helmops, in the plan's order and a few at a
// time, and reports what happened — one log line per operation, a metric,
// and a Kubernetes Event on the trigger object — for the failures the plan
// found as well. It decides nothing: every choice was made by the pure
// package triggers/plan, and each step carries what its operation needs:
// the desired release, the resolved policy, the identity it runs as.
package apply

import (
	"context"
	"errors"
	"fmt"
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
	"github.com/autox-dev/autox/triggers/plan"
)

// Helm is the part of helmops.Manager that applying uses: its writes.
type Helm interface {
	Install(ctx context.Context, d helmops.Target) (int, error)
	Upgrade(ctx context.Context, d helmops.Target) (int, error)
	Reinstall(ctx context.Context, d helmops.Target) (int, error)
	UninstallWith(ctx context.Context, namespace, name string, current int, hide *redact.Redactor, p config.Policy) error
	UninstallMoved(ctx context.Context, namespace, name string, current int, hide *redact.Redactor, p config.Policy) error
	RollbackWith(ctx context.Context, namespace, name string, current, toRevision int, hide *redact.Redactor, p config.Policy) error
	Adopt(ctx context.Context, a helmops.Adoption) error
	DryRunReplacement(ctx context.Context, d helmops.Target, old helmops.Ref) error
}

// Charts loads a chart for an operation: a repository chart the decision
// did not need (observe.Observer.LoadChart).
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
	Attempts AttemptWriter
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
func (a *Applier) proveReplacement(ctx context.Context, p plan.Plan, s plan.Step, rest []plan.Step) error {
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
	d, err := a.desired(ctx, p, *next)
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
	a.event(p.Ref, corev1.EventTypeWarning, "ReleaseFailed", "%s of release %s/%s failed: %v", s.Action, s.Namespace, s.Release, err)
	return err
}

// step runs one step of plan p and reports it: a log line, a metric and an
// Event for a Helm operation; a log line for a step that makes none.
func (a *Applier) step(ctx context.Context, p plan.Plan, s plan.Step) error {
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
		if s.Unrecorded {
			// Never applied unrecorded: a release there could not be found
			// by a later start once its namespace left the config.
			err := fmt.Errorf("not installing release %s/%s: %s; retrying", s.Namespace, s.Release, s.Reason)
			log.Error().Err(err).Msg("held until its namespace is recorded")
			a.event(p.Ref, corev1.EventTypeWarning, "ReleaseFailed", "%s", err.Error())
			return err
		}
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
		if p.Trigger == plan.TriggerConflict {
			log.Warn().Msg("trigger object claimed by more than one spec; leaving its releases alone")
			return nil // one TriggerConflict Event says it for the object
		}
		log.Warn().Msg("release name taken by a release autox does not own; leaving it alone")
		a.event(p.Ref, corev1.EventTypeWarning, "ReleaseConflict", "release %s/%s is not this autox's: %s; autox leaves it alone", s.Namespace, s.Release, s.Reason)
		return nil
	case plan.ActionInstall, plan.ActionUpgrade, plan.ActionReinstall, plan.ActionUninstall, plan.ActionRollback, plan.ActionAdopt:
		rev, err = a.write(ctx, p, s)
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
		a.event(p.Ref, corev1.EventTypeWarning, "ReleaseFailed", "%s of release %s/%s%s failed: %v", s.Action, s.Namespace, s.Release, asAccount(s), err)
	} else {
		a.event(p.Ref, corev1.EventTypeNormal, eventReasons[s.Action], "%s release %s/%s (revision %d)%s: %s", pastTense[s.Action], s.Namespace, s.Release, rev, asAccount(s), s.Reason)
	}
	return a.attempted(ctx, p, s, err)
}

// write runs the step's Helm operation as the step's identity and returns
// the revision it leaves.
func (a *Applier) write(ctx context.Context, p plan.Plan, s plan.Step) (int, error) {
	h, err := a.helmFor(ctx, s)
	if err != nil {
		// The account is missing or unreadable: nothing was sent as it.
		return 0, fmt.Errorf("%w: %w", errNoAttempt, err)
	}
	if err := a.beginRemedy(ctx, s); err != nil {
		return 0, fmt.Errorf("%w: %w", errNoAttempt, err)
	}
	switch s.Action {
	case plan.ActionUninstall:
		if s.ReplacedBy != "" {
			// The replacement may make the same objects: it installs once
			// these are gone.
			return s.Revision, h.UninstallMoved(ctx, s.Namespace, s.Release, s.Revision, s.Hide, s.Policy)
		}
		return s.Revision, h.UninstallWith(ctx, s.Namespace, s.Release, s.Revision, s.Hide, s.Policy)
	case plan.ActionRollback:
		return s.Revision + 1, h.RollbackWith(ctx, s.Namespace, s.Release, s.Revision, s.RollbackTo, s.Hide, s.Policy)
	case plan.ActionAdopt:
		// Relabelling writes the release's records: as its account too.
		if s.AdoptFrom == nil {
			return 0, fmt.Errorf("adoption of release %s/%s names no previous owner", s.Namespace, s.Release)
		}
		return s.Revision, h.Adopt(ctx, helmops.Adoption{Namespace: s.Namespace, Name: s.Release, Revision: s.Revision, From: *s.AdoptFrom,
			To: format.Owner{Spec: s.Spec, ReleaseSpec: s.ReleaseSpec, Instance: s.AdoptFrom.Instance, Object: p.Object}})
	}
	return a.install(ctx, h, p, s)
}

// install runs an install, upgrade or reinstall of the step's desired
// release with h.
func (a *Applier) install(ctx context.Context, h Helm, p plan.Plan, s plan.Step) (int, error) {
	d, err := a.desired(ctx, p, s)
	if err != nil {
		return 0, err
	}
	if err := a.begin(ctx, s); err != nil {
		return 0, fmt.Errorf("%w: %w", errNoAttempt, err)
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

// Target is the release step s makes, its chart loaded as its operation
// would load it: what `autox plan --diff` renders. Object is left zero: it
// only labels the release record, never an object of the manifest.
func (a *Applier) Target(ctx context.Context, s plan.Step) (helmops.Target, error) {
	return a.desired(ctx, plan.Plan{}, s)
}

// desired is the release step s of plan p makes, loading a repository
// chart first: the decision did not need it.
func (a *Applier) desired(ctx context.Context, p plan.Plan, s plan.Step) (helmops.Target, error) {
	if s.Desired == nil {
		return helmops.Target{}, fmt.Errorf("%s of release %s/%s names no desired release", s.Action, s.Namespace, s.Release)
	}
	ref, ch := s.Desired.Source, s.Desired.Loaded
	if ch == nil {
		if a.opts.Charts == nil {
			return helmops.Target{}, fmt.Errorf("chart %s %s cannot be loaded: this autox has no chart source", ref.Name, ref.Version)
		}
		var id plan.ChartID
		var err error
		if ch, id, err = a.opts.Charts(ctx, ref, a.opts.ConfigDir()); err != nil {
			return helmops.Target{}, fmt.Errorf("%w: %w", errNoAttempt, err)
		}
		// Otherwise every pass would see a difference and upgrade again.
		if id.Name != ref.Name || id.Version != ref.Version {
			return helmops.Target{}, fmt.Errorf("%w: chart %s %s from %s is named %s %s in its Chart.yaml; fix the repository or the config",
				errNoAttempt, ref.Name, ref.Version, ref.Repo, id.Name, id.Version)
		}
	}
	return helmops.Target{Spec: s.Spec, ReleaseSpec: s.ReleaseSpec, Object: p.Object, Name: s.Release, Namespace: s.Namespace, Chart: ch,
		Values: s.Desired.Values, Digest: s.Desired.Digest, Revision: s.Desired.Revision, Current: s.Revision, Redact: s.Hide, Policy: s.Policy}, nil
}
