package helmops

import (
	"context"
	"errors"
	"fmt"

	"helm.sh/helm/v4/pkg/action"
	helmrelease "helm.sh/helm/v4/pkg/release"
	release "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage/driver"
)

// What `autox plan --diff` compares (DESIGN §5: plan writes nothing): the
// manifest a release's record holds, and the one an install or upgrade of
// the new config would apply, rendered by Helm's client-side dry run of that
// same install or upgrade action (newInstall, newUpgrade) with the cluster's
// Kubernetes version and API list. A client-side render runs no lookup (a
// chart's lookup finds nothing, as in `helm template`) and sends nothing
// but reads; the release storage it is given refuses every write besides.

// errReadOnly is what the storage of a render answers a write with: a dry
// run that tried to write is a bug, never a write.
var errReadOnly = errors.New("a render writes no release record")

// readOnly is a release storage driver that reads and refuses every write.
type readOnly struct{ driver.Driver }

func (readOnly) Create(string, helmrelease.Releaser) error { return errReadOnly }
func (readOnly) Update(string, helmrelease.Releaser) error { return errReadOnly }
func (readOnly) Delete(string) (helmrelease.Releaser, error) {
	return nil, errReadOnly
}

// Render returns the manifest, hooks included, that an upgrade of d (upgrade
// set) or an install of it (an install, and the install of a reinstall)
// would apply, writing nothing. An upgrade renders with the revision and
// the release options Helm's upgrade gives it; it fails as the upgrade
// would (the release locked, an object of the chart owned by another
// release). Errors are redacted with d.Redact.
func (m *Manager) Render(ctx context.Context, d Target, upgrade bool) (string, error) {
	what := "install"
	if upgrade {
		what = "upgrade"
	}
	if err := notStarted(ctx, "render of the "+what, d.Namespace, d.Name); err != nil {
		return "", err
	}
	manifest, err := m.render(ctx, d, upgrade)
	if err != nil {
		return "", fmt.Errorf("cannot render the %s of release %s/%s: %w", what, d.Namespace, d.Name, d.Redact.Error(err))
	}
	return manifest, nil
}

func (m *Manager) render(ctx context.Context, d Target, upgrade bool) (string, error) {
	var rendered helmrelease.Releaser
	if upgrade {
		// As the upgrade itself: a partial API list is refused.
		cfg, err := m.actionConfigFor(ctx, d.Namespace, d.Redact, true)
		if err != nil {
			return "", err
		}
		cfg.Releases.Driver = readOnly{cfg.Releases.Driver}
		up := m.newUpgrade(cfg, d)
		up.DryRunStrategy = action.DryRunClient
		err = m.untilDone(ctx, func() error {
			newest, err := lastRelease(cfg, d.Name)
			if err != nil {
				return err
			}
			m.upgradeWith(up, d.Policy, newest.ApplyMethod)
			rendered, err = up.Run(d.Name, d.Chart, d.Values)
			return err
		})
		if err != nil {
			return "", err
		}
	} else {
		in, cfg, err := m.newInstall(ctx, d, true)
		if err != nil {
			return "", err
		}
		// Helm's client-side install renders with its built-in API list,
		// to which it adds these: the cluster's.
		kv := cfg.Capabilities.KubeVersion
		in.KubeVersion, in.APIVersions = &kv, cfg.Capabilities.APIVersions
		in.DryRunStrategy = action.DryRunClient
		cfg.Releases.Driver = readOnly{cfg.Releases.Driver}
		err = m.untilDone(ctx, func() (err error) {
			rendered, err = in.Run(d.Chart, d.Values)
			return err
		})
		if err != nil {
			return "", err
		}
	}
	rel, err := asV1(rendered)
	if err != nil {
		return "", err
	}
	return withAllHooks(rel), nil
}

// Recorded returns the manifest, hooks included, of revision revision (0:
// the newest) of release namespace/name as its record holds it.
func (m *Manager) Recorded(ctx context.Context, namespace, name string, revision int) (string, error) {
	cfg, err := m.actionConfig(ctx, namespace, nil)
	if err != nil {
		return "", fmt.Errorf("cannot read release %s/%s: %w", namespace, name, err)
	}
	var rel *release.Release
	err = m.untilDone(ctx, func() error {
		if revision == 0 {
			newest, err := lastRelease(cfg, name)
			rel = newest
			return err
		}
		stored, err := cfg.Releases.Get(name, revision)
		if err != nil {
			return err
		}
		rel, err = asV1(stored)
		return err
	})
	if err != nil {
		return "", fmt.Errorf("cannot read revision %d of release %s/%s: %w", revision, namespace, name, err)
	}
	return withAllHooks(rel), nil
}

// withAllHooks is rel's manifest followed by every hook's.
func withAllHooks(rel *release.Release) string {
	manifest := rel.Manifest
	for _, h := range rel.Hooks {
		manifest += "\n---\n" + h.Manifest
	}
	return manifest
}
