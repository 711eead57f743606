package helmops

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"helm.sh/helm/v4/pkg/action"
	chartcommon "helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/kube"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"

	"github.com/autox-dev/autox/internal/redact"
)

// capabilitiesTTL bounds how stale the cluster's API list may be for chart
// rendering (.Capabilities) and resource mapping: a CRD installed meanwhile
// is seen within this time, or at once after an operation failed. Only a
// complete list is kept (see PartialDiscoveryError).
const capabilitiesTTL = 5 * time.Minute

// PartialDiscoveryError says that the API server's discovery failed for some
// group versions (an aggregated API that is down, a webhook conversion that
// fails): the API list Helm would render with lacks them, and a chart that
// gates objects on .Capabilities.APIVersions.Has would drop them — which an
// upgrade turns into deleting them. Upgrades and reinstalls fail with it,
// and are retried with the reconcile's backoff until discovery is complete.
type PartialDiscoveryError struct {
	// Missing are the group versions discovery failed for, sorted.
	Missing []string
	Cause   error
}

func (e *PartialDiscoveryError) Error() string {
	return fmt.Sprintf("the API server's discovery is incomplete, %s missing: a chart rendered now could drop the objects it gates on them, so upgrades and reinstalls wait until discovery is complete: %v",
		strings.Join(e.Missing, ", "), e.Cause)
}

func (e *PartialDiscoveryError) Unwrap() error { return e.Cause }

// capabilities returns the cluster's version and API list, shared by all
// operations. Helm computes them per action.Configuration and invalidates
// discovery each time, which costs dozens of requests per release. A partial
// list (some group versions failed) is never kept: it is returned with a
// *PartialDiscoveryError, for the operations that render nothing a missing
// group could remove (install, uninstall, rollback); the next operation
// reads discovery anew.
func (m *Manager) capabilities() (*chartcommon.Capabilities, error) {
	m.discovery.capsMu.Lock()
	defer m.discovery.capsMu.Unlock()
	if m.discovery.caps != nil && time.Since(m.discovery.capsAt) < capabilitiesTTL {
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
	// Helm's GetVersionSet hides a partial result: it is read here, once,
	// and GetVersionSet given what was read.
	groups, resources, err := m.discovery.disc.ServerGroupsAndResources()
	var partial *PartialDiscoveryError
	if failed := (*discovery.ErrGroupDiscoveryFailed)(nil); errors.As(err, &failed) {
		partial = &PartialDiscoveryError{Cause: err}
		for gv := range failed.Groups {
			partial.Missing = append(partial.Missing, gv.String())
		}
		sort.Strings(partial.Missing)
	} else if err != nil {
		return nil, fmt.Errorf("cannot list the cluster's API versions: %w", err)
	}
	apis, err := action.GetVersionSet(discovered{m.discovery.disc, groups, resources})
	if err != nil {
		return nil, fmt.Errorf("cannot list the cluster's API versions: %w", err)
	}
	caps := &chartcommon.Capabilities{
		APIVersions: apis,
		KubeVersion: chartcommon.KubeVersion{Version: v.GitVersion, Major: v.Major, Minor: v.Minor},
		HelmVersion: chartcommon.DefaultCapabilities.HelmVersion,
	}
	if partial != nil {
		m.discovery.caps = nil
		return caps, partial
	}
	m.discovery.caps, m.discovery.capsAt = caps, time.Now()
	return m.copyCaps(), nil
}

// discovered answers ServerGroupsAndResources with a result already read.
type discovered struct {
	discovery.ServerResourcesInterface
	groups    []*metav1.APIGroup
	resources []*metav1.APIResourceList
}

func (d discovered) ServerGroupsAndResources() ([]*metav1.APIGroup, []*metav1.APIResourceList, error) {
	return d.groups, d.resources, nil
}

func (m *Manager) copyCaps() *chartcommon.Capabilities {
	c := *m.discovery.caps
	c.APIVersions = append(chartcommon.VersionSet(nil), m.discovery.caps.APIVersions...)
	return &c
}

// forgetCapabilities makes the next operation read discovery anew; called
// after a failed operation, which may have failed on a CRD not yet known.
func (m *Manager) forgetCapabilities() {
	m.discovery.capsMu.Lock()
	m.discovery.caps = nil
	m.discovery.capsMu.Unlock()
}

// actionConfig returns a fresh action.Configuration for one operation: Helm's
// actions write to fields of it (e.g. the storage's MaxHistory), so sharing
// one between concurrent operations would race. Its log lines go through
// hide: Helm's debug lines quote manifests and API errors. It renders with a
// partial API list when discovery is partial: for the operations that
// cannot delete an object because a group is missing from it.
//
// Reading the capabilities (discovery, which takes no context) is waited
// for until ctx ends only: the read goes on in the background, and the next
// operation that needs them waits for it.
func (m *Manager) actionConfig(ctx context.Context, namespace string, hide *redact.Redactor) (*action.Configuration, error) {
	return m.actionConfigFor(ctx, namespace, hide, false)
}

// actionConfigFor is actionConfig; complete refuses a partial API list with
// its *PartialDiscoveryError, for the operations that would delete what a
// chart rendered against it drops (upgrade, reinstall).
func (m *Manager) actionConfigFor(ctx context.Context, namespace string, hide *redact.Redactor, complete bool) (*action.Configuration, error) {
	// Helm logs through the configuration's handler from Init on (its kube
	// client and driver take it there): it is set first.
	log := m.helmLog(namespace, hide)
	cfg := action.NewConfiguration(action.ConfigurationSetLogger(log))
	getter := &restGetter{shared: m.discovery, config: m.opts.RESTConfig, namespace: namespace}
	if err := cfg.Init(getter, namespace, m.opts.StorageDriver); err != nil {
		return nil, fmt.Errorf("cannot set up Helm for namespace %s: %w", namespace, err)
	}
	var caps *chartcommon.Capabilities
	err := m.untilDone(ctx, func() (err error) {
		caps, err = m.capabilities()
		return err
	})
	if errors.Is(err, errLeftRunning) {
		return nil, fmt.Errorf("stopped waiting for the cluster's API versions: %w", ctx.Err())
	}
	var partial *PartialDiscoveryError
	if errors.As(err, &partial) && !complete {
		m.opts.Log.Warn().Str("namespace", namespace).Strs("missing", partial.Missing).
			Msg("discovery is incomplete: this operation goes on without the missing group versions, since it deletes nothing for them")
		err = nil
	}
	if err != nil {
		return nil, err
	}
	cfg.Capabilities = caps
	if kc, ok := cfg.KubeClient.(*kube.Client); ok {
		cfg.KubeClient = kubeClient{Client: kc, refresh: m.forgetAPIs}
	}
	if m.opts.StorageDriver == DriverSecret {
		cfg.Releases.Driver = newSecretRecords(m.clientset.CoreV1().Secrets(namespace), log)
	}
	cfg.Releases.Driver = &newestDecodes{Driver: cfg.Releases.Driver, m: m, namespace: namespace}
	if expect := m.writes(); expect != nil {
		cfg.Releases.Driver = &trackedDriver{Driver: cfg.Releases.Driver, expect: expect, namespace: namespace}
	}
	return cfg, nil
}

// premise makes cfg's operation on release name fail before its first write
// when Helm's read of the history finds another newest revision than
// decided (see premised); decided 0 checks nothing.
func premise(cfg *action.Configuration, namespace, name string, decided int) {
	if decided > 0 {
		cfg.Releases.Driver = &premised{Driver: cfg.Releases.Driver, namespace: namespace, name: name, decided: decided}
	}
}

// helmLog is the handler of Helm's log lines of one operation in namespace
// (see helmLog), redacted with hide.
func (m *Manager) helmLog(namespace string, hide *redact.Redactor) *helmLog {
	return newHelmLog(m.opts.Log.With().Str("namespace", namespace).Str("component", "helm").Logger(), hide)
}

// skipClientValidation turns off Helm's client-side OpenAPI check. Against
// any API server that supports server-side field validation (every supported
// Kubernetes), Helm skips that check anyway after asking the server's OpenAPI
// document whether it may; the asking alone fetched and parsed the document
// on every operation and was most of autox's CPU time during convergence.
// What is applied, and what the server accepts, is the same either way.
const skipClientValidation = true

// notStarted says that an operation was not started because ctx had ended:
// the caller is stopping, and the operation's writes would outlive it.
func notStarted(ctx context.Context, operation, namespace, name string) error {
	if err := ctx.Err(); err != nil {
		return markNoWrite(fmt.Errorf("%s of release %s/%s not started: %w", operation, namespace, name, err))
	}
	return nil
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
