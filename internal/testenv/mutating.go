package testenv

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Mutator is a mutating admission webhook on a namespace's Deployments
// that sets one annotation to a new value ("mutated-1", "mutated-2", …) on
// every create and update, dry runs included: a webhook whose mutation
// never settles, as one that stamps a time does.
type Mutator struct {
	srv      *httptest.Server
	key      string
	mutated  atomic.Int64
	reviewed atomic.Int64
}

// Down stops the webhook's server while the API server still calls it
// (failure policy Fail): a webhook that is down.
func (mu *Mutator) Down() { mu.srv.Close() }

// Mutated returns how many admissions it has mutated.
func (mu *Mutator) Mutated() int64 { return mu.mutated.Load() }

// MutateAnnotation registers a Mutator setting annotation key on the
// Deployments of namespace and waits until the API server calls it; the
// test's end removes it.
func (c *Cluster) MutateAnnotation(t testing.TB, namespace, key string) *Mutator {
	t.Helper()
	mu := &Mutator{key: key}
	srv, client := webhookServer(t, "/mutate", mu.review)
	mu.srv = srv
	name := "autox-test-mutate-" + namespace
	rules, nsSel := webhookRules("apps", "deployments", namespace)
	fail, none, timeout := admissionregistrationv1.Fail, admissionregistrationv1.SideEffectClassNone, int32(10)
	hooks := c.Client.AdmissionregistrationV1().MutatingWebhookConfigurations()
	_, err := hooks.Create(context.Background(), &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name:                    "mutate.autox.test",
			ClientConfig:            client,
			Rules:                   rules,
			NamespaceSelector:       nsSel,
			FailurePolicy:           &fail,
			SideEffects:             &none,
			TimeoutSeconds:          &timeout,
			AdmissionReviewVersions: []string{"v1"},
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = hooks.Delete(context.Background(), name, metav1.DeleteOptions{})
		srv.Close()
	})
	// The API server starts calling a new webhook a moment after it is
	// created: probe with dry-run creates (mutation runs before the
	// object's validation, which fails them) until it does.
	probe := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: admissionProbe}}
	Eventually(t, time.Minute, "the mutating webhook called", func() (bool, error) {
		_, _ = c.Client.AppsV1().Deployments(namespace).Create(context.Background(), probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return mu.reviewed.Load() > 0, nil
	})
	return mu
}

func (mu *Mutator) review(_ *http.Request, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	mu.reviewed.Add(1)
	resp := &admissionv1.AdmissionResponse{UID: req.UID, Allowed: true}
	var obj struct {
		Metadata struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
	}
	if !strings.HasPrefix(req.Name, admissionProbe) && json.Unmarshal(req.Object.Raw, &obj) == nil {
		v := fmt.Sprintf("mutated-%d", mu.mutated.Add(1))
		var op interface{} = map[string]interface{}{"op": "add", "path": "/metadata/annotations", "value": map[string]string{mu.key: v}}
		if obj.Metadata.Annotations != nil {
			op = map[string]interface{}{"op": "add", "path": "/metadata/annotations/" + strings.NewReplacer("~", "~0", "/", "~1").Replace(mu.key), "value": v}
		}
		patch, _ := json.Marshal([]interface{}{op})
		pt := admissionv1.PatchTypeJSONPatch
		resp.Patch, resp.PatchType = patch, &pt
	}
	return resp
}
