package triggers

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/rs/zerolog"
	"helm.sh/helm/v3/pkg/chart"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/helmops"
	"github.com/autox-dev/autox/internal/metrics"
	"github.com/autox-dev/autox/internal/redact"
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

// Triggers reads trigger objects live.
type Triggers interface {
	Get(ctx context.Context, t config.Trigger) (Observation, error)
}

// Step is one decided action for one release: a line of `autox plan`, and
// what Reconcile then does.
type Step struct {
	Action      Action `json:"action"`
	Spec        string `json:"spec"`
	ReleaseSpec string `json:"releaseSpec"`
	Release     string `json:"release"`
	Namespace   string `json:"namespace"`
	Reason      string `json:"reason"`
	// Revision is the release's current revision, 0 when there is none.
	Revision int `json:"revision,omitempty"`

	desired    *helmops.Desired
	chartRef   config.Chart
	rollbackTo int
	trigger    *corev1.ObjectReference
	// hide redacts the values of this release (desired and current) from
	// every error text of its operation.
	hide *redact.Redactor
}

// Changes reports whether the step would make a Helm write.
func (s Step) Changes() bool {
	switch s.Action {
	case ActionNone, ActionConflict, ActionWait:
		return false
	}
	return true
}

// Reconciler decides and applies the releases of one spec at a time. It holds
// no per-spec state: every call starts from a live read of the cluster.
type Reconciler struct {
	Helm     Helm
	Charts   helmops.ChartSource
	Triggers Triggers
	// State holds the config in force (it changes on reload) and the
	// namespaces garbage collection looks in.
	State *ConfigState
	// StaleAfter is how old a pending release must be before it is unlocked:
	// --helm-timeout plus a grace period (DESIGN §5).
	StaleAfter time.Duration
	// Now is the clock; tests inject one.
	Now func() time.Time
	Log zerolog.Logger
	// Metrics and Events are optional.
	Metrics *metrics.Metrics
	Events  record.EventRecorder

	localCharts chartIDs
}

// ChartID names the chart a reference points at without fetching it: a
// repository chart by its config, a local chart from what the last load saw.
func (r *Reconciler) ChartID(ref config.Chart) (name, version string, ok bool) {
	if ref.Path == "" {
		return ref.Name, ref.Version, true
	}
	path := r.chartPath(ref)
	if name, version, ok := r.localCharts.lookup(path); ok {
		return name, version, true
	}
	// Unknown or changed since last seen (e.g. after a restart): read it once.
	ch, err := r.Charts.Load(context.Background(), ref, r.State.Config().Dir)
	if err != nil {
		return "", "", false
	}
	r.localCharts.remember(path, chartName(ch), chartVersion(ch))
	return chartName(ch), chartVersion(ch), true
}

func (r *Reconciler) chartPath(ref config.Chart) string {
	if filepath.IsAbs(ref.Path) {
		return ref.Path
	}
	return filepath.Join(r.State.Config().Dir, ref.Path)
}

// ErrStepFailed marks a failure of one release spec; the others went ahead.
var ErrStepFailed = errors.New("release step failed")

// Plan reads the cluster and decides, changing nothing. Steps come in the
// order they are applied: removals first, then release specs by id. An error
// returned with steps is the failure of some release specs only; an error
// without steps means nothing could be decided (e.g. the trigger read failed).
func (r *Reconciler) Plan(ctx context.Context, specName string) ([]Step, error) {
	cfg := r.State.Config()
	spec := cfg.Specs[specName]
	// A namespace whose records cannot be read fails the release specs
	// that live there; the others are decided from what could be read.
	current, readErr := r.Helm.SpecReleases(ctx, r.State.GCNamespaces(), specName)
	unread := helmops.FailedNamespaces(readErr)
	if readErr != nil && unread == nil {
		return nil, fmt.Errorf("cannot read releases of spec %s: %w", specName, readErr)
	}

	state, triggerReason := TriggerSpecRemoved, "spec removed from config"
	var obs Observation
	if spec != nil {
		var err error
		obs, err = r.Triggers.Get(ctx, spec.Trigger)
		if err != nil {
			return nil, err
		}
		state, triggerReason = Evaluate(spec.Trigger, obs)
	}

	var steps []Step
	var errs []error
	// Releases of this spec that no release spec wants under that name and
	// namespace: the release spec was removed, renamed or moved.
	for _, rel := range current {
		var rs *config.ReleaseSpec
		if spec != nil {
			rs = spec.ReleaseSpecs[rel.ReleaseSpec]
		}
		if rs != nil && rs.ReleaseName == rel.Name && rs.Namespace == rel.Namespace {
			continue
		}
		reason := triggerReason
		if spec != nil {
			reason = "release spec removed from config"
			if rs != nil {
				reason = "release spec now wants " + rs.Namespace + "/" + rs.ReleaseName
			}
		}
		relState, stateReason, _ := ClassifyRelease(rel, rel.Spec, rel.ReleaseSpec, r.Helm.Instance(), nil, r.Now(), r.StaleAfter)
		action := Decide(TriggerSpecRemoved, relState, config.OnChangeUpgrade)
		if action == ActionWait {
			reason = stateReason
		}
		// The trigger, when it exists, gets the Event of the removal too.
		steps = append(steps, Step{Action: action, Spec: specName, ReleaseSpec: rel.ReleaseSpec, Release: rel.Name,
			Namespace: rel.Namespace, Reason: reason, Revision: rel.Revision, hide: redactorOf(rel), trigger: obs.Ref})
	}
	if spec == nil {
		if len(unread) > 0 {
			// Releases of the removed spec may remain there: retry.
			errs = append(errs, fmt.Errorf("%w: %w", ErrStepFailed, readErr))
		}
		return steps, errors.Join(errs...)
	}

	for _, id := range spec.ReleaseSpecIDs() {
		rs := spec.ReleaseSpecs[id]
		var step Step
		var stepErr error
		if unread[rs.Namespace] {
			stepErr = fmt.Errorf("cannot read the release records of namespace %s: %w", rs.Namespace, readErr)
		} else {
			step, stepErr = r.planReleaseSpec(ctx, specName, id, rs, spec.Trigger, state, triggerReason, obs, current)
		}
		if stepErr != nil {
			stepErr = fmt.Errorf("%w: release spec %s (release %s/%s): %w", ErrStepFailed, id, rs.Namespace, rs.ReleaseName, step.hide.Error(stepErr))
			errs = append(errs, stepErr)
			r.event(obs.Ref, corev1.EventTypeWarning, "ReleaseFailed", "%s", stepErr.Error())
			continue
		}
		step.trigger = obs.Ref
		steps = append(steps, step)
	}
	return steps, errors.Join(errs...)
}

// redactorOf hides the values of a release's latest and last deployed
// revisions (a rollback or an upgrade after a failure quotes the latter).
func redactorOf(rel *helmops.Release) *redact.Redactor {
	return redact.New(userValues(rel.Values), userValues(rel.DeployedValues))
}

// userValues are the values of a release that may be secret: the user's,
// without the `autox` key, which holds only the trigger's identity and labels
// (redacting those would blank the namespace and names out of every message).
func userValues(values map[string]interface{}) map[string]interface{} {
	if _, ok := values[config.InjectedValuesKey]; !ok {
		return values
	}
	out := make(map[string]interface{}, len(values))
	for k, v := range values {
		if k != config.InjectedValuesKey {
			out[k] = v
		}
	}
	return out
}

func (r *Reconciler) planReleaseSpec(ctx context.Context, specName, id string, rs *config.ReleaseSpec, trig config.Trigger,
	state TriggerState, triggerReason string, obs Observation, current []*helmops.Release) (Step, error) {
	step := Step{Spec: specName, ReleaseSpec: id, Release: rs.ReleaseName, Namespace: rs.Namespace,
		hide: redact.New(rs.Values)}

	var rel *helmops.Release
	for _, c := range current {
		if c.Name == rs.ReleaseName && c.Namespace == rs.Namespace {
			rel = c
		}
	}
	if rel == nil {
		// Not ours under this spec: is the name taken by someone else
		// (another tool, spec or autox instance)?
		other, err := r.Helm.Lookup(ctx, rs.Namespace, rs.ReleaseName)
		if err != nil {
			return step, err
		}
		rel = other
	}
	if rel != nil {
		step.Revision = rel.Revision
		step.rollbackTo = rel.LastDeployedRevision
		// An error may quote the running release's values as well as the new ones.
		step.hide = redact.New(rs.Values, userValues(rel.Values), userValues(rel.DeployedValues))
	}

	var want *Want
	if state.Wanted() {
		values := DesiredValues(rs, trig, obs.Labels)
		want = &Want{Spec: specName, ReleaseSpec: id, ChartName: rs.Chart.Name, ChartVersion: rs.Chart.Version, Values: values}
		step.desired = &helmops.Desired{Spec: specName, ReleaseSpec: id, Name: rs.ReleaseName, Namespace: rs.Namespace, Values: values, Redact: step.hide}
		step.chartRef = rs.Chart
		if rs.Chart.Path != "" {
			// Only a local chart must be read to learn its name and version;
			// a repository chart names them in the config, and is fetched
			// only when an operation needs it.
			ch, err := r.Charts.Load(ctx, rs.Chart, r.State.Config().Dir)
			if err != nil {
				return step, err
			}
			want.ChartName, want.ChartVersion = chartName(ch), chartVersion(ch)
			step.desired.Chart = ch
			r.localCharts.remember(r.chartPath(rs.Chart), want.ChartName, want.ChartVersion)
		}
		digest, err := Digest(want.ChartName, want.ChartVersion, values)
		if err != nil {
			return step, fmt.Errorf("cannot digest the desired values: %w", err)
		}
		step.desired.Digest = digest
		step.desired.Revision = 1
		if rel != nil {
			step.desired.Revision = rel.Revision + 1
		}
	}
	relState, relReason, err := ClassifyRelease(rel, specName, id, r.Helm.Instance(), want, r.Now(), r.StaleAfter)
	if err != nil {
		return step, err
	}
	step.Action = Decide(state, relState, rs.OnChange)
	switch step.Action {
	case ActionUninstall:
		step.Reason = triggerReason
	case ActionInstall:
		step.Reason = triggerReason + ", release not found"
	default:
		step.Reason = relReason
	}
	return step, nil
}

func chartName(c *chart.Chart) string {
	if c.Metadata == nil {
		return ""
	}
	return c.Metadata.Name
}

func chartVersion(c *chart.Chart) string {
	if c.Metadata == nil {
		return ""
	}
	return c.Metadata.Version
}

// Reconcile plans one spec and applies the plan. A failing release step does
// not stop the others; the returned error (if any) makes the caller retry the
// spec with backoff, and the retry starts again from a live read.
func (r *Reconciler) Reconcile(ctx context.Context, specName string) error {
	start := time.Now()
	steps, planErr := r.Plan(ctx, specName)
	if planErr != nil && len(steps) == 0 {
		r.Log.Error().Err(planErr).Str("spec", specName).Msg("cannot decide; nothing changed")
		r.count(specName, planErr, start)
		return planErr
	}
	errs := []error{planErr}
	for _, s := range steps {
		if ctx.Err() != nil {
			// Cancelled past the shutdown timeout or by a fenced term: start
			// no further Helm operation.
			errs = append(errs, fmt.Errorf("release %s/%s not changed: %w", s.Namespace, s.Release, ctx.Err()))
			break
		}
		if err := r.apply(ctx, s); err != nil {
			errs = append(errs, fmt.Errorf("%w: %w", ErrStepFailed, err))
		}
	}
	err := errors.Join(errs...)
	r.count(specName, err, start)
	ev := r.Log.Debug()
	if err != nil {
		ev = r.Log.Error().Err(err)
	}
	ev.Str("spec", specName).Dur("duration", time.Since(start)).Int("releases", len(steps)).Msg("spec reconciled")
	return err
}

// count records one reconcile of a spec, failed ones included (a trigger
// that cannot be read is what "a spec keeps failing" alerts are for).
func (r *Reconciler) count(specName string, err error, start time.Time) {
	if r.Metrics == nil {
		return
	}
	if _, inConfig := r.State.Config().Specs[specName]; !inConfig && err == nil {
		// The spec left the config and its releases are gone: its series go
		// too, so label values stay bounded by the config.
		r.Metrics.ForgetSpec(specName)
	} else {
		r.Metrics.ReconcileTotal.WithLabelValues(specName, metrics.Result(err)).Inc()
	}
	r.Metrics.ReconcileDuration.Observe(time.Since(start).Seconds())
}

func (r *Reconciler) apply(ctx context.Context, s Step) error {
	log := r.Log.With().Str("spec", s.Spec).Str("releaseSpec", s.ReleaseSpec).Str("release", s.Release).
		Str("namespace", s.Namespace).Str("action", string(s.Action)).Str("reason", s.Reason).Logger()
	start := time.Now()
	var (
		rev int
		err error
	)
	switch s.Action {
	case ActionNone:
		log.Debug().Int("revision", s.Revision).Msg("nothing to do for release")
		return nil
	case ActionWait:
		log.Info().Int("revision", s.Revision).Msg("waiting: release is locked by another operation")
		return nil
	case ActionConflict:
		log.Warn().Msg("release name taken by a release autox does not own; leaving it alone")
		r.event(s.trigger, corev1.EventTypeWarning, "ReleaseConflict", "release %s/%s exists without autox labels; autox leaves it alone", s.Namespace, s.Release)
		return nil
	case ActionInstall, ActionUpgrade, ActionReinstall:
		rev, err = r.install(ctx, s)
	case ActionUninstall:
		err = r.Helm.Uninstall(ctx, s.Namespace, s.Release, s.hide)
		rev = s.Revision
	case ActionRollback:
		err = r.Helm.Rollback(ctx, s.Namespace, s.Release, s.rollbackTo, s.hide)
		rev = s.Revision + 1
	default:
		return fmt.Errorf("unknown action %q", s.Action)
	}
	// helmops redacts its own errors; a chart load or anything else on the
	// way is redacted here, before the log and the Event see it.
	err = s.hide.Error(err)
	ev := log.Info()
	if err != nil {
		ev = log.Error().Err(err)
	}
	ev.Int("revision", rev).Dur("duration", time.Since(start)).Msg("release " + string(s.Action))
	if r.Metrics != nil {
		r.Metrics.HelmOperations.WithLabelValues(string(s.Action), metrics.Result(err)).Inc()
	}
	if err != nil {
		r.event(s.trigger, corev1.EventTypeWarning, "ReleaseFailed", "%s of release %s/%s failed: %v", s.Action, s.Namespace, s.Release, err)
	} else {
		r.event(s.trigger, corev1.EventTypeNormal, eventReasons[s.Action], "%s release %s/%s (revision %d): %s", pastTense[s.Action], s.Namespace, s.Release, rev, s.Reason)
	}
	return err
}

// install runs an install, upgrade or reinstall, loading a repository chart
// first if the plan did not need it.
func (r *Reconciler) install(ctx context.Context, s Step) (int, error) {
	d := *s.desired
	if d.Chart == nil {
		ch, err := r.Charts.Load(ctx, s.chartRef, r.State.Config().Dir)
		if err != nil {
			return 0, err
		}
		// Otherwise every pass would see a difference and upgrade again.
		if chartName(ch) != s.chartRef.Name || chartVersion(ch) != s.chartRef.Version {
			return 0, fmt.Errorf("chart %s %s from %s is named %s %s in its Chart.yaml; fix the repository or the config",
				s.chartRef.Name, s.chartRef.Version, s.chartRef.Repo, chartName(ch), chartVersion(ch))
		}
		d.Chart = ch
	}
	switch s.Action {
	case ActionInstall:
		return r.Helm.Install(ctx, d)
	case ActionUpgrade:
		return r.Helm.Upgrade(ctx, d)
	default:
		return r.Helm.Reinstall(ctx, d)
	}
}

var eventReasons = map[Action]string{
	ActionInstall: "ReleaseInstalled", ActionUpgrade: "ReleaseUpgraded", ActionReinstall: "ReleaseReinstalled",
	ActionUninstall: "ReleaseUninstalled", ActionRollback: "ReleaseRolledBack",
}

var pastTense = map[Action]string{
	ActionInstall: "installed", ActionUpgrade: "upgraded", ActionReinstall: "reinstalled",
	ActionUninstall: "uninstalled", ActionRollback: "rolled back",
}

// event records a Kubernetes Event on the trigger object, when there is one:
// a removed trigger has nothing to attach to, and logs cover it. Messages
// name releases and reasons, never values.
func (r *Reconciler) event(ref *corev1.ObjectReference, eventType, reason, format string, args ...interface{}) {
	if r.Events == nil || ref == nil {
		return
	}
	r.Events.Eventf(ref, eventType, reason, format, args...)
}
