package helmops

import (
	"context"
	"fmt"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
)

// Helm operations as a service account (DESIGN §2, "Service accounts and
// trusted charts"): a release spec's serviceAccountName makes every Helm
// operation of its release — the objects it reads and writes, and the
// release's records — run impersonating that account, so that a config file
// (a Git commit) can do no more in a team's namespace than the team's
// account may. autox's own reads (triggers, observation, values sources)
// stay on the Manager the account's view was made from.

// ServiceAccount is the account a release's Helm operations run as, in the
// release's namespace; the zero value is autox's own identity.
type ServiceAccount struct {
	Namespace, Name string
}

// IsZero reports whether sa is autox's own identity.
func (sa ServiceAccount) IsZero() bool { return sa.Name == "" }

// Username is the user the API server knows the account as, which requests
// impersonate.
func (sa ServiceAccount) Username() string {
	return "system:serviceaccount:" + sa.Namespace + ":" + sa.Name
}

// String names the identity for messages and logs.
func (sa ServiceAccount) String() string {
	if sa.IsZero() {
		return "autox's own identity"
	}
	return "service account " + sa.Namespace + "/" + sa.Name
}

// identities are the Managers of one Manager per service account, built
// once: each has its own HTTP client (a transport per identity, its
// connections kept), and the rest shares the Manager's settings.
type identities struct {
	mu    sync.Mutex
	views map[ServiceAccount]*Manager
}

// As returns the Manager whose Helm operations run as sa, or m itself for
// autox's own identity. The account must exist, as read live now with m's
// identity: impersonating one that does not would be refused every request
// with a Forbidden that does not say why. The returned Manager is built
// from m's REST config — the leadership term's fenced config — so its
// writes are fenced with m's; its capabilities and REST mapping come from
// m's discovery (autox's identity: an API list, not a release's object);
// its record writes are registered with m's record index, as m's own are.
// Never call As on a Manager As returned.
func (m *Manager) As(ctx context.Context, sa ServiceAccount) (*Manager, error) {
	if sa.IsZero() {
		return m, nil
	}
	if !m.as.IsZero() {
		return nil, fmt.Errorf("cannot act as %s from a Manager acting as %s", sa, m.as)
	}
	if _, err := m.clientset.CoreV1().ServiceAccounts(sa.Namespace).Get(ctx, sa.Name, metav1.GetOptions{}); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("%s does not exist: create it (with a Role for what the chart makes), or change serviceAccountName; nothing was changed", sa)
		}
		return nil, fmt.Errorf("cannot read %s, which the release runs as: %w", sa, err)
	}
	m.identities.mu.Lock()
	defer m.identities.mu.Unlock()
	if v := m.identities.views[sa]; v != nil {
		return v, nil
	}
	v, err := m.impersonating(sa)
	if err != nil {
		return nil, err
	}
	if m.identities.views == nil {
		m.identities.views = map[ServiceAccount]*Manager{}
	}
	m.identities.views[sa] = v
	return v, nil
}

// impersonating builds the Manager of m's settings whose every request
// impersonates sa.
func (m *Manager) impersonating(sa ServiceAccount) (*Manager, error) {
	rc := rest.CopyConfig(m.opts.RESTConfig) // keeps the fence (WrapTransport) and the rate limiter
	rc.Impersonate = rest.ImpersonationConfig{UserName: sa.Username()}
	hc, err := rest.HTTPClientFor(rc)
	if err != nil {
		return nil, fmt.Errorf("cannot create a client acting as %s: %w", sa, err)
	}
	cs, err := kubernetes.NewForConfigAndClient(rc, hc)
	if err != nil {
		return nil, fmt.Errorf("cannot create a client acting as %s: %w", sa, err)
	}
	mc, err := metadata.NewForConfigAndClient(rc, hc)
	if err != nil {
		return nil, fmt.Errorf("cannot create a client acting as %s: %w", sa, err)
	}
	opts := m.opts
	opts.RESTConfig, opts.Clientset, opts.Metadata = rc, cs, mc
	return &Manager{opts: opts, clientset: cs, meta: mc, discovery: m.discovery, as: sa, parent: m}, nil
}

// ActingAs is the identity m's operations run as.
func (m *Manager) ActingAs() ServiceAccount { return m.as }
