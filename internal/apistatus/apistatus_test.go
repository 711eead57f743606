package apistatus

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/storage/driver"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
)

// notFoundOf is the Status the API server sends for a GET of a missing
// object (apierrors.NewNotFound, as its registry makes it).
func notFoundOf(resource, name string) *metav1.Status {
	st := apierrors.NewNotFound(schema.GroupResource{Resource: resource}, name).ErrStatus
	st.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
	return &st
}

func jsonOf(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func protobufOf(t *testing.T, st *metav1.Status) []byte {
	t.Helper()
	s := runtime.NewScheme()
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	var buf bytes.Buffer
	if err := protobuf.NewSerializer(s, s).Encode(st, &buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// answer is one 404 a server in front of the client might send.
type answer struct {
	contentType string
	body        []byte
}

// serve answers every request with status and a.
func serve(t *testing.T, status int, a answer) *rest.Config {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if a.contentType != "" {
			w.Header().Set("Content-Type", a.contentType)
		}
		w.WriteHeader(status)
		_, _ = w.Write(a.body)
	}))
	t.Cleanup(srv.Close)
	return &rest.Config{Host: srv.URL}
}

func withTransport(rc *rest.Config) *rest.Config {
	c := rest.CopyConfig(rc)
	c.Wrap(Transport)
	return c
}

// getSecret reads Secret ns/creds with the typed client, as SourceReader does.
func getSecret(t *testing.T, rc *rest.Config) error {
	t.Helper()
	_, err := kubernetes.NewForConfigOrDie(rc).CoreV1().Secrets("ns").Get(context.Background(), "creds", metav1.GetOptions{})
	if err == nil {
		t.Fatal("the GET succeeded")
	}
	return err
}

// getMeta reads Secret ns/creds with the metadata client, as the trigger
// reader does (it accepts protobuf).
func getMeta(t *testing.T, rc *rest.Config) error {
	t.Helper()
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	_, err := metadata.NewForConfigOrDie(rc).Resource(gvr).Namespace("ns").Get(context.Background(), "creds", metav1.GetOptions{})
	if err == nil {
		t.Fatal("the GET succeeded")
	}
	return err
}

// TestNotFound: only a Status NotFound sent as a body and naming the object
// is absence, through both clients autox reads objects with, with and
// without Transport; every other 404 is an error that says nothing.
func TestNotFound(t *testing.T) {
	notServed := notFoundOf("secrets", "creds")
	notServed.Details = nil
	for _, c := range []struct {
		name   string
		answer answer
		// absent: NotFound(err, "creds") with and without Transport.
		absent bool
		// foreign: Transport turns the answer into a *ForeignNotFound.
		foreign bool
		// madeUpName: without Transport, client-go's own NotFound names
		// the object (the typed client), the trap NotFound avoids.
		madeUpName bool
	}{
		{name: "plain text", answer: answer{"text/plain; charset=utf-8", []byte("404 page not found\n")}, foreign: true, madeUpName: true},
		{name: "HTML page", answer: answer{"text/html", []byte("<html><body><h1>404 Not Found</h1>nginx</body></html>")}, foreign: true, madeUpName: true},
		{name: "no body", answer: answer{}, foreign: true, madeUpName: true},
		{name: "JSON that is no Status", answer: answer{"application/json", []byte(`{"error":"not found"}`)}, foreign: true, madeUpName: true},
		{name: "a Status labelled text/plain", answer: answer{"text/plain", jsonOf(t, notFoundOf("secrets", "creds"))}, foreign: true, madeUpName: true},
		{name: "a Status of success", answer: answer{"application/json", jsonOf(t, &metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusSuccess})},
			foreign: true, madeUpName: true},
		{name: "Status NotFound of the object", answer: answer{"application/json", jsonOf(t, notFoundOf("secrets", "creds"))}, absent: true},
		{name: "Status NotFound of the object, protobuf", answer: answer{"application/vnd.kubernetes.protobuf", protobufOf(t, notFoundOf("secrets", "creds"))}, absent: true},
		{name: "Status NotFound of another object", answer: answer{"application/json", jsonOf(t, notFoundOf("secrets", "other"))}},
		{name: "Status NotFound naming nothing (resource not served)", answer: answer{"application/json", jsonOf(t, notServed)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			rc := serve(t, http.StatusNotFound, c.answer)
			for _, get := range []struct {
				client string
				read   func(*testing.T, *rest.Config) error
			}{{"typed", getSecret}, {"metadata", getMeta}} {
				if c.answer.contentType == "application/vnd.kubernetes.protobuf" && get.client == "typed" {
					continue // the typed client asks for JSON
				}
				bare := get.read(t, rc)
				if got := NotFound(bare, "creds"); got != c.absent {
					t.Errorf("%s client without Transport: NotFound = %v, want %v (%v)", get.client, got, c.absent, bare)
				}
				if c.madeUpName && get.client == "typed" {
					// What the bug was made of: client-go's own NotFound names the object.
					var st apierrors.APIStatus
					if !apierrors.IsNotFound(bare) || !errors.As(bare, &st) || st.Status().Details == nil || st.Status().Details.Name != "creds" {
						t.Errorf("client-go no longer makes up a NotFound naming the object: %#v", bare)
					}
				}
				err := get.read(t, withTransport(rc))
				var foreign *ForeignNotFound
				if got := errors.As(err, &foreign); got != c.foreign {
					t.Errorf("%s client with Transport: ForeignNotFound = %v, want %v (%v)", get.client, got, c.foreign, err)
				}
				if c.foreign && apierrors.IsNotFound(err) {
					t.Errorf("%s client with Transport: a foreign 404 is still a NotFound: %v", get.client, err)
				}
				if got := NotFound(err, "creds"); got != c.absent {
					t.Errorf("%s client with Transport: NotFound = %v, want %v (%v)", get.client, got, c.absent, err)
				}
			}
		})
	}
}

// TestNotFoundStatusWithoutVersion: client-go, for old servers, reads a
// Status without apiVersion as the server's; Transport does not (the API
// server always sends one), so such an answer is no absence at all.
func TestNotFoundStatusWithoutVersion(t *testing.T) {
	body := jsonOf(t, map[string]any{"kind": "Status", "status": "Failure", "reason": "NotFound", "code": 404,
		"details": map[string]any{"name": "creds", "kind": "secrets"}})
	rc := serve(t, http.StatusNotFound, answer{"application/json", body})
	if err := getSecret(t, rc); !NotFound(err, "creds") {
		t.Errorf("without Transport, client-go's reading changed: %v", err)
	}
	if err := getSecret(t, withTransport(rc)); NotFound(err, "creds") {
		t.Errorf("with Transport, a Status without apiVersion is absence: %v", err)
	}
}

// TestHelmDriverNotFound: Helm's storage driver maps any NotFound of a
// record GET to ErrReleaseNotFound; behind Transport a bare 404 is an error
// of its own.
func TestHelmDriverNotFound(t *testing.T) {
	rc := serve(t, http.StatusNotFound, answer{"text/plain", []byte("404 page not found")})
	get := func(rc *rest.Config) error {
		_, err := driver.NewSecrets(kubernetes.NewForConfigOrDie(rc).CoreV1().Secrets("ns")).Get("sh.helm.release.v1.web.v1")
		return err
	}
	if err := get(rc); !errors.Is(err, driver.ErrReleaseNotFound) {
		t.Errorf("without Transport, Helm's driver no longer reads a bare 404 as a missing record: %v", err)
	}
	err := get(withTransport(rc))
	if errors.Is(err, driver.ErrReleaseNotFound) || err == nil || !strings.Contains(err.Error(), "without a Kubernetes Status body") {
		t.Errorf("with Transport, Helm's driver reads a bare 404 as %v", err)
	}
}

// TestTransportPassesOtherAnswers: answers other than 404 are untouched.
func TestTransportPassesOtherAnswers(t *testing.T) {
	rc := serve(t, http.StatusInternalServerError, answer{"text/plain", []byte("upstream exploded")})
	err := getSecret(t, withTransport(rc))
	if !apierrors.IsInternalError(err) || !strings.Contains(err.Error(), "upstream exploded") {
		t.Errorf("a 500 became %v", err)
	}
	ok := serve(t, http.StatusOK, answer{"application/json", jsonOf(t, map[string]any{"kind": "Secret", "apiVersion": "v1",
		"metadata": map[string]any{"name": "creds", "namespace": "ns"}})})
	s, err := kubernetes.NewForConfigOrDie(withTransport(ok)).CoreV1().Secrets("ns").Get(context.Background(), "creds", metav1.GetOptions{})
	if err != nil || s.Name != "creds" {
		t.Errorf("a 200 became %v, %v", s, err)
	}
}
