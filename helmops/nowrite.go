package helmops

import (
	"errors"
	"sync/atomic"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/kube"
	helmrelease "helm.sh/helm/v4/pkg/release"
	"helm.sh/helm/v4/pkg/storage/driver"
)

// Which failed operations wrote nothing (DESIGN §3, remediation): only an
// attempt that wrote counts against a release spec's remediation retries. A
// refusal before the first write — the release changed since it was read
// (*ChangedError), discovery is partial (*PartialDiscoveryError), a
// preflight or dry run refused, Helm refused an object that exists, the
// chart did not render, the operation was not started — leaves the release
// as it was: trying again later is no new failure of it.
//
// An operation tells it by watching its own writes (watchWrites): every
// write of Helm's kube client and of the release storage, and the CRDs
// autox applies itself. An error after none is marked (noWrite); one after
// a write, or from an operation still running in the background
// (errLeftRunning: it may write yet), is not.

// WroteNothing reports whether err, the error of a helmops operation, says
// that the operation wrote nothing: no release record, no object, no CRD.
// An error it cannot tell about is taken as written (false).
func WroteNothing(err error) bool {
	nothing, _ := wroteNothing(err)
	return nothing
}

// wroteNothing walks err's chain from the outside: the first mark found
// decides (decided true). A Reinstall marks what its install after the
// uninstall returns as written (didWrite) whatever the install's own error
// says, so the outermost mark wins.
func wroteNothing(err error) (nothing, decided bool) {
	for err != nil {
		var (
			nw      noWrite
			dw      didWrite
			changed *ChangedError
			partial *PartialDiscoveryError
		)
		switch {
		case asOnly(err, &dw):
			return false, true
		case asOnly(err, &nw), asOnly(err, &changed), asOnly(err, &partial):
			return true, true
		case err == errLeftRunning: //nolint:errorlint // the mark itself, not what wraps it
			return false, true
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				if nothing, decided := wroteNothing(e); decided {
					return nothing, true
				}
			}
			return false, false
		default:
			return false, false
		}
	}
	return false, false
}

// asOnly is errors.As on err itself, not on what it wraps.
func asOnly[T error](err error, target *T) bool {
	t, ok := err.(T)
	if ok {
		*target = t
	}
	return ok
}

// noWrite marks the error of an operation that wrote nothing.
type noWrite struct{ err error }

func (e noWrite) Error() string { return e.err.Error() }
func (e noWrite) Unwrap() error { return e.err }

// didWrite marks the error of an operation that wrote, whatever it wraps.
type didWrite struct{ err error }

func (e didWrite) Error() string { return e.err.Error() }
func (e didWrite) Unwrap() error { return e.err }

// markNoWrite marks err as the error of an operation that wrote nothing.
func markNoWrite(err error) error {
	if err == nil {
		return nil
	}
	return noWrite{err}
}

// markWrote marks err as the error of an operation that wrote.
func markWrote(err error) error {
	if err == nil {
		return nil
	}
	return didWrite{err}
}

// writes tells whether an operation has written.
type writes struct{ any atomic.Bool }

func (w *writes) note() {
	if w != nil {
		w.any.Store(true)
	}
}

// mark marks err, the error of the operation w watched, as nothing
// written when nothing was, and as written when something was: a refusal
// after a write (a premise that changed when an upgrade prunes, after it
// wrote the chart's CRDs) is no longer "nothing written". An operation left
// running may write yet: its error stays unmarked (taken as written).
func (w *writes) mark(err error) error {
	if err == nil || w == nil || errors.Is(err, errLeftRunning) {
		return err
	}
	if w.any.Load() {
		return markWrote(err)
	}
	return markNoWrite(err)
}

// watchWrites makes cfg's operation note its writes: those of its kube
// client and of its release storage (every record Helm creates, updates or
// deletes). Called once the storage driver is complete.
func watchWrites(cfg *action.Configuration) *writes {
	w := &writes{}
	if kc, ok := cfg.KubeClient.(kubeClient); ok {
		kc.writes = w
		cfg.KubeClient = kc
	} else {
		w.note() // a client that cannot be watched: taken as written
	}
	cfg.Releases.Driver = &recordWrites{Driver: cfg.Releases.Driver, w: w}
	return w
}

// writesOf is what watches cfg's writes, nil when nothing does.
func writesOf(cfg *action.Configuration) *writes {
	if kc, ok := cfg.KubeClient.(kubeClient); ok {
		return kc.writes
	}
	return nil
}

// recordWrites notes the writes of a release storage driver.
type recordWrites struct {
	driver.Driver
	w *writes
}

func (r *recordWrites) Create(key string, rls helmrelease.Releaser) error {
	r.w.note()
	return r.Driver.Create(key, rls)
}

func (r *recordWrites) Update(key string, rls helmrelease.Releaser) error {
	r.w.note()
	return r.Driver.Update(key, rls)
}

// Delete notes a write unless the premise refused it before it was sent
// (premised.Delete's re-check: nothing deleted).
func (r *recordWrites) Delete(key string) (helmrelease.Releaser, error) {
	rls, err := r.Driver.Delete(key)
	if changed := (*ChangedError)(nil); !errors.As(err, &changed) {
		r.w.note()
	}
	return rls, err
}

// The kube client's writes (kubeClient in waiter.go carries writes).

func (c kubeClient) Create(resources kube.ResourceList, options ...kube.ClientCreateOption) (*kube.Result, error) {
	c.writes.note()
	if c.clientSideCreates {
		return createClientSide(resources)
	}
	return c.Client.Create(resources, options...)
}

func (c kubeClient) Update(original, target kube.ResourceList, options ...kube.ClientUpdateOption) (*kube.Result, error) {
	c.writes.note()
	return c.Client.Update(original, target, options...)
}
