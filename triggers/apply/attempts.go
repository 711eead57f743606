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

// begin records, before its first Helm write, the attempt step s is about
// to make for a release spec whose retries are bounded: one more failure of
// what it installs, so that a process killed during it (kill -9, a lost
// term, a stop past --shutdown-timeout) has counted it. attempted takes it
// back when the operation wrote nothing, and forgets the record when it
// succeeds. The record goes through the term's fenced client: a term that
// has ended records nothing, and then writes nothing either.
func (a *Applier) begin(ctx context.Context, s plan.Step) error {
	if s.Retries == nil || !isForward(s.Action) {
		return nil
	}
	if a.opts.Attempts == nil {
		return errors.New("the attempt cannot be recorded: this autox has no remediation records")
	}
	return a.opts.Attempts.Record(ctx, s.Namespace, s.Release, entry(s, s.Retries.Failures+1))
}

// entry is the record of step s's release with failures.
func entry(s plan.Step, failures int) attempts.Entry {
	return attempts.Entry{Spec: s.Spec, ReleaseSpec: s.ReleaseSpec, Object: s.Object, Fingerprint: s.Retries.Fingerprint, Failures: failures}
}

// attempted settles the record of the attempt step s made (err: its error)
// for a release spec whose retries are bounded (begin recorded it): a
// success forgets the record; a failure that wrote nothing (noAttempt) puts
// back what was recorded before; a failed attempt stays counted, and the
// one that uses up the retries is an Event. A record the plan no longer
// needs is forgotten. It returns the step's error, with what recording
// failed.
func (a *Applier) attempted(ctx context.Context, p plan.Plan, s plan.Step, err error) error {
	r := s.Retries
	retries, _ := s.Policy.Retries()
	if r != nil && r.Remedy {
		return a.remedied(ctx, p, s, err)
	}
	if r == nil || !isForward(s.Action) {
		return errors.Join(err, a.remember(ctx, s, err))
	}
	switch {
	case errors.Is(err, errNoAttempt):
		return err // nothing recorded, nothing written
	case err == nil:
		return a.forget(ctx, s)
	case noAttempt(err):
		// Recorded before it started, but it wrote nothing: no attempt.
		if r.Failures == 0 {
			return errors.Join(err, a.forget(ctx, s))
		}
		return errors.Join(err, a.opts.Attempts.Record(ctx, s.Namespace, s.Release, entry(s, r.Failures)))
	case ctx.Err() != nil:
		return err // cut off during the attempt: counted (begin), no Event
	}
	failures := r.Failures + 1
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

// beginRemedy records, before its first Helm write, that onFailure's remedy
// (step s: a rollback or an uninstall) runs for what the release spec would
// install: one remedy per desired state. A remedy that fails (its hook
// fails, it is cut off) is then not run again at every backoff, adding a
// failed revision and running its hooks each time; the plan holds the
// release spec exhausted until the config, the chart or the trigger
// changes (DESIGN §3).
func (a *Applier) beginRemedy(ctx context.Context, s plan.Step) error {
	if s.Retries == nil || !s.Retries.Remedy {
		return nil
	}
	if a.opts.Attempts == nil {
		return errors.New("the remedy cannot be recorded: this autox has no remediation records")
	}
	e := entry(s, s.Retries.Failures)
	e.Remedied = true
	return a.opts.Attempts.Record(ctx, s.Namespace, s.Release, e)
}

// remedied settles the record of remedy step s (err: its error): a remedy
// that wrote nothing did not run, and may run again; one that failed is
// reported — an Event, and the plan shows the release spec exhausted — and
// not run again for this desired state.
func (a *Applier) remedied(ctx context.Context, p plan.Plan, s plan.Step, err error) error {
	switch {
	case err == nil || errors.Is(err, errNoAttempt):
		return err
	case noAttempt(err):
		return errors.Join(err, a.opts.Attempts.Record(ctx, s.Namespace, s.Release, entry(s, s.Retries.Failures)))
	}
	onFailure := s.Policy.Remediation.OnFailure
	a.event(p.Ref, corev1.EventTypeWarning, "RemedyFailed",
		"release %s/%s: onFailure %s failed; autox runs it once per config, chart and trigger, and makes no further attempt nor remedy until one of them changes",
		s.Namespace, s.Release, onFailure)
	a.opts.Log.Warn().Str("spec", s.Spec).Str("releaseSpec", s.ReleaseSpec).Str("release", s.Release).Str("namespace", s.Namespace).
		Str("onFailure", onFailure).Msg("remedy failed; not run again until the config, the chart or the trigger changes")
	return err
}

// forget removes the record of step s's release.
func (a *Applier) forget(ctx context.Context, s plan.Step) error {
	if a.opts.Attempts == nil {
		return nil
	}
	return a.opts.Attempts.Forget(ctx, s.Namespace, s.Release)
}

// remember forgets the record of step s's release when the plan says it
// goes.
func (a *Applier) remember(ctx context.Context, s plan.Step, err error) error {
	if s.Retries == nil || err != nil || !s.Retries.Forget {
		return nil
	}
	return a.forget(ctx, s)
}

func isForward(a plan.Action) bool {
	return a == plan.ActionInstall || a == plan.ActionUpgrade || a == plan.ActionReinstall
}
