// Package helmops makes every Helm SDK call autox needs: install, upgrade,
// uninstall, reinstall (validated by a dry run before anything is removed) and
// rollback of one release, and the reads of the releases one autox instance
// manages, into the observation types of triggers/decide (Release, Record).
// It decides nothing: callers (package triggers) say what to do; this package
// does it with the real Helm storage drivers, and passes
// Helm's errors and debug lines through the caller's redact.Redactor so that
// values never leak through them.
package helmops

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/kube"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/cli-runtime/pkg/resource"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"

	"github.com/autox-dev/autox/internal/redact"
	"github.com/autox-dev/autox/triggers/decide"
)

// Release labels that mark a Helm release as autox's (DESIGN §4). They are
// Helm release labels, so the storage driver also puts them on the record's
// Secret or ConfigMap, where a label selector finds them.
const (
	LabelSpec        = "autox.dev/spec"
	LabelReleaseSpec = "autox.dev/release-spec"
	// LabelInstance names the autox installation that owns the release, so
	// that two installations can manage the same namespace.
	LabelInstance = "autox.dev/instance"
	// LabelObject and LabelObjectNamespace name the trigger object a
	// selector spec's release serves (decide.ObjectLabel: the name, or a
	// long name's prefix and hash). A named spec's releases have neither.
	LabelObject          = "autox.dev/object"
	LabelObjectNamespace = "autox.dev/object-namespace"
	// LabelDigest is a digest of the chart name, version and values autox
	// installed; with LabelRevision it lets a pass tell from record metadata
	// alone that a release needs nothing (see triggers.InSync).
	LabelDigest = "autox.dev/digest"
	// LabelRevision is the revision autox's own operation created. Any other
	// Helm write (a manual upgrade or rollback) creates a record whose Helm
	// revision differs, which sends the release to the full comparison.
	LabelRevision = "autox.dev/revision"
)

// DefaultInstance is the instance of a Manager that names none, and of an
// autox release without LabelInstance (made before instances existed).
const DefaultInstance = decide.DefaultInstance

// Storage drivers autox supports for release records.
const (
	DriverSecret    = "secret"
	DriverConfigMap = "configmap"
)

// recordResource is the resource that holds a driver's release records.
func recordResource(storageDriver string) schema.GroupVersionResource {
	if storageDriver == DriverConfigMap {
		return schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	}
	return schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
}

// Options configure a Manager.
type Options struct {
	// RESTConfig is the cluster's config; Helm's actions (their kube client
	// and discovery) are built from it.
	RESTConfig *rest.Config
	// Clientset and Metadata are the clients of RESTConfig the Manager reads
	// and writes release records with: the caller builds them once and shares
	// them with the rest of the process. When nil, New builds them from
	// RESTConfig.
	Clientset kubernetes.Interface
	Metadata  metadata.Interface
	// StorageDriver is DriverSecret (default) or DriverConfigMap.
	StorageDriver string
	// Instance is written on every release as LabelInstance; the readers
	// return only this instance's releases. Default DefaultInstance.
	Instance string
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
	meta      metadata.Interface
	discovery *sharedDiscovery

	// background counts the goroutines of untilDone still running,
	// including those it stopped waiting for.
	background sync.WaitGroup

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

// New returns a Manager for the cluster of opts.RESTConfig, using
// opts.Clientset and opts.Metadata.
func New(opts Options) (*Manager, error) {
	switch opts.StorageDriver {
	case "":
		opts.StorageDriver = DriverSecret
	case DriverSecret, DriverConfigMap:
	default:
		return nil, fmt.Errorf("unknown storage driver %q: use %q or %q", opts.StorageDriver, DriverSecret, DriverConfigMap)
	}
	if opts.Instance == "" {
		opts.Instance = DefaultInstance
	}
	// The instance is a label value on every release: refuse one the API
	// server would reject on the first install rather than fail there.
	if errs := validation.IsValidLabelValue(opts.Instance); len(errs) > 0 {
		return nil, fmt.Errorf("invalid instance %q: %s", opts.Instance, strings.Join(errs, "; "))
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 5 * time.Minute
	}
	if opts.Clientset == nil {
		cs, err := kubernetes.NewForConfig(opts.RESTConfig)
		if err != nil {
			return nil, fmt.Errorf("cannot create Kubernetes client: %w", err)
		}
		opts.Clientset = cs
	}
	if opts.Metadata == nil {
		mc, err := metadata.NewForConfig(opts.RESTConfig)
		if err != nil {
			return nil, fmt.Errorf("cannot create metadata client: %w", err)
		}
		opts.Metadata = mc
	}
	return &Manager{opts: opts, clientset: opts.Clientset, meta: opts.Metadata, discovery: &sharedDiscovery{config: opts.RESTConfig}}, nil
}

// Timeout is the bound of one Helm operation.
func (m *Manager) Timeout() time.Duration { return m.opts.Timeout }

// Instance is the instance whose releases this Manager writes and reads.
func (m *Manager) Instance() string { return m.opts.Instance }

// storage returns the release record driver for one namespace. Drivers hold
// no state beyond the client, so a new one per call is cheap and never shared
// between concurrent operations. Their log lines name records, not values.
func (m *Manager) storage(namespace string) driver.Driver {
	if m.opts.StorageDriver == DriverConfigMap {
		d := driver.NewConfigMaps(m.clientset.CoreV1().ConfigMaps(namespace))
		d.Log = m.debugLog(namespace, nil)
		return d
	}
	d := driver.NewSecrets(m.clientset.CoreV1().Secrets(namespace))
	d.Log = m.debugLog(namespace, nil)
	return d
}

// actionConfig returns a fresh action.Configuration for one operation: Helm's
// actions write to fields of it (e.g. the storage's MaxHistory), so sharing
// one between concurrent operations would race. Its log lines go through
// hide: Helm's debug lines quote manifests and API errors.
func (m *Manager) actionConfig(namespace string, hide *redact.Redactor) (*action.Configuration, error) {
	cfg := &action.Configuration{}
	getter := &restGetter{shared: m.discovery, namespace: namespace}
	if err := cfg.Init(getter, namespace, m.opts.StorageDriver, m.debugLog(namespace, hide)); err != nil {
		return nil, fmt.Errorf("cannot set up Helm for namespace %s: %w", namespace, err)
	}
	caps, err := m.capabilities()
	if err != nil {
		return nil, err
	}
	cfg.Capabilities = caps
	if kc, ok := cfg.KubeClient.(*kube.Client); ok {
		cfg.KubeClient = reachable{kc}
	}
	if m.opts.StorageDriver == DriverSecret {
		cfg.Releases.Driver = newSecretRecords(m.clientset.CoreV1().Secrets(namespace), m.debugLog(namespace, hide))
	}
	return cfg, nil
}

// reachable is Helm's kube client without its reachability check: before
// every install and upgrade Helm asks the API server for its version only to
// learn that it answers, one request per release in series with the rest.
// The capabilities shared by all operations were read from that server, and
// an unreachable one fails the operation's next request instead, before any
// write. Embedding the *kube.Client keeps every optional interface Helm
// checks for (deletion propagation, waits, logs).
type reachable struct{ *kube.Client }

func (reachable) IsReachable() error { return nil }

func (m *Manager) debugLog(namespace string, hide *redact.Redactor) action.DebugLog {
	l := m.opts.Log.With().Str("namespace", namespace).Str("component", "helm").Logger()
	return func(format string, v ...interface{}) {
		ev := l.Debug()
		if !ev.Enabled() {
			return // neither format nor redact a line nobody reads
		}
		ev.Msg(hide.String(fmt.Sprintf(format, withoutRecords(v)...)))
	}
}

// withoutRecords replaces storage record objects among log arguments by their
// names: the drivers log a record they cannot decode whole, and its data is
// the encoded release, values included.
func withoutRecords(args []interface{}) []interface{} {
	out := make([]interface{}, len(args))
	for i, a := range args {
		switch o := a.(type) {
		case corev1.Secret:
			out[i] = "Secret " + o.Name
		case *corev1.Secret:
			out[i] = "Secret " + o.Name
		case corev1.ConfigMap:
			out[i] = "ConfigMap " + o.Name
		case *corev1.ConfigMap:
			out[i] = "ConfigMap " + o.Name
		default:
			out[i] = a
		}
	}
	return out
}

// SpecReleases returns this instance's releases of one spec in the given
// namespaces: those whose newest revision (the highest of all the release's
// records, labelled or not) carries both autox labels, LabelSpec=spec and
// this instance. A release whose newest revision someone wrote without them
// is not returned, whatever its older revisions say: it is no longer ours,
// and Lookup shows whose it is. Every namespace is read; when some cannot be,
// the others' releases are returned with a *NamespacesError.
func (m *Manager) SpecReleases(ctx context.Context, namespaces []string, spec string) ([]*Release, error) {
	return m.specReleases(ctx, namespaces, map[string]string{LabelSpec: spec})
}

// ObjectReleases is SpecReleases narrowed to the releases a selector spec
// made for one object: those whose newest revision names it in its object
// labels. A reconcile of one object reads no other object's releases.
func (m *Manager) ObjectReleases(ctx context.Context, namespaces []string, spec string, obj decide.Object) ([]*Release, error) {
	return m.specReleases(ctx, namespaces, map[string]string{LabelSpec: spec,
		LabelObjectNamespace: obj.Namespace, LabelObject: decide.ObjectLabel(obj.Name)})
}

func (m *Manager) specReleases(ctx context.Context, namespaces []string, match map[string]string) ([]*Release, error) {
	return eachNamespace(ctx, namespaces, func(ns string) ([]*Release, error) {
		// The drivers' Query matches label equality only; the release-spec
		// label and the instance are checked on the newest revision.
		q := make(map[string]string, len(match)+1)
		for k, v := range match {
			q[k] = v
		}
		groups, err := m.query(ns, q)
		if err != nil {
			return nil, err
		}
		if groups, err = m.newestOnly(ctx, ns, groups); err != nil {
			return nil, err
		}
		return m.releases(ctx, ns, groups, m.owned), nil
	})
}

func (m *Manager) owned(r *Release) bool { return r.OwnedBy(m.opts.Instance) }

// NamesInUse reports which of names have release records in namespace,
// whoever made them, from one metadata LIST. A name without any is free as
// of the read; a release someone makes under it afterwards still fails
// autox's install, whose first write creates revision 1's record only if
// none exists.
func (m *Manager) NamesInUse(ctx context.Context, namespace string, names []string) (map[string]bool, error) {
	if len(names) == 0 {
		return map[string]bool{}, nil
	}
	versions, err := m.recordVersions(ctx, namespace, names)
	if err != nil {
		return nil, fmt.Errorf("cannot tell which of releases %v exist in %s: %w", names, namespace, err)
	}
	out := make(map[string]bool, len(versions))
	for name := range versions {
		out[name] = true
	}
	return out, nil
}

// Lookup returns the release of that name in namespace, or nil: autox's or
// not, of any instance. Whether it may be touched is the caller's decision.
func (m *Manager) Lookup(ctx context.Context, namespace, name string) (*Release, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	groups, err := m.query(namespace, map[string]string{"name": name})
	if err != nil {
		return nil, fmt.Errorf("cannot look up release %s/%s: %w", namespace, name, err)
	}
	rels := m.releases(ctx, namespace, groups, func(*Release) bool { return true })
	if len(rels) == 0 {
		return nil, nil
	}
	return rels[0], nil
}

// Desired is one release as a release spec wants it.
type Desired struct {
	Spec        string
	ReleaseSpec string
	// Object is the selector spec's object the release serves; zero for a named spec.
	Object    decide.Object
	Name      string
	Namespace string
	// Chart must be freshly loaded for this operation (see ChartSource).
	Chart  *chart.Chart
	Values map[string]interface{}
	// Digest identifies chart and values for the metadata fast path; "" for none.
	Digest string
	// Revision is the revision an upgrade will create (the current one + 1).
	Revision int
	// Redact hides secrets in the operation's errors and Helm's debug lines;
	// nil hides nothing. The caller makes it from these Values and the
	// running release's, since an error may quote either.
	Redact *redact.Redactor
}

// labels are the Helm release labels an operation of m writes for d.
func (m *Manager) labels(d Desired, revision int) map[string]string {
	l := map[string]string{LabelSpec: d.Spec, LabelReleaseSpec: d.ReleaseSpec, LabelInstance: m.opts.Instance}
	if !d.Object.IsZero() {
		l[LabelObjectNamespace] = d.Object.Namespace
		l[LabelObject] = decide.ObjectLabel(d.Object.Name)
	}
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

// newInstall returns Helm's install action for d, shared by Install and the
// dry run of Reinstall so that what is validated is what is installed.
func (m *Manager) newInstall(d Desired) (*action.Install, *action.Configuration, error) {
	cfg, err := m.actionConfig(d.Namespace, d.Redact)
	if err != nil {
		return nil, nil, err
	}
	in := action.NewInstall(cfg)
	in.ReleaseName = d.Name
	in.Namespace = d.Namespace
	in.Labels = m.labels(d, 1)
	in.Timeout = m.opts.Timeout
	in.DisableOpenAPIValidation = skipClientValidation
	return in, cfg, nil
}

// notStarted says that an operation was not started because ctx had ended:
// the caller is stopping, and the operation's writes would outlive it.
func notStarted(ctx context.Context, operation, namespace, name string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s of release %s/%s not started: %w", operation, namespace, name, err)
	}
	return nil
}

// Install installs a new release and returns its revision. Nothing is
// started when ctx has already ended; when ctx ends during the install it
// returns at once and the install goes on in the background (see untilDone).
// Helm's own RunWithContext is not used: on cancellation it marks the
// release failed while its install goroutine still reads that release — a
// data race inside Helm — and writes that record during a stop.
func (m *Manager) Install(ctx context.Context, d Desired) (int, error) {
	if err := notStarted(ctx, "install", d.Namespace, d.Name); err != nil {
		return 0, err
	}
	in, cfg, err := m.newInstall(d)
	if err != nil {
		return 0, err
	}
	cfg.Releases.Driver = &seenFree{Driver: cfg.Releases.Driver, name: d.Name}
	var rel *release.Release
	err = m.untilDone(ctx, func() (err error) {
		rel, err = in.Run(d.Chart, d.Values)
		return err
	})
	if err != nil {
		m.forgetCapabilities()
		return 0, fmt.Errorf("cannot install release %s/%s: %w", d.Namespace, d.Name, d.Redact.Error(err))
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

func (s *seenFree) Query(labels map[string]string) ([]*release.Release, error) {
	if !s.checked && len(labels) == 2 && labels["name"] == s.name && labels["owner"] == "helm" {
		s.checked = true
		return nil, driver.ErrReleaseNotFound
	}
	return s.Driver.Query(labels)
}

// Upgrade upgrades a release to exactly d's chart and values (ResetValues:
// nothing of the previous revision's values survives) and returns the
// revision. Nothing is started when ctx has already ended; when ctx ends
// during the upgrade it returns at once, as Install does.
func (m *Manager) Upgrade(ctx context.Context, d Desired) (int, error) {
	if err := notStarted(ctx, "upgrade", d.Namespace, d.Name); err != nil {
		return 0, err
	}
	cfg, err := m.actionConfig(d.Namespace, d.Redact)
	if err != nil {
		return 0, err
	}
	up := action.NewUpgrade(cfg)
	up.Namespace = d.Namespace
	up.Labels = m.labels(d, d.Revision)
	up.ResetValues = true
	up.MaxHistory = m.opts.MaxHistory
	up.Timeout = m.opts.Timeout
	up.DisableOpenAPIValidation = skipClientValidation
	var rel *release.Release
	err = m.untilDone(ctx, func() (err error) {
		rel, err = up.Run(d.Name, d.Chart, d.Values)
		return err
	})
	if err != nil {
		m.forgetCapabilities()
		return 0, fmt.Errorf("cannot upgrade release %s/%s: %w", d.Namespace, d.Name, d.Redact.Error(err))
	}
	return rel.Version, nil
}

// Uninstall removes a release and its history. A release already gone is not
// an error. hide redacts the error and Helm's debug lines (nil hides
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
func (m *Manager) Uninstall(ctx context.Context, namespace, name string, hide *redact.Redactor) error {
	return m.uninstall(ctx, namespace, name, hide, false)
}

// uninstall is Uninstall; with wait it also waits, bounded by the Helm
// timeout, until the deleted objects are gone from the API server. Deletion
// propagates in the background: the objects themselves go at once (unless a
// finalizer holds them), their dependents after them, which is all a new
// install of the same objects needs. Foreground deletion would wait on the
// garbage collector for every dependent, and where none runs, for ever.
func (m *Manager) uninstall(ctx context.Context, namespace, name string, hide *redact.Redactor, wait bool) error {
	if err := notStarted(ctx, "uninstall", namespace, name); err != nil {
		return err
	}
	cfg, err := m.actionConfig(namespace, hide)
	if err != nil {
		return err
	}
	un := action.NewUninstall(cfg)
	un.Timeout = m.opts.Timeout
	if wait {
		un.Wait = true
		un.DeletionPropagation = string(metav1.DeletePropagationBackground)
	}
	err = m.untilDone(ctx, func() error { _, err := un.Run(name); return err })
	switch {
	case err == nil, errors.Is(err, driver.ErrReleaseNotFound):
		return nil
	case errors.Is(err, errLeftRunning):
		return fmt.Errorf("uninstall of release %s/%s: %w", namespace, name, err)
	}
	return fmt.Errorf("cannot uninstall release %s/%s: %w", namespace, name, hide.Error(err))
}

// errLeftRunning marks the error of an operation that untilDone stopped
// waiting for.
var errLeftRunning = errors.New("stopped waiting; Helm goes on in the background until it ends, bounded by the Helm timeout")

// untilDone runs op, a Helm call that takes no context, in a goroutine and
// returns its error, or errLeftRunning with ctx's error as soon as ctx ends.
// m.background counts the goroutines still running.
func (m *Manager) untilDone(ctx context.Context, op func() error) error {
	done := make(chan error, 1)
	m.background.Add(1)
	go func() {
		defer m.background.Done()
		done <- op()
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("%w: %w", errLeftRunning, ctx.Err())
	}
}

// Reinstall replaces a release by uninstalling it and installing it anew
// (onChange: reinstall, and a release that never reached deployed) and
// returns the new revision (1). A release that cannot be replaced is never
// removed (DESIGN §3): the new release is first rendered and validated
// without writing anything (dryRunInstall), and only then is the old one
// uninstalled. The install starts only once the old release's objects are
// gone from the API server (see uninstall), so that it does not fail on, or
// adopt, an object still being deleted (a finalizer holds it).
//
// Nothing is started when ctx has already ended, or ends during the dry run.
// The pair runs on ctx alone, with no deadline of its own: Helm bounds each
// of its phases by the Helm timeout, and returning early while Helm's
// goroutine goes on would let the next reconcile of the release start beside
// it — two writers in one process. autox cancels ctx only when a stop has
// waited --shutdown-timeout or the leadership term has ended (its writes are
// then refused anyway); a release left uninstalled then is installed by the
// next leader, like any absent release.
func (m *Manager) Reinstall(ctx context.Context, d Desired) (int, error) {
	if err := notStarted(ctx, "reinstall", d.Namespace, d.Name); err != nil {
		return 0, err
	}
	if err := m.dryRunInstall(ctx, d); err != nil {
		if err := notStarted(ctx, "reinstall", d.Namespace, d.Name); err != nil {
			return 0, err // cut off during the dry run, which writes nothing
		}
		return 0, fmt.Errorf("cannot reinstall release %s/%s: the new release does not render or validate; the running release is kept: %w", d.Namespace, d.Name, err)
	}
	if err := notStarted(ctx, "reinstall", d.Namespace, d.Name); err != nil {
		return 0, err
	}
	if err := m.uninstall(ctx, d.Namespace, d.Name, d.Redact, true); err != nil {
		return 0, fmt.Errorf("cannot reinstall release %s/%s: the new release was not installed: %w", d.Namespace, d.Name, err)
	}
	return m.Install(ctx, d)
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
func (m *Manager) dryRunInstall(ctx context.Context, d Desired) error {
	in, cfg, err := m.newInstall(d)
	if err != nil {
		return err
	}
	in.DryRun = true
	in.DryRunOption = "server"
	rel, err := in.RunWithContext(ctx, d.Chart, d.Values)
	if err == nil {
		err = dryRunCreate(ctx, cfg.KubeClient, installManifest(rel))
	}
	if err != nil {
		m.forgetCapabilities()
		return d.Redact.Error(err)
	}
	return nil
}

// installManifest is what an install of rel creates: its manifest and its
// install hooks (not, e.g., its test hooks, which only `helm test` creates).
func installManifest(rel *release.Release) string {
	var b strings.Builder
	b.WriteString(rel.Manifest)
	for _, h := range rel.Hooks {
		for _, e := range h.Events {
			if e == release.HookPreInstall || e == release.HookPostInstall {
				b.WriteString("\n---\n")
				b.WriteString(h.Manifest)
				break
			}
		}
	}
	return b.String()
}

// dryRunCreate sends each object of manifest to the API server as a dry-run
// create and returns every refusal but AlreadyExists.
func dryRunCreate(ctx context.Context, kc kube.Interface, manifest string) error {
	objects, err := kc.Build(strings.NewReader(manifest), false)
	if err != nil {
		return fmt.Errorf("cannot build the release's objects: %w", err)
	}
	var errs []error
	for _, info := range objects {
		if err := ctx.Err(); err != nil {
			return err
		}
		_, err := resource.NewHelper(info.Client, info.Mapping).DryRun(true).Create(info.Namespace, true, info.Object)
		if err != nil && !apierrors.IsAlreadyExists(err) {
			errs = append(errs, fmt.Errorf("the API server refuses %s: %w", info.ObjectName(), err))
		}
	}
	return errors.Join(errs...)
}

// Rollback rolls a release back to revision toRevision. Helm copies that
// revision's release labels, so the instance and autox labels it carried
// stay. hide redacts as for Uninstall; the caller makes it from the values of
// the current and of the target revision. Like Helm's uninstall, Helm's
// rollback takes no context and may wait on hooks: Rollback returns when ctx
// ends and the rollback goes on in the background, as for Uninstall.
func (m *Manager) Rollback(ctx context.Context, namespace, name string, toRevision int, hide *redact.Redactor) error {
	if err := notStarted(ctx, "rollback", namespace, name); err != nil {
		return err
	}
	cfg, err := m.actionConfig(namespace, hide)
	if err != nil {
		return err
	}
	rb := action.NewRollback(cfg)
	rb.Version = toRevision
	rb.MaxHistory = m.opts.MaxHistory
	rb.Timeout = m.opts.Timeout
	err = m.untilDone(ctx, func() error { return rb.Run(name) })
	if errors.Is(err, errLeftRunning) {
		return fmt.Errorf("rollback of release %s/%s to revision %d: %w", namespace, name, toRevision, err)
	}
	if err != nil {
		return fmt.Errorf("cannot roll back release %s/%s to revision %d: %w", namespace, name, toRevision, hide.Error(err))
	}
	return nil
}

// ManagedReleases decodes this instance's releases in the given namespaces
// (for `autox list`; the control loop uses the cheaper Inventory and
// SpecReleases): every release record is read, and a release is this
// instance's when its newest revision is, as for SpecReleases. Like
// SpecReleases, it reads every namespace and returns a *NamespacesError with
// the releases of the readable ones.
func (m *Manager) ManagedReleases(ctx context.Context, namespaces []string) ([]*Release, error) {
	return eachNamespace(ctx, namespaces, func(ns string) ([]*Release, error) {
		// All records, not only autox-labelled ones: a release's newest
		// revision decides whose it is, labelled or not.
		recs, err := m.storage(ns).List(func(*release.Release) bool { return true })
		if err != nil {
			return nil, fmt.Errorf("cannot list releases: %w", err)
		}
		return m.releases(ctx, ns, byName(recs), m.owned), nil
	})
}
