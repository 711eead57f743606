package helmops

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/kube"
	release "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage/driver"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/resource"

	"github.com/autox-dev/autox/internal/redact"
)

// Preflights of operations as a service account (DESIGN §5): a Forbidden
// for an account is an error that changes nothing. Helm refuses nothing up
// front: it writes a pending record, then the objects one kind after the
// other, and a refusal in the middle leaves a failed revision and the
// objects written before it. So before an operation as an account, every
// write it will make is sent first as a server-side dry run as that
// account — which the API server authorizes exactly as the write itself,
// and which writes nothing — and the operation starts only when all pass.
// autox's own identity needs none: its permissions are the installation's.

// preflight checks an install: the reinstall's dry run (Helm's server dry
// run, then a dry-run create of every object and install hook), as the
// account. Like the install, it goes on while discovery is partial: a new
// release deletes nothing.
func (m *Manager) preflight(ctx context.Context, d Target) error {
	if m.as.IsZero() {
		return nil
	}
	if err := m.dryRunInstallWith(ctx, d, false); err != nil {
		return m.refused("install", d.Namespace, d.Name, err)
	}
	return nil
}

// preflightUpgrade checks an upgrade to d: the release as Helm's server dry
// run renders it (as the account), then each of its objects and upgrade
// hooks — a dry-run create of one that does not exist, a dry-run patch of
// one that does — and a dry-run delete of each object the upgrade drops.
func (m *Manager) preflightUpgrade(ctx context.Context, d Target) error {
	if m.as.IsZero() {
		return nil
	}
	// As the upgrade itself: a partial API list is refused.
	cfg, err := m.actionConfigFor(ctx, d.Namespace, d.Redact, true)
	if err != nil {
		return err
	}
	up := action.NewUpgrade(cfg)
	up.Namespace = d.Namespace
	up.ResetValues = true
	up.DisableOpenAPIValidation = skipClientValidation
	up.DryRunStrategy = action.DryRunServer
	err = func() error {
		current, err := lastRelease(cfg, d.Name)
		if err != nil {
			return fmt.Errorf("cannot read the release's current revision: %w", err)
		}
		// As the upgrade will: applied as its newest revision says.
		m.upgradeWith(up, d.Policy, current.ApplyMethod)
		rendered, err := up.RunWithContext(ctx, d.Name, d.Chart, d.Values)
		if err != nil {
			return err
		}
		target, err := asV1(rendered)
		if err != nil {
			return err
		}
		return dryRunChange(ctx, cfg.KubeClient, current.Manifest, withHooks(target, release.HookPreUpgrade, release.HookPostUpgrade))
	}()
	if err != nil {
		m.forgetCapabilities()
		return m.refused("upgrade", d.Namespace, d.Name, d.Redact.Error(err))
	}
	return nil
}

// preflightRollback checks a rollback to revision toRevision as
// preflightUpgrade checks an upgrade to it.
func (m *Manager) preflightRollback(ctx context.Context, cfg *action.Configuration, namespace, name string, toRevision int, hide *redact.Redactor) error {
	if m.as.IsZero() {
		return nil
	}
	err := func() error {
		current, err := lastRelease(cfg, name)
		if err != nil {
			return fmt.Errorf("cannot read the release's current revision: %w", err)
		}
		stored, err := cfg.Releases.Get(name, toRevision)
		if err != nil {
			return fmt.Errorf("cannot read revision %d: %w", toRevision, err)
		}
		target, err := asV1(stored)
		if err != nil {
			return err
		}
		return dryRunChange(ctx, cfg.KubeClient, current.Manifest, withHooks(target, release.HookPreRollback, release.HookPostRollback))
	}()
	if err != nil {
		return m.refused("rollback", namespace, name, hide.Error(err))
	}
	return nil
}

// preflightUninstall checks an uninstall: a dry-run delete of each object
// of the release's current revision, and a dry-run create of its delete
// hooks. A release already gone needs nothing.
func (m *Manager) preflightUninstall(ctx context.Context, cfg *action.Configuration, namespace, name string, hide *redact.Redactor) error {
	if m.as.IsZero() {
		return nil
	}
	err := func() error {
		current, err := lastRelease(cfg, name)
		if errors.Is(err, driver.ErrReleaseNotFound) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("cannot read the release's current revision: %w", err)
		}
		hooks := withHooks(&release.Release{Hooks: current.Hooks}, release.HookPreDelete, release.HookPostDelete)
		return dryRunChange(ctx, cfg.KubeClient, current.Manifest, hooks)
	}()
	if err != nil {
		return m.refused("uninstall", namespace, name, hide.Error(err))
	}
	return nil
}

func (m *Manager) refused(operation, namespace, name string, err error) error {
	return markNoWrite(fmt.Errorf("cannot %s release %s/%s as %s: its dry run as that account fails, so nothing was changed: %w", operation, namespace, name, m.as, err))
}

// withHooks is rel's manifest and its hooks of the given events.
func withHooks(rel *release.Release, events ...release.HookEvent) string {
	var b strings.Builder
	b.WriteString(rel.Manifest)
	for _, h := range rel.Hooks {
		for _, e := range h.Events {
			if hookOf(e, events) {
				b.WriteString("\n---\n")
				b.WriteString(h.Manifest)
				break
			}
		}
	}
	return b.String()
}

func hookOf(e release.HookEvent, events []release.HookEvent) bool {
	for _, want := range events {
		if e == want {
			return true
		}
	}
	return false
}

// dryRunChange sends, as dry runs, the writes that take the objects of
// manifest current to those of target: a create of each target object that
// does not exist, a patch (an empty one: the API server authorizes the verb
// whatever the patch) of each that does, a delete of each current object
// the target drops. It returns every refusal.
func dryRunChange(ctx context.Context, kc kube.Interface, current, target string) error {
	targets, err := kc.Build(strings.NewReader(target), false)
	if err != nil {
		return fmt.Errorf("cannot build the release's objects: %w", err)
	}
	currents, err := kc.Build(strings.NewReader(current), false)
	if err != nil {
		return fmt.Errorf("cannot build the release's current objects: %w", err)
	}
	kept := map[string]bool{}
	var errs []error
	for _, info := range targets {
		if err := ctx.Err(); err != nil {
			return err
		}
		kept[objectKey(info)] = true
		h := resource.NewHelper(info.Client, info.Mapping).DryRun(true)
		_, err := h.Get(info.Namespace, info.Name)
		switch {
		case apierrors.IsNotFound(err):
			_, err = h.Create(info.Namespace, true, info.Object)
		case err == nil:
			_, err = h.Patch(info.Namespace, info.Name, types.MergePatchType, []byte("{}"), &metav1.PatchOptions{})
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("the API server refuses %s: %w", info.ObjectName(), err))
		}
	}
	for _, info := range currents {
		if err := ctx.Err(); err != nil {
			return err
		}
		if kept[objectKey(info)] {
			continue
		}
		_, err := resource.NewHelper(info.Client, info.Mapping).DryRun(true).DeleteWithOptions(info.Namespace, info.Name, &metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("the API server refuses to delete %s: %w", info.ObjectName(), err))
		}
	}
	return errors.Join(errs...)
}

func objectKey(info *resource.Info) string {
	return info.Mapping.GroupVersionKind.GroupKind().String() + "/" + info.Namespace + "/" + info.Name
}
