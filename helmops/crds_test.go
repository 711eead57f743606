package helmops

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"

	"github.com/autox-dev/autox/internal/testenv"
)

// crdsResource is the API of CustomResourceDefinitions.
var crdsResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// TestTemplateCRDIsUsableAtOnce: a release whose chart's templates (not
// crds/) hold a CustomResourceDefinition makes its kind usable by the next
// release at once: the second install maps and renders against the new API,
// not against discovery cached before the first.
func TestTemplateCRDIsUsableAtOnce(t *testing.T) {
	ctx := context.Background()
	dc, err := dynamic.NewForConfig(cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dropCRD(t, dc.Resource(crdsResource), "probes.probe.autox.test") })
	m := newManager(t, DriverSecret)
	ns := cluster.Namespace(t)
	if _, err := m.Install(ctx, desired(t, ns, "defs", "charts/probe-crd", nil)); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Install(ctx, desired(t, ns, "probe", "charts/probe", nil)); err != nil {
		t.Fatalf("install of a Probe right after the release that defines the kind: %v", err)
	}
	probes := schema.GroupVersionResource{Group: "probe.autox.test", Version: "v1", Resource: "probes"}
	if _, err := dc.Resource(probes).Namespace(ns).Get(ctx, "probe", metav1.GetOptions{}); err != nil {
		t.Errorf("the Probe was not created: %v", err)
	}
}

// TestBuildRefreshesDiscovery: a kind whose CRD was created after the
// shared REST mapper read discovery (by hand, or by another process) is
// found by the next operation, which reads discovery anew when its build
// misses a kind.
func TestBuildRefreshesDiscovery(t *testing.T) {
	ctx := context.Background()
	m := newManager(t, DriverSecret)
	ns := cluster.Namespace(t)
	// The mapper and capabilities read discovery before the CRD exists.
	if _, err := m.Install(ctx, desired(t, ns, "warm", "charts/hello", nil)); err != nil {
		t.Fatal(err)
	}
	gadgetCRD(t)
	disc, err := discovery.NewDiscoveryClientForConfig(cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, "the API server serving "+gatedGroup, func() (bool, error) {
		_, err := disc.ServerResourcesForGroupVersion(gatedGroup)
		return err == nil, nil
	})
	if _, err := m.Install(ctx, desired(t, ns, "gadget", "charts/probe", map[string]interface{}{"apiVersion": gatedGroup, "kind": "Gadget"})); err != nil {
		t.Fatalf("install of a Gadget once its CRD is served: %v", err)
	}
}
