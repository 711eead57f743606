package helmops

import (
	"context"
	"fmt"

	"helm.sh/helm/v4/pkg/action"
	release "helm.sh/helm/v4/pkg/release/v1"
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
		return 0, markNoWrite(fmt.Errorf("cannot upgrade release %s/%s: %w", d.Namespace, d.Name, err))
	}
	premise(cfg, d.Namespace, d.Name, d.Current)
	wrote := watchWrites(cfg)
	up := m.newUpgrade(cfg, d)
	var rel *release.Release
	err = m.untilDone(ctx, func() (err error) {
		// The newest revision says how it was applied (Helm 4's "auto",
		// resolved here); premised checks this first read of the history
		// against the decision and answers Helm's own from it.
		newest, err := lastRelease(cfg, d.Name)
		if err != nil {
			return err
		}
		m.upgradeWith(up, d.Policy, newest.ApplyMethod)
		if apply, replace := crdsOnUpgrade(d.Policy); apply {
			// Helm refuses to upgrade a release with an operation in
			// progress only in up.Run: the CRDs wait for that check too.
			if newest.Info != nil && newest.Info.Status.IsPending() {
				return fmt.Errorf("release %s/%s has an operation in progress (%s); its CustomResourceDefinitions were not written", d.Namespace, d.Name, newest.Info.Status)
			}
			if err := m.applyCRDs(cfg, d.Chart, replace); err != nil {
				return err
			}
		}
		done, err := up.Run(d.Name, d.Chart, d.Values)
		if err != nil {
			return err
		}
		if rel, err = asV1(done); err == nil {
			m.learnCRDs(cfg, d.Namespace, d.Name, rel.Manifest)
		}
		return err
	})
	if err != nil {
		m.forgetCapabilities()
		return 0, wrote.mark(fmt.Errorf("cannot upgrade release %s/%s: %w", d.Namespace, d.Name, d.Redact.Error(err)))
	}
	return rel.Version, nil
}

// newUpgrade returns Helm's upgrade action for d, shared by Upgrade and
// Render so that what a reviewer's diff shows is what is applied; the
// caller sets it up for d's policy from the newest revision (upgradeWith).
func (m *Manager) newUpgrade(cfg *action.Configuration, d Target) *action.Upgrade {
	up := action.NewUpgrade(cfg)
	up.Namespace = d.Namespace
	up.Labels = m.releaseLabels(d, d.Revision)
	up.ResetValues = true
	up.DisableOpenAPIValidation = skipClientValidation
	return up
}
