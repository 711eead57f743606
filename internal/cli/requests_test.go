package cli

import (
	"net/http"
	"testing"
)

func TestRequestKind(t *testing.T) {
	for _, tc := range []struct{ method, url, verb, resource string }{
		{"GET", "/api/v1/namespaces/ns/secrets?labelSelector=owner%3Dhelm", "list", "secrets"},
		{"GET", "/api/v1/namespaces/ns/secrets/sh.helm.release.v1.a.v1", "get", "secrets"},
		{"POST", "/api/v1/namespaces/ns/secrets", "create", "secrets"},
		{"PUT", "/api/v1/namespaces/ns/secrets/x", "update", "secrets"},
		{"GET", "/apis/apps/v1/namespaces/ns/deployments?watch=true", "watch", "deployments"},
		{"GET", "/apis/apps/v1/deployments", "list", "deployments"},
		{"PATCH", "/apis/apps/v1/namespaces/ns/deployments/d/status", "patch", "deployments/status"},
		{"DELETE", "/api/v1/namespaces/ns/configmaps", "deletecollection", "configmaps"},
		{"GET", "/api/v1/namespaces/ns", "get", "namespaces"},
		{"GET", "/api/v1/namespaces", "list", "namespaces"},
		{"PUT", "/apis/coordination.k8s.io/v1/namespaces/ns/leases/autox", "update", "leases"},
		{"GET", "/version", "get", "version"},
		{"GET", "/api", "get", "discovery"},
		{"GET", "/apis/apps/v1", "get", "discovery"},
		{"GET", "/openapi/v3", "get", "openapi"},
	} {
		req, err := http.NewRequest(tc.method, "https://h"+tc.url, nil)
		if err != nil {
			t.Fatal(err)
		}
		if verb, resource := requestKind(req); verb != tc.verb || resource != tc.resource {
			t.Errorf("%s %s: got %s %s, want %s %s", tc.method, tc.url, verb, resource, tc.verb, tc.resource)
		}
	}
}
