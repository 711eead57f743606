package helmops

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/autox-dev/autox/internal/format"
)

// heldCreates holds the creation of one ConfigMap of one namespace until
// released, as a slow admission webhook would.
type heldCreates struct {
	namespace string
	name      string
	held      atomic.Int64
	release   chan struct{}
}

// transport is next, holding what h holds.
func (h *heldCreates) transport(next http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) { return h.roundTrip(next, req) })
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

func (h *heldCreates) roundTrip(next http.RoundTripper, req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodPost && req.URL.Path == "/api/v1/namespaces/"+h.namespace+"/configmaps" && req.Body != nil {
		body, err := io.ReadAll(req.Body)
		if err != nil {
			return nil, err
		}
		req.Body = io.NopCloser(bytes.NewReader(body))
		if strings.Contains(string(body), `"name":"`+h.name+`"`) {
			h.held.Add(1)
			select {
			case <-h.release:
			case <-req.Context().Done():
				return nil, req.Context().Err()
			}
		}
	}
	return next.RoundTrip(req)
}

// Installs create their objects at once: one install's create held by the
// API server does not hold another's (Helm 4 alone makes every create of
// the process wait for the one in flight), and what is created is Helm's:
// under autox's field manager, the object refreshed from the response.
func TestInstallsCreateAtOnce(t *testing.T) {
	ctx := context.Background()
	ns := cluster.Namespace(t)
	hold := &heldCreates{namespace: ns, name: "held", release: make(chan struct{})}
	cfg := rest.CopyConfig(cluster.Config)
	cfg.WrapTransport = hold.transport
	m, err := New(withClients(t, Options{RESTConfig: cfg, StorageDriver: DriverSecret, Timeout: time.Minute, Log: zerolog.Nop()}))
	if err != nil {
		t.Fatal(err)
	}
	released := false
	defer func() {
		if !released {
			close(hold.release)
		}
	}()

	heldDone := make(chan error, 1)
	go func() {
		_, err := m.Install(ctx, desired(t, ns, "held", "charts/one", nil))
		heldDone <- err
	}()
	for hold.held.Load() == 0 {
		select {
		case err := <-heldDone:
			t.Fatalf("the held install ended before its create was held: %v", err)
		case <-time.After(10 * time.Millisecond):
		}
	}

	// A bound, not a measure: the other install needs well under a second.
	freeCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := m.Install(freeCtx, desired(t, ns, "free", "charts/one", nil)); err != nil {
		t.Fatalf("an install while another's create is held: %v (its create waited for the held one)", err)
	}
	select {
	case err := <-heldDone:
		t.Fatalf("the held install ended while its create was held: %v", err)
	default:
	}
	released = true
	close(hold.release)
	if err := <-heldDone; err != nil {
		t.Fatalf("the held install, released: %v", err)
	}

	for _, name := range []string{"held", "free"} {
		cm, err := cluster.Client.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(cm.ManagedFields) == 0 || cm.ManagedFields[0].Manager != format.FieldManager {
			t.Errorf("%s: managed fields %v, want the manager %q", name, cm.ManagedFields, format.FieldManager)
		}
		if cm.Labels["app.kubernetes.io/managed-by"] != "Helm" {
			t.Errorf("%s: labels %v, want Helm's ownership marks", name, cm.Labels)
		}
	}
}
