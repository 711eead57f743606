package helmops

import (
	"context"
	"errors"
	"fmt"

	"helm.sh/helm/v4/pkg/action"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/internal/redact"
)

// Rollback rolls a release back to revision toRevision from current, the
// newest revision the decision saw (0 checks nothing; see Uninstall). Helm copies that
// revision's release labels, so the instance and autox labels it carried
// stay. hide redacts as for Uninstall; the caller makes it from the values of
// the current and of the target revision. Like Helm's uninstall, Helm's
// rollback takes no context and may wait on hooks: Rollback returns when ctx
// ends and the rollback goes on in the background, as for Uninstall.
func (m *Manager) Rollback(ctx context.Context, namespace, name string, current, toRevision int, hide *redact.Redactor) error {
	return m.RollbackWith(ctx, namespace, name, current, toRevision, hide, config.Policy{})
}

// RollbackWith is Rollback run as p says (timeout, wait, hooks, history).
func (m *Manager) RollbackWith(ctx context.Context, namespace, name string, current, toRevision int, hide *redact.Redactor, p config.Policy) error {
	if err := notStarted(ctx, "rollback", namespace, name); err != nil {
		return err
	}
	cfg, err := m.actionConfig(ctx, namespace, hide)
	if err != nil {
		return markNoWrite(fmt.Errorf("cannot roll back release %s/%s: %w", namespace, name, err))
	}
	premise(cfg, namespace, name, current)
	wrote := watchWrites(cfg)
	if err := m.preflightRollback(ctx, cfg, namespace, name, toRevision, hide); err != nil {
		return err
	}
	rb := action.NewRollback(cfg)
	rb.Version = toRevision
	err = m.untilDone(ctx, func() error {
		// The target revision says how it was applied (Helm 4's "auto" for
		// a rollback, resolved here).
		target, err := cfg.Releases.Get(name, toRevision)
		if err != nil {
			return fmt.Errorf("cannot read revision %d: %w", toRevision, err)
		}
		to, err := asV1(target)
		if err != nil {
			return err
		}
		m.rollbackWith(rb, p, to.ApplyMethod)
		if err := rb.Run(name); err != nil {
			return err
		}
		m.learnCRDs(cfg, namespace, name, to.Manifest)
		return nil
	})
	if errors.Is(err, errLeftRunning) {
		return fmt.Errorf("rollback of release %s/%s to revision %d: %w", namespace, name, toRevision, err)
	}
	if err != nil {
		return wrote.mark(fmt.Errorf("cannot roll back release %s/%s to revision %d: %w", namespace, name, toRevision, hide.Error(err)))
	}
	return nil
}
