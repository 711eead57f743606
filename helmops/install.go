package helmops

import (
	"context"
	"fmt"

	"helm.sh/helm/v4/pkg/action"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	helmrelease "helm.sh/helm/v4/pkg/release"
	release "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage/driver"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/internal/format"
	"github.com/autox-dev/autox/internal/redact"
)

// Target is the release an install, upgrade or reinstall makes: what a
// plan step desires, with its chart loaded for this operation.
type Target struct {
	Spec        string
	ReleaseSpec string
	// Object is the selector spec's object the release serves; zero for a named spec.
	Object    format.Object
	Name      string
	Namespace string
	// Chart must be freshly loaded for this operation (see ChartSource).
	Chart  *chart.Chart
	Values map[string]interface{}
	// Digest identifies chart and values for the metadata fast path; "" for none.
	Digest string
	// Revision is the revision an upgrade will create (the current one + 1).
	Revision int
	// Current is the newest revision the decision saw (0: none, or not
	// checked): an upgrade, or the uninstall of a reinstall, fails before
	// writing when Helm's own read finds another (see premised).
	Current int
	// Redact hides secrets in the operation's errors and Helm's debug lines;
	// nil hides nothing. The caller makes it from these Values and the
	// running release's, since an error may quote either.
	Redact *redact.Redactor
	// Policy is how the operation runs (timeout, wait, hooks, CRDs, history).
	Policy config.Policy
}

// newInstall returns Helm's install action for d, shared by Install and the
// dry run of Reinstall so that what is validated is what is installed;
// complete as for actionConfigFor.
func (m *Manager) newInstall(ctx context.Context, d Target, complete bool) (*action.Install, *action.Configuration, error) {
	cfg, err := m.actionConfigFor(ctx, d.Namespace, d.Redact, complete)
	if err != nil {
		return nil, nil, fmt.Errorf("cannot install release %s/%s: %w", d.Namespace, d.Name, err)
	}
	in := action.NewInstall(cfg)
	in.ReleaseName = d.Name
	in.Namespace = d.Namespace
	in.Labels = m.releaseLabels(d, 1)
	m.installWith(in, d.Policy)
	in.DisableOpenAPIValidation = skipClientValidation
	if kc, ok := cfg.KubeClient.(kubeClient); ok && !in.ServerSideApply {
		kc.clientSideCreates = true
		cfg.KubeClient = kc
	}
	return in, cfg, nil
}

// Install installs a new release and returns its revision. Nothing is
// started when ctx has already ended; when ctx ends during the install it
// returns at once and the install goes on in the background (see untilDone).
// Helm's own RunWithContext is not used: on cancellation it marks the
// release failed while its install goroutine still reads that release — a
// data race inside Helm — and writes that record during a stop. A new
// release deletes nothing: it is installed while discovery is partial.
func (m *Manager) Install(ctx context.Context, d Target) (int, error) {
	return m.install(ctx, d, false)
}

// install is Install; complete as for actionConfigFor.
func (m *Manager) install(ctx context.Context, d Target, complete bool) (int, error) {
	if err := notStarted(ctx, "install", d.Namespace, d.Name); err != nil {
		return 0, err
	}
	if err := m.preflight(ctx, d); err != nil {
		return 0, err
	}
	in, cfg, err := m.newInstall(ctx, d, complete)
	if err != nil {
		return 0, markNoWrite(err)
	}
	records := cfg.Releases.Driver
	cfg.Releases.Driver = &seenFree{Driver: records, name: d.Name}
	wrote := watchWrites(cfg)
	if !complete {
		m.answerConflictsFromLists(cfg, in, d.Chart, wrote)
	}
	var rel *release.Release
	err = m.untilDone(ctx, func() (err error) {
		// Helm checks that the name is free before it creates the chart's
		// CRDs, and autox before it writes them itself (CreateReplace): as
		// seenFree answers Helm's check, this one reads the records.
		if len(d.Chart.CRDObjects()) > 0 && d.Policy.CRDs != config.CRDsSkip {
			if err := nameFree(records, d.Name); err != nil {
				return err
			}
		}
		if d.Policy.CRDs == config.CRDsCreateReplace {
			if err := m.applyCRDs(cfg, d.Chart, true); err != nil {
				return err
			}
		}
		done, err := in.Run(d.Chart, d.Values)
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
		return 0, wrote.mark(fmt.Errorf("cannot install release %s/%s: %w", d.Namespace, d.Name, d.Redact.Error(err)))
	}
	if len(d.Chart.CRDObjects()) > 0 && !in.SkipCRDs {
		m.forgetAPIs() // Helm created them: the next chart may use them
	}
	return rel.Version, nil
}

// seenFree is the storage driver of an install, which its caller decided
// from records showing no release of that name (a reconcile's reads just
// before, or Reinstall's uninstall, which waits until they are gone). Helm
// reads the name's history once more before it writes, a LIST per install
// whose cost grows with the records of the namespace: seenFree answers that
// one query with "none". It stays safe when someone installs the name in
// between: Helm's first write creates the record of revision 1, which the
// API server refuses when it exists, so the install fails writing nothing.
type seenFree struct {
	driver.Driver
	name    string
	checked bool
}

func (s *seenFree) Query(labels map[string]string) ([]helmrelease.Releaser, error) {
	if !s.checked && len(labels) == 2 && labels["name"] == s.name && labels["owner"] == "helm" {
		s.checked = true
		return nil, driver.ErrReleaseNotFound
	}
	return s.Driver.Query(labels)
}

// releaseLabels are the Helm release labels an operation of m writes for d
// (the release format's ReleaseLabels, with m's instance).
func (m *Manager) releaseLabels(d Target, revision int) map[string]string {
	return format.ReleaseLabels(format.Owner{Spec: d.Spec, ReleaseSpec: d.ReleaseSpec, Instance: m.opts.Instance, Object: d.Object},
		d.Digest, revision)
}
