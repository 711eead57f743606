package helmops

import (
	"context"
	"errors"
	"fmt"

	"helm.sh/helm/v4/pkg/action"
	helmrelease "helm.sh/helm/v4/pkg/release"
	"helm.sh/helm/v4/pkg/storage/driver"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/internal/redact"
)

// Uninstall removes a release and its history. A release already gone is not
// an error. current is the newest revision the decision saw: when Helm's
// read of the history finds another, nothing is removed (a *ChangedError);
// 0 checks nothing. hide redacts the error and Helm's debug lines (nil hides
// nothing): deleting a release's objects can fail with messages that quote
// them, so the caller passes a Redactor made from the release's values.
//
// Helm's uninstall takes no context and may wait on pre- and post-delete
// hooks up to the Helm timeout, so it runs in a goroutine, and Uninstall
// returns the context's error when ctx ends first: the uninstall goes on in
// the background until Helm ends it, bounded by the Helm timeout, as Helm
// itself lets an install go on after its context. Nothing is started when
// ctx has already ended. The write fence of autox's leadership term (DESIGN
// §5) refuses the background writes once the term has ended.
func (m *Manager) Uninstall(ctx context.Context, namespace, name string, current int, hide *redact.Redactor) error {
	return m.uninstall(ctx, namespace, name, current, hide, false, config.Policy{})
}

// UninstallWith is Uninstall run as p says: its timeout, and its hooks
// skipped with DisableHooks.
func (m *Manager) UninstallWith(ctx context.Context, namespace, name string, current int, hide *redact.Redactor, p config.Policy) error {
	return m.uninstall(ctx, namespace, name, current, hide, false, p)
}

// UninstallMoved is UninstallWith for a release a rename moves (a new name
// or namespace): it also waits, bounded by p's timeout, until the release's
// objects are gone, so that the replacement's install, which may make the
// same objects, does not find one still held by a finalizer (an error, and
// both releases down). A release whose objects are not gone in time is
// removed all the same, and the error says what is left.
func (m *Manager) UninstallMoved(ctx context.Context, namespace, name string, current int, hide *redact.Redactor, p config.Policy) error {
	return m.uninstall(ctx, namespace, name, current, hide, true, p)
}

// uninstall is Uninstall; with wait it also waits, bounded by the Helm
// timeout, until the deleted objects are gone from the API server. Deletion
// propagates in the background: the objects themselves go at once (unless a
// finalizer holds them), their dependents after them, which is all a new
// install of the same objects needs. Foreground deletion would wait on the
// garbage collector for every dependent, and where none runs, for ever.
func (m *Manager) uninstall(ctx context.Context, namespace, name string, current int, hide *redact.Redactor, wait bool, p config.Policy) error {
	if err := notStarted(ctx, "uninstall", namespace, name); err != nil {
		return err
	}
	cfg, err := m.actionConfig(ctx, namespace, hide)
	if err != nil {
		return markNoWrite(fmt.Errorf("cannot uninstall release %s/%s: %w", namespace, name, err))
	}
	premise(cfg, namespace, name, current)
	wrote := watchWrites(cfg)
	if err := m.preflightUninstall(ctx, cfg, namespace, name, hide); err != nil {
		return err
	}
	rec := &deletions{}
	if kc, ok := cfg.KubeClient.(kubeClient); ok {
		kc.deleted = rec
		cfg.KubeClient = kc
	}
	un := action.NewUninstall(cfg)
	m.uninstallWith(un, p, wait)
	var res *helmrelease.UninstallReleaseResponse
	err = m.untilDone(ctx, func() (err error) { res, err = un.Run(name); return err })
	switch {
	case err == nil:
		m.reportLeft(namespace, name, res, rec)
		return nil
	case errors.Is(err, driver.ErrReleaseNotFound):
		return nil
	case errors.Is(err, errLeftRunning):
		return fmt.Errorf("uninstall of release %s/%s: %w", namespace, name, err)
	}
	return wrote.mark(fmt.Errorf("cannot uninstall release %s/%s: %w", namespace, name, hide.Error(err)))
}
