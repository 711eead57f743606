package helmops

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/kube"
	release "helm.sh/helm/v4/pkg/release/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/cli-runtime/pkg/resource"
)

// Reinstall replaces a release by uninstalling it and installing it anew
// (onChange: reinstall, and a release that never reached deployed) and
// returns the new revision (1). A release that cannot be replaced is never
// removed (DESIGN §3): the new release is first rendered and validated
// without writing anything (dryRunInstall), and only then is the old one
// uninstalled. While discovery is partial, nothing is done: the dry run
// fails with a *PartialDiscoveryError, and so does the install after the
// uninstall should discovery turn partial between them (the release is then
// absent, and installed by a later reconcile). The install starts only once
// the old release's objects are gone from the API server (see uninstall), so
// that it does not fail on, or adopt, an object still being deleted (a
// finalizer holds it).
//
// Nothing is started when ctx has already ended, or ends during the dry run.
// The pair runs on ctx alone, with no deadline of its own: Helm bounds each
// of its phases by the Helm timeout, and returning early while Helm's
// goroutine goes on would let the next reconcile of the release start beside
// it — two writers in one process. autox cancels ctx only when a stop has
// waited --shutdown-timeout or the leadership term has ended (its writes are
// then refused anyway); a release left uninstalled then is installed by the
// next leader, like any absent release.
func (m *Manager) Reinstall(ctx context.Context, d Target) (int, error) {
	if err := notStarted(ctx, "reinstall", d.Namespace, d.Name); err != nil {
		return 0, err
	}
	if err := m.dryRunInstall(ctx, d); err != nil {
		if err := notStarted(ctx, "reinstall", d.Namespace, d.Name); err != nil {
			return 0, err // cut off during the dry run, which writes nothing
		}
		if partial := (*PartialDiscoveryError)(nil); errors.As(err, &partial) {
			return 0, markNoWrite(fmt.Errorf("cannot reinstall release %s/%s now; the running release is kept: %w", d.Namespace, d.Name, err))
		}
		return 0, markNoWrite(fmt.Errorf("cannot reinstall release %s/%s: the new release does not render or validate; the running release is kept: %w", d.Namespace, d.Name, err))
	}
	if err := notStarted(ctx, "reinstall", d.Namespace, d.Name); err != nil {
		return 0, err
	}
	if err := m.uninstall(ctx, d.Namespace, d.Name, d.Current, d.Redact, true, d.Policy); err != nil {
		return 0, fmt.Errorf("cannot reinstall release %s/%s: the new release was not installed: %w", d.Namespace, d.Name, err)
	}
	// The old release is gone: whatever the install says, this wrote.
	rev, err := m.install(ctx, d, true)
	return rev, markWrote(err)
}

// dryRunInstall checks that d would install, writing nothing. Helm's install
// dry run (server mode, so that templates' lookup sees the cluster as in the
// real install) renders the chart and checks the values schema, does not
// refuse the name the running release holds, builds the objects against the
// cluster's REST mapping (an unknown kind fails), refuses objects another
// release owns, and writes no record. It does not ask the API server about
// the objects, which then refuses a bad field value only after the old
// release is gone; so every object, and every install hook, is also sent as a
// server-side dry-run create. An object of the running release answers
// AlreadyExists, which the API server checks only after validating it.
func (m *Manager) dryRunInstall(ctx context.Context, d Target) error {
	return m.dryRunInstallWith(ctx, d, true)
}

// dryRunInstallWith is dryRunInstall; complete as for actionConfigFor: a
// reinstall's dry run refuses a partial API list (it deletes), an install's
// preflight does not (the install itself goes on without it).
func (m *Manager) dryRunInstallWith(ctx context.Context, d Target, complete bool) error {
	in, cfg, err := m.newInstall(ctx, d, complete)
	if err != nil {
		return err
	}
	in.DryRunStrategy = action.DryRunServer
	// Helm renders (its lookups read the cluster) and maps the objects
	// without a context, and the dry-run creates take none either: the
	// caller stops waiting when ctx ends, which a dry run, writing nothing,
	// allows.
	err = m.untilDone(ctx, func() error {
		rel, err := dryRun(ctx, in, d)
		if err != nil {
			return err
		}
		return dryRunCreate(ctx, cfg.KubeClient, installManifest(rel))
	})
	if err != nil {
		m.forgetCapabilities()
		return d.Redact.Error(err)
	}
	return nil
}

// dryRun is the release in (set up for a dry run) renders for d.
func dryRun(ctx context.Context, in *action.Install, d Target) (*release.Release, error) {
	rendered, err := in.RunWithContext(ctx, d.Chart, d.Values)
	if err != nil {
		return nil, err
	}
	return asV1(rendered)
}

// installManifest is what an install of rel creates: its manifest and its
// install hooks (not, e.g., its test hooks, which only `helm test` creates).
func installManifest(rel *release.Release) string {
	return withHooks(rel, release.HookPreInstall, release.HookPostInstall)
}

// dryRunCreate sends each object of manifest to the API server as a dry-run
// create and returns every refusal but AlreadyExists.
func dryRunCreate(ctx context.Context, kc kube.Interface, manifest string) error {
	return eachObject(ctx, kc, manifest, func(info *resource.Info) error {
		_, err := resource.NewHelper(info.Client, info.Mapping).DryRun(true).Create(info.Namespace, true, info.Object)
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("the API server refuses %s: %w", info.ObjectName(), err)
		}
		return nil
	})
}

// eachObject calls check for each object of manifest and returns every
// error it returned; it stops when ctx ends.
func eachObject(ctx context.Context, kc kube.Interface, manifest string, check func(*resource.Info) error) error {
	objects, err := kc.Build(strings.NewReader(manifest), false)
	if err != nil {
		return fmt.Errorf("cannot build the release's objects: %w", err)
	}
	var errs []error
	for _, info := range objects {
		if err := ctx.Err(); err != nil {
			return err
		}
		errs = append(errs, check(info))
	}
	return errors.Join(errs...)
}
