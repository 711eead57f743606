package helmops

import (
	"context"
	"fmt"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/release"
)

// Upgrade upgrades a release to exactly d's chart and values (ResetValues:
// nothing of the previous revision's values survives) and returns the
// revision. Nothing is started when ctx has already ended; when ctx ends
// during the upgrade it returns at once, as Install does. While discovery is
// partial it fails with a *PartialDiscoveryError and changes nothing.
func (m *Manager) Upgrade(ctx context.Context, d Target) (int, error) {
	if err := notStarted(ctx, "upgrade", d.Namespace, d.Name); err != nil {
		return 0, err
	}
	if err := m.preflightUpgrade(ctx, d); err != nil {
		return 0, err
	}
	cfg, err := m.actionConfigFor(ctx, d.Namespace, d.Redact, true)
	if err != nil {
		return 0, fmt.Errorf("cannot upgrade release %s/%s: %w", d.Namespace, d.Name, err)
	}
	premise(cfg, d.Namespace, d.Name, d.Current)
	up := action.NewUpgrade(cfg)
	up.Namespace = d.Namespace
	up.Labels = m.releaseLabels(d, d.Revision)
	up.ResetValues = true
	m.upgradeWith(up, d.Policy)
	up.DisableOpenAPIValidation = skipClientValidation
	var rel *release.Release
	err = m.untilDone(ctx, func() (err error) {
		if apply, replace := crdsOnUpgrade(d.Policy); apply {
			if err := m.applyCRDs(cfg, d.Chart, replace); err != nil {
				return err
			}
		}
		rel, err = up.Run(d.Name, d.Chart, d.Values)
		return err
	})
	if err != nil {
		m.forgetCapabilities()
		return 0, fmt.Errorf("cannot upgrade release %s/%s: %w", d.Namespace, d.Name, d.Redact.Error(err))
	}
	return rel.Version, nil
}
