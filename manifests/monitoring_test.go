package manifests_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/autox-dev/autox/internal/testenv"
)

// prometheusOperator is the Go module whose example/prometheus-operator-crd
// holds the CRDs the monitoring component is checked against.
const prometheusOperator = "github.com/prometheus-operator/prometheus-operator@v0.85.0"

// installOperatorCRDs installs the Prometheus operator's ServiceMonitor and
// PrometheusRule CRDs, the real ones, from the operator's module (the Go
// module proxy serves it; the module cache keeps it), and waits until the API
// server serves them.
func installOperatorCRDs(t *testing.T) {
	t.Helper()
	cmd := exec.Command("go", "mod", "download", "-json", prometheusOperator)
	cmd.Dir = t.TempDir() // outside autox's module: its go.mod stays as it is
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go mod download %s: %v", prometheusOperator, err)
	}
	var mod struct{ Dir string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		t.Fatalf("go mod download %s printed %s: %v", prometheusOperator, out, err)
	}
	dyn, _ := clients(t)
	crds := dyn.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
	for _, name := range []string{"servicemonitors", "prometheusrules"} {
		data, err := os.ReadFile(filepath.Join(mod.Dir, "example", "prometheus-operator-crd", "monitoring.coreos.com_"+name+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(data, &u.Object); err != nil {
			t.Fatal(err)
		}
		if _, err := crds.Apply(context.Background(), u.GetName(), u, metav1.ApplyOptions{FieldManager: "autox-test", Force: true}); err != nil {
			t.Fatalf("install CRD %s: %v", u.GetName(), err)
		}
		testenv.Eventually(t, time.Minute, "CRD "+u.GetName()+" established", func() (bool, error) {
			got, err := crds.Get(context.Background(), u.GetName(), metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			var crd apiextensionsv1.CustomResourceDefinition
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(got.Object, &crd); err != nil {
				return false, err
			}
			for _, c := range crd.Status.Conditions {
				if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		})
	}
}

// TestMonitoringComponent renders the example overlay with the monitoring
// component and has the API server, with the Prometheus operator's CRDs,
// validate it (the CRDs' schemas check the ServiceMonitor and the rules); then
// checks the pieces find each other: the Service selects autox's pods and
// names their port, the ServiceMonitor selects the Service and names its
// port, and the dashboard is JSON with the sidecar's label.
func TestMonitoringComponent(t *testing.T) {
	installOperatorCRDs(t)
	objs := render(t, "overlays/monitoring")
	dryRun(t, objs)

	byKind := map[string]*unstructured.Unstructured{}
	for _, o := range objs {
		if o.GetKind() == "ConfigMap" && o.GetName() != "autox-dashboard" {
			continue // the config
		}
		byKind[o.GetKind()] = o
		if o.GetKind() != "Namespace" && o.GetLabels()["app.kubernetes.io/name"] != "autox" {
			t.Errorf("%s %s lacks the label app.kubernetes.io/name: autox", o.GetKind(), o.GetName())
		}
	}
	for _, k := range []string{"Service", "ServiceMonitor", "PrometheusRule", "ConfigMap"} {
		if o := byKind[k]; o != nil && o.GetNamespace() != "autox" {
			t.Errorf("%s %s is in namespace %q, want the overlay's autox", o.GetKind(), o.GetName(), o.GetNamespace())
		}
	}
	for _, k := range []string{"Deployment", "Service", "ServiceMonitor", "PrometheusRule", "ConfigMap"} {
		if byKind[k] == nil {
			t.Fatalf("the overlay with the monitoring component renders no %s", k)
		}
	}
	dep, svc, sm, dash := byKind["Deployment"], byKind["Service"], byKind["ServiceMonitor"], byKind["ConfigMap"]

	podLabels, _, _ := unstructured.NestedStringMap(dep.Object, "spec", "template", "metadata", "labels")
	selector, _, _ := unstructured.NestedStringMap(svc.Object, "spec", "selector")
	if len(selector) == 0 || !labels.SelectorFromSet(selector).Matches(labels.Set(podLabels)) {
		t.Errorf("the Service selects %v, autox's pods are labelled %v", selector, podLabels)
	}
	containers, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "containers")
	containerPorts, _, _ := unstructured.NestedSlice(containers[0].(map[string]interface{}), "ports")
	ports, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
	svcPort := ports[0].(map[string]interface{})
	named := false
	for _, p := range containerPorts {
		named = named || p.(map[string]interface{})["name"] == svcPort["targetPort"]
	}
	if !named {
		t.Errorf("the Service's targetPort %v is no port of the container (%v)", svcPort["targetPort"], containerPorts)
	}

	smSelector, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
	if !labels.SelectorFromSet(smSelector).Matches(labels.Set(svc.GetLabels())) {
		t.Errorf("the ServiceMonitor selects %v, the Service is labelled %v", smSelector, svc.GetLabels())
	}
	endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	if len(endpoints) != 1 || endpoints[0].(map[string]interface{})["port"] != svcPort["name"] {
		t.Errorf("the ServiceMonitor scrapes %v, the Service's port is %v", endpoints, svcPort["name"])
	}

	if dash.GetLabels()["grafana_dashboard"] != "1" {
		t.Errorf("the dashboard ConfigMap is labelled %v, want grafana_dashboard: \"1\"", dash.GetLabels())
	}
	data, _, _ := unstructured.NestedString(dash.Object, "data", "autox.json")
	var board struct {
		Title  string
		Panels []json.RawMessage
	}
	if err := json.Unmarshal([]byte(data), &board); err != nil || board.Title == "" || len(board.Panels) == 0 {
		t.Errorf("the dashboard is no Grafana dashboard (%v): %.200s", err, data)
	}
}
