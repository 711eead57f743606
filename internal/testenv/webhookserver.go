package testenv

import (
	"crypto/tls"
	"encoding/json"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// admissionProbe is the name prefix of the dry-run objects the webhook
// helpers create to see the API server call a new webhook; the webhooks
// admit them unchanged.
const admissionProbe = "autox-test-admission-probe"

// webhookServer serves an admission webhook over TLS on 127.0.0.1 with a
// certificate of a fresh CA: the server (closed by the caller), the
// webhook's client config for path, and nothing else. review answers each
// AdmissionReview; a body that is not one gets 400.
func webhookServer(t testing.TB, path string, review func(r *http.Request, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse) (*httptest.Server, admissionregistrationv1.WebhookClientConfig) {
	t.Helper()
	ca, err := NewCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ar admissionv1.AdmissionReview
		if err := json.NewDecoder(r.Body).Decode(&ar); err != nil || ar.Request == nil {
			http.Error(w, "not an AdmissionReview", http.StatusBadRequest)
			return
		}
		resp := review(r, ar.Request)
		if resp == nil {
			return // the call was given up: no answer
		}
		ar.Response, ar.Request = resp, nil
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(ar)
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{ca.ServerCert}, MinVersion: tls.VersionTLS12}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	caPEM, err := os.ReadFile(ca.File)
	if err != nil {
		srv.Close()
		t.Fatal(err)
	}
	url := srv.URL + path
	return srv, admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: caPEM}
}

// webhookRules selects creates and updates of one resource of the
// namespace named namespace.
func webhookRules(group, resource, namespace string) ([]admissionregistrationv1.RuleWithOperations, *metav1.LabelSelector) {
	return []admissionregistrationv1.RuleWithOperations{{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
			Rule:       admissionregistrationv1.Rule{APIGroups: []string{group}, APIVersions: []string{"v1"}, Resources: []string{resource}},
		}},
		&metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": namespace}}
}
