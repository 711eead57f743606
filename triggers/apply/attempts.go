package apply

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/autox-dev/autox/helmops"
	"github.com/autox-dev/autox/triggers/attempts"
	"github.com/autox-dev/autox/triggers/plan"
)

// AttemptWriter writes the failed attempts of release specs with
// remediation retries (attempts.Store), through the term's fenced client.
type AttemptWriter interface {
	Record(ctx context.Context, namespace, release string, e attempts.Entry) error
	Forget(ctx context.Context, namespace, release string) error
}

// ErrRetriesExhausted marks the failed attempt that used up a release
// spec's remediation retries.
var ErrRetriesExhausted = errors.New("remediation retries used up")

// errNoAttempt marks a step error from before any Helm operation started
// (the chart could not be fetched, the service account is missing or
// unreadable): it is no failed attempt of the release.
var errNoAttempt = errors.New("no Helm operation started")

// noAttempt reports whether err, a step's error, is no attempt of the
// release: nothing started (errNoAttempt), or the operation wrote nothing
// (helmops.WroteNothing: the release changed since it was read, discovery
// is partial, a preflight or dry run refused, Helm refused an object that
// exists, the chart did not render). Only real attempts use up retries.
func noAttempt(err error) bool {
	return errors.Is(err, errNoAttempt) || helmops.WroteNothing(err)
}

// attempted records the outcome of step s (err: its error) for a release
// spec whose retries are bounded: a failed install, upgrade or reinstall
// counts one failure for what it installs, and the one that uses up the
// retries is an Event; a successful one, or a record the plan no longer
// needs, is forgotten. It returns the step's error, with what recording
// failed.
func (a *Applier) attempted(ctx context.Context, p plan.Plan, s plan.Step, err error) error {
	r := s.Retries
	retries, _ := s.Policy.Retries()
	if r == nil || !isForward(s.Action) {
		return errors.Join(err, a.remember(ctx, s, err))
	}
	if err == nil {
		return a.remember(ctx, s, nil)
	}
	if ctx.Err() != nil || noAttempt(err) {
		return err // cut off, or nothing written: no attempt of the release
	}
	failures := r.Failures + 1
	e := attempts.Entry{Spec: s.Spec, ReleaseSpec: s.ReleaseSpec, Object: s.Object, Fingerprint: r.Fingerprint, Failures: failures}
	if a.opts.Attempts == nil {
		return errors.Join(err, errors.New("the failed attempt could not be recorded: this autox has no remediation records"))
	}
	if werr := a.opts.Attempts.Record(ctx, s.Namespace, s.Release, e); werr != nil {
		return errors.Join(err, werr)
	}
	if failures > retries {
		onFailure := s.Policy.Remediation.OnFailure
		next := map[bool]string{true: "the next reconcile applies onFailure " + onFailure, false: "the release is left as it is"}[onFailure != "keep"]
		a.event(p.Ref, corev1.EventTypeWarning, "RetriesExhausted",
			"release %s/%s: retries used up after %d failed attempts of this config, chart and trigger (retries %d); %s; autox makes no further attempt until the config, the chart or the trigger changes",
			s.Namespace, s.Release, failures, retries, next)
		a.opts.Log.Warn().Str("spec", s.Spec).Str("releaseSpec", s.ReleaseSpec).Str("release", s.Release).Str("namespace", s.Namespace).
			Int("failures", failures).Int("retries", retries).Str("onFailure", onFailure).Msg("remediation retries used up")
		return fmt.Errorf("%w (%d failed attempts, retries %d): %w", ErrRetriesExhausted, failures, retries, err)
	}
	return err
}

// remember forgets the record of step s's release when the plan says it
// goes, or a forward step succeeded after failures were recorded.
func (a *Applier) remember(ctx context.Context, s plan.Step, err error) error {
	r := s.Retries
	if r == nil || err != nil || !(r.Forget || (isForward(s.Action) && r.Recorded)) {
		return nil
	}
	if a.opts.Attempts == nil {
		return nil
	}
	return a.opts.Attempts.Forget(ctx, s.Namespace, s.Release)
}

func isForward(a plan.Action) bool {
	return a == plan.ActionInstall || a == plan.ActionUpgrade || a == plan.ActionReinstall
}
