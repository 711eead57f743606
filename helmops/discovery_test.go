package helmops

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/autox-dev/autox/internal/testenv"
)

// gatedGroup is the API group version the gated chart renders an object for.
const gatedGroup = "gated.autox.dev/v1"

// gadgetCRD serves gatedGroup (kind Gadget) from the API server until the
// test ends.
func gadgetCRD(t *testing.T) {
	t.Helper()
	dc, err := dynamic.NewForConfig(cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	crds := dc.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
	crd := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]interface{}{"name": "gadgets.gated.autox.dev"},
		"spec": map[string]interface{}{
			"group": "gated.autox.dev", "scope": "Namespaced",
			"names": map[string]interface{}{"plural": "gadgets", "singular": "gadget", "kind": "Gadget", "listKind": "GadgetList"},
			"versions": []interface{}{map[string]interface{}{"name": "v1", "served": true, "storage": true,
				"schema": map[string]interface{}{"openAPIV3Schema": map[string]interface{}{"type": "object"}}}},
		},
	}}
	if _, err := crds.Create(context.Background(), crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	// Gone before the next test that creates it: a CRD being deleted
	// would take that one's create (AlreadyExists) with it.
	t.Cleanup(func() { dropCRD(t, crds, "gadgets.gated.autox.dev") })
}

// dropCRD deletes a CustomResourceDefinition and waits until it is gone.
func dropCRD(t *testing.T, crds dynamic.NamespaceableResourceInterface, name string) {
	t.Helper()
	if err := crds.Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, "CustomResourceDefinition "+name+" gone", func() (bool, error) {
		_, err := crds.Get(context.Background(), name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
}

// discoveryProxy is a proxy to the API server whose discovery of gatedGroup
// fails with 503 while failing is set, as an aggregated API that is down
// does. It asks for the legacy discovery documents (one per group version),
// in which a group version fails alone; everything else is forwarded.
func discoveryProxy(t *testing.T, failing *atomic.Bool) *rest.Config {
	t.Helper()
	target, err := url.Parse(cluster.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	rt, err := rest.TransportFor(cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	forward := &httputil.ReverseProxy{Transport: rt, Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(target)
		if r.In.URL.Path == "/api" || r.In.URL.Path == "/apis" {
			r.Out.Header.Set("Accept", "application/json")
		}
	}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if failing.Load() && strings.HasPrefix(r.URL.Path, "/apis/"+gatedGroup) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			_ = json.NewEncoder(w).Encode(metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
				Status: metav1.StatusFailure, Code: http.StatusServiceUnavailable, Reason: metav1.StatusReasonServiceUnavailable,
				Message: "the server is currently unable to handle the request"})
			return
		}
		forward.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		srv.Close()
		utilnet.CloseIdleConnectionsFor(rt)
	})
	return &rest.Config{Host: srv.URL}
}

// TestPartialDiscovery: while the discovery of the group a chart gates an
// object on fails, an upgrade or a reinstall would render without that
// object and delete it. Both fail with an error naming the group and change
// nothing; an install (which deletes nothing) goes on. The partial result is
// not kept: once discovery answers again, the next upgrade sees the group.
func TestPartialDiscovery(t *testing.T) {
	gadgetCRD(t)
	var failing atomic.Bool
	m, err := New(withClients(t, Options{RESTConfig: discoveryProxy(t, &failing), Timeout: time.Minute, Log: zerolog.Nop()}))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ns := cluster.Namespace(t)
	testenv.Eventually(t, time.Minute, "discovery serves "+gatedGroup, func() (bool, error) {
		m.forgetCapabilities()
		caps, err := m.capabilities()
		return err == nil && caps.APIVersions.Has(gatedGroup+"/Gadget"), nil
	})
	gatedExists := func(name string) bool {
		t.Helper()
		_, err := cluster.Client.CoreV1().ConfigMaps(ns).Get(ctx, name+"-gated", metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		return err == nil
	}
	if _, err := m.Install(ctx, desired(t, ns, "g", "charts/gated", map[string]interface{}{"greeting": "one"})); err != nil {
		t.Fatal(err)
	}
	if !gatedExists("g") {
		t.Fatal("the gated object was not installed")
	}
	before, err := cluster.Client.CoreV1().ConfigMaps(ns).Get(ctx, "g", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	failing.Store(true)
	m.forgetCapabilities() // as when the kept list has expired
	names := func(err error) bool {
		var partial *PartialDiscoveryError
		return errors.As(err, &partial) && slices.Equal(partial.Missing, []string{gatedGroup}) && strings.Contains(err.Error(), gatedGroup)
	}
	if _, err := m.Upgrade(ctx, desired(t, ns, "g", "charts/gated", map[string]interface{}{"greeting": "two"})); !names(err) {
		t.Errorf("Upgrade during partial discovery = %v, want an error naming %s", err, gatedGroup)
	}
	if _, err := m.Reinstall(ctx, desired(t, ns, "g", "charts/gated", map[string]interface{}{"greeting": "two"})); !names(err) {
		t.Errorf("Reinstall during partial discovery = %v, want an error naming %s", err, gatedGroup)
	}
	after, err := cluster.Client.CoreV1().ConfigMaps(ns).Get(ctx, "g", metav1.GetOptions{})
	if err != nil || after.UID != before.UID || after.Data["greeting"] != "one" || !gatedExists("g") {
		t.Errorf("release g changed during partial discovery: %v, %v, gated object there: %v", after.Data, err, gatedExists("g"))
	}
	if r, err := m.Lookup(ctx, ns, "g"); err != nil || r == nil || r.Revision != 1 {
		t.Errorf("Lookup = %+v, %v; want revision 1", r, err)
	}
	// A new release deletes nothing: it is installed, without the object
	// of the group discovery misses.
	if _, err := m.Install(ctx, desired(t, ns, "h", "charts/gated", nil)); err != nil || gatedExists("h") {
		t.Errorf("Install during partial discovery = %v, gated object rendered: %v", err, gatedExists("h"))
	}

	failing.Store(false)
	if rev, err := m.Upgrade(ctx, desired(t, ns, "g", "charts/gated", map[string]interface{}{"greeting": "two"})); err != nil || rev != 2 {
		t.Fatalf("Upgrade once discovery is complete = %d, %v", rev, err)
	}
	if !gatedExists("g") {
		t.Error("the upgrade after partial discovery deleted the gated object: the partial list was kept")
	}
}
