// Package helmops makes every Helm SDK call autox needs: install, upgrade,
// uninstall, reinstall and rollback of one release, and the inventory of the
// releases autox manages. It decides nothing: callers (package triggers) say
// what to do; this package does it with the real Helm storage drivers.
package helmops

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Release labels that mark a Helm release as autox's (DESIGN §4). They are
// Helm release labels, so the storage driver also puts them on the record's
// Secret or ConfigMap, where a label selector finds them.
const (
	LabelSpec        = "autox.dev/spec"
	LabelReleaseSpec = "autox.dev/release-spec"
	// LabelDigest is a digest of the chart name, version and values autox
	// installed; with LabelRevision it lets a pass tell from record metadata
	// alone that a release needs nothing (see triggers.InSync).
	LabelDigest = "autox.dev/digest"
	// LabelRevision is the revision autox's own operation created. Any other
	// Helm write (a manual upgrade or rollback) creates a record whose Helm
	// revision differs, which sends the release to the full comparison.
	LabelRevision = "autox.dev/revision"
)

// Storage drivers autox supports for release records.
const (
	DriverSecret    = "secret"
	DriverConfigMap = "configmap"
)

// Options configure a Manager.
type Options struct {
	RESTConfig *rest.Config
	// StorageDriver is DriverSecret (default) or DriverConfigMap.
	StorageDriver string
	// Timeout bounds each Helm operation (--helm-timeout).
	Timeout time.Duration
	// MaxHistory bounds the revisions kept per release (--max-history).
	MaxHistory int
	Log        zerolog.Logger
}

// Manager runs Helm operations and reads release records.
type Manager struct {
	opts      Options
	clientset kubernetes.Interface
	discovery *sharedDiscovery

	capsMu sync.Mutex
	caps   *chartutil.Capabilities
	capsAt time.Time
}

// capabilitiesTTL bounds how stale the cluster's API list may be for chart
// rendering (.Capabilities) and resource mapping: a CRD installed meanwhile
// is seen within this time, or at once after an operation failed.
const capabilitiesTTL = 5 * time.Minute

// capabilities returns the cluster's version and API list, shared by all
// operations. Helm computes them per action.Configuration and invalidates
// discovery each time, which costs dozens of requests per release.
func (m *Manager) capabilities() (*chartutil.Capabilities, error) {
	m.capsMu.Lock()
	defer m.capsMu.Unlock()
	if m.caps != nil && time.Since(m.capsAt) < capabilitiesTTL {
		return m.copyCaps(), nil
	}
	if err := m.discovery.init(); err != nil {
		return nil, err
	}
	m.discovery.disc.Invalidate()
	v, err := m.discovery.disc.ServerVersion()
	if err != nil {
		return nil, fmt.Errorf("cannot read the Kubernetes version: %w", err)
	}
	apis, err := action.GetVersionSet(m.discovery.disc)
	if err != nil && !discovery.IsGroupDiscoveryFailedError(err) {
		return nil, fmt.Errorf("cannot list the cluster's API versions: %w", err)
	}
	m.caps = &chartutil.Capabilities{
		APIVersions: apis,
		KubeVersion: chartutil.KubeVersion{Version: v.GitVersion, Major: v.Major, Minor: v.Minor},
		HelmVersion: chartutil.DefaultCapabilities.HelmVersion,
	}
	m.capsAt = time.Now()
	return m.copyCaps(), nil
}

func (m *Manager) copyCaps() *chartutil.Capabilities {
	c := *m.caps
	c.APIVersions = append(chartutil.VersionSet(nil), m.caps.APIVersions...)
	return &c
}

// forgetCapabilities makes the next operation read discovery anew; called
// after a failed operation, which may have failed on a CRD not yet known.
func (m *Manager) forgetCapabilities() {
	m.capsMu.Lock()
	m.caps = nil
	m.capsMu.Unlock()
}

// New returns a Manager for the cluster of opts.RESTConfig.
func New(opts Options) (*Manager, error) {
	switch opts.StorageDriver {
	case "":
		opts.StorageDriver = DriverSecret
	case DriverSecret, DriverConfigMap:
	default:
		return nil, fmt.Errorf("unknown storage driver %q: use %q or %q", opts.StorageDriver, DriverSecret, DriverConfigMap)
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 5 * time.Minute
	}
	cs, err := kubernetes.NewForConfig(opts.RESTConfig)
	if err != nil {
		return nil, fmt.Errorf("cannot create Kubernetes client: %w", err)
	}
	return &Manager{opts: opts, clientset: cs, discovery: &sharedDiscovery{config: opts.RESTConfig}}, nil
}

// Timeout is the bound of one Helm operation.
func (m *Manager) Timeout() time.Duration { return m.opts.Timeout }

// storage returns the release record driver for one namespace. Drivers hold
// no state beyond the client, so a new one per call is cheap and never shared
// between concurrent operations.
func (m *Manager) storage(namespace string) driver.Driver {
	if m.opts.StorageDriver == DriverConfigMap {
		d := driver.NewConfigMaps(m.clientset.CoreV1().ConfigMaps(namespace))
		d.Log = m.debugLog(namespace)
		return d
	}
	d := driver.NewSecrets(m.clientset.CoreV1().Secrets(namespace))
	d.Log = m.debugLog(namespace)
	return d
}

// actionConfig returns a fresh action.Configuration for one operation: Helm's
// actions write to fields of it (e.g. the storage's MaxHistory), so sharing
// one between concurrent operations would race.
func (m *Manager) actionConfig(namespace string) (*action.Configuration, error) {
	cfg := &action.Configuration{}
	getter := &restGetter{shared: m.discovery, namespace: namespace}
	if err := cfg.Init(getter, namespace, m.opts.StorageDriver, m.debugLog(namespace)); err != nil {
		return nil, fmt.Errorf("cannot set up Helm for namespace %s: %w", namespace, err)
	}
	caps, err := m.capabilities()
	if err != nil {
		return nil, err
	}
	cfg.Capabilities = caps
	return cfg, nil
}

func (m *Manager) debugLog(namespace string) action.DebugLog {
	l := m.opts.Log.With().Str("namespace", namespace).Str("component", "helm").Logger()
	return func(format string, v ...interface{}) {
		l.Debug().Msgf(format, v...)
	}
}

// Release is what autox needs to know of one release: its latest revision, and
// whether any earlier revision was deployed.
type Release struct {
	Name      string
	Namespace string
	// Spec and ReleaseSpec come from the autox labels; both are "" when the
	// release is not autox's.
	Spec        string
	ReleaseSpec string

	Revision     int
	Status       release.Status
	ChartName    string
	ChartVersion string
	// Values are the user-supplied values of the latest revision. Never log them.
	Values map[string]interface{}
	// Updated is when the latest revision's operation started (Helm's
	// LastDeployed), which is what the pending-release age is measured from.
	Updated       time.Time
	FirstDeployed time.Time
	// DeployedBefore is true when an earlier revision reached deployed.
	DeployedBefore bool
	// LastDeployedRevision is the newest revision that reached deployed, or 0.
	LastDeployedRevision int
}

// Managed reports whether the release carries autox's labels.
func (r *Release) Managed() bool { return r.Spec != "" && r.ReleaseSpec != "" }

// summarise turns the revisions of one release name into a Release.
func summarise(revs []*release.Release) *Release {
	sort.Slice(revs, func(i, j int) bool { return revs[i].Version < revs[j].Version })
	last := revs[len(revs)-1]
	r := &Release{
		Name:        last.Name,
		Namespace:   last.Namespace,
		Spec:        last.Labels[LabelSpec],
		ReleaseSpec: last.Labels[LabelReleaseSpec],
		Revision:    last.Version,
		Values:      last.Config,
	}
	if last.Info != nil {
		r.Status = last.Info.Status
		r.Updated = last.Info.LastDeployed.Time
		r.FirstDeployed = last.Info.FirstDeployed.Time
	}
	if last.Chart != nil && last.Chart.Metadata != nil {
		r.ChartName = last.Chart.Metadata.Name
		r.ChartVersion = last.Chart.Metadata.Version
	}
	for _, rev := range revs {
		if rev.Info == nil {
			continue
		}
		if rev.Info.Status == release.StatusDeployed || rev.Info.Status == release.StatusSuperseded {
			r.LastDeployedRevision = rev.Version
			if rev != last {
				r.DeployedBefore = true
			}
		}
	}
	return r
}

// query returns one Release per release name among the records matching labels.
func (m *Manager) query(namespace string, labels map[string]string) ([]*Release, error) {
	labels["owner"] = "helm"
	recs, err := m.storage(namespace).Query(labels)
	if errors.Is(err, driver.ErrReleaseNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cannot read release records in namespace %s: %w", namespace, err)
	}
	byName := map[string][]*release.Release{}
	for _, r := range recs {
		byName[r.Name] = append(byName[r.Name], r)
	}
	out := make([]*Release, 0, len(byName))
	for _, revs := range byName {
		out = append(out, summarise(revs))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// SpecReleases returns the autox releases of one spec in the given namespaces.
// Any error is returned as is: the caller must then change nothing.
func (m *Manager) SpecReleases(ctx context.Context, namespaces []string, spec string) ([]*Release, error) {
	var out []*Release
	for _, ns := range namespaces {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		rels, err := m.query(ns, map[string]string{LabelSpec: spec})
		if err != nil {
			return nil, err
		}
		out = append(out, rels...)
	}
	return out, nil
}

// Lookup returns the release of that name in namespace, autox's or not, or nil.
func (m *Manager) Lookup(ctx context.Context, namespace, name string) (*Release, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rels, err := m.query(namespace, map[string]string{"name": name})
	if err != nil || len(rels) == 0 {
		return nil, err
	}
	return rels[0], nil
}

// Desired is one release as a release spec wants it.
type Desired struct {
	Spec        string
	ReleaseSpec string
	Name        string
	Namespace   string
	// Chart must be freshly loaded for this operation (see ChartSource).
	Chart  *chart.Chart
	Values map[string]interface{}
	// Digest identifies chart and values for the metadata fast path; "" for none.
	Digest string
	// Revision is the revision an upgrade will create (the current one + 1).
	Revision int
}

func (d Desired) labels(revision int) map[string]string {
	l := map[string]string{LabelSpec: d.Spec, LabelReleaseSpec: d.ReleaseSpec}
	if d.Digest != "" {
		l[LabelDigest] = d.Digest
		l[LabelRevision] = strconv.Itoa(revision)
	}
	return l
}

// skipClientValidation turns off Helm's client-side OpenAPI check. Against
// any API server that supports server-side field validation (every supported
// Kubernetes), Helm skips that check anyway after asking the server's OpenAPI
// document whether it may; the asking alone fetched and parsed the document
// on every operation and was most of autox's CPU time during convergence.
// What is applied, and what the server accepts, is the same either way.
const skipClientValidation = true

// Install installs a new release and returns its revision.
func (m *Manager) Install(ctx context.Context, d Desired) (int, error) {
	cfg, err := m.actionConfig(d.Namespace)
	if err != nil {
		return 0, err
	}
	in := action.NewInstall(cfg)
	in.ReleaseName = d.Name
	in.Namespace = d.Namespace
	in.Labels = d.labels(1)
	in.Timeout = m.opts.Timeout
	in.DisableOpenAPIValidation = skipClientValidation
	rel, err := in.RunWithContext(ctx, d.Chart, d.Values)
	if err != nil {
		m.forgetCapabilities()
		return 0, fmt.Errorf("cannot install release %s/%s: %w", d.Namespace, d.Name, err)
	}
	return rel.Version, nil
}

// Upgrade upgrades a release to exactly d's chart and values (ResetValues:
// nothing of the previous revision's values survives) and returns the revision.
func (m *Manager) Upgrade(ctx context.Context, d Desired) (int, error) {
	cfg, err := m.actionConfig(d.Namespace)
	if err != nil {
		return 0, err
	}
	up := action.NewUpgrade(cfg)
	up.Namespace = d.Namespace
	up.Labels = d.labels(d.Revision)
	up.ResetValues = true
	up.MaxHistory = m.opts.MaxHistory
	up.Timeout = m.opts.Timeout
	up.DisableOpenAPIValidation = skipClientValidation
	rel, err := up.RunWithContext(ctx, d.Name, d.Chart, d.Values)
	if err != nil {
		m.forgetCapabilities()
		return 0, fmt.Errorf("cannot upgrade release %s/%s: %w", d.Namespace, d.Name, err)
	}
	return rel.Version, nil
}

// Uninstall removes a release and its history. A release already gone is not
// an error.
func (m *Manager) Uninstall(ctx context.Context, namespace, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	cfg, err := m.actionConfig(namespace)
	if err != nil {
		return err
	}
	un := action.NewUninstall(cfg)
	un.Timeout = m.opts.Timeout
	if _, err := un.Run(name); err != nil && !errors.Is(err, driver.ErrReleaseNotFound) {
		return fmt.Errorf("cannot uninstall release %s/%s: %w", namespace, name, err)
	}
	return nil
}

// Reinstall uninstalls a release and installs it anew (onChange: reinstall,
// and a release that never reached deployed). Returns the new revision (1).
func (m *Manager) Reinstall(ctx context.Context, d Desired) (int, error) {
	if err := m.Uninstall(ctx, d.Namespace, d.Name); err != nil {
		return 0, err
	}
	return m.Install(ctx, d)
}

// Rollback rolls a release back to revision toRevision.
func (m *Manager) Rollback(ctx context.Context, namespace, name string, toRevision int) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	cfg, err := m.actionConfig(namespace)
	if err != nil {
		return err
	}
	rb := action.NewRollback(cfg)
	rb.Version = toRevision
	rb.MaxHistory = m.opts.MaxHistory
	rb.Timeout = m.opts.Timeout
	if err := rb.Run(name); err != nil {
		return fmt.Errorf("cannot roll back release %s/%s to revision %d: %w", namespace, name, toRevision, err)
	}
	return nil
}

// ManagedReleases decodes every autox release in the given namespaces (for
// `autox list`; the control loop uses the cheaper Inventory and SpecReleases).
func (m *Manager) ManagedReleases(ctx context.Context, namespaces []string) ([]*Release, error) {
	var out []*Release
	for _, ns := range namespaces {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		recs, err := m.storage(ns).List(func(r *release.Release) bool {
			return r.Labels[LabelSpec] != "" && r.Labels[LabelReleaseSpec] != ""
		})
		if err != nil {
			return nil, fmt.Errorf("cannot list releases in namespace %s: %w", ns, err)
		}
		byName := map[string][]*release.Release{}
		for _, r := range recs {
			byName[r.Name] = append(byName[r.Name], r)
		}
		names := make([]string, 0, len(byName))
		for n := range byName {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			out = append(out, summarise(byName[n]))
		}
	}
	return out, nil
}
