package cli

import (
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// apiRequests counts the requests autox makes to the API server, Helm's
// included (every client is built from one rest.Config); the pass log line
// reports its growth.
var apiRequests atomic.Int64

// apiRequestsByKind is apiRequests by verb and resource, served as
// autox_kube_api_requests_total. Its label values are bounded: the verbs
// are Kubernetes' and the resources are those autox and its charts use.
var apiRequestsByKind = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "autox_kube_api_requests_total", Help: "Requests made to the Kubernetes API server, Helm's included, by verb and resource.",
}, []string{"verb", "resource"})

func countRequests(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		apiRequests.Add(1)
		verb, resource := requestKind(req)
		apiRequestsByKind.WithLabelValues(verb, resource).Inc()
		return rt.RoundTrip(req)
	})
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// requestKind names a request as the API server's audit log would: its verb
// (get, list, watch, create, update, patch, delete, deletecollection) and
// resource (with the subresource after a slash). Requests outside the
// resource API are named by their first path element: discovery (/api,
// /apis), version, openapi.
func requestKind(req *http.Request) (verb, resource string) {
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	var rest []string
	switch {
	case len(parts) >= 3 && parts[0] == "api":
		rest = parts[2:] // api/v1/...
	case len(parts) >= 4 && parts[0] == "apis":
		rest = parts[3:] // apis/group/version/...
	}
	if len(rest) >= 2 && rest[0] == "namespaces" && len(rest) > 2 {
		rest = rest[2:] // namespaces/NS/resource/...
	}
	named := len(rest) >= 2
	switch {
	case len(rest) == 0:
		resource = parts[0]
		if resource == "api" || resource == "apis" {
			resource = "discovery"
		}
	case len(rest) >= 3:
		resource = rest[0] + "/" + rest[2]
	default:
		resource = rest[0]
	}
	switch req.Method {
	case http.MethodGet, http.MethodHead:
		switch {
		case req.URL.Query().Get("watch") == "true" || req.URL.Query().Get("watch") == "1":
			verb = "watch"
		case named || len(rest) == 0:
			verb = "get"
		default:
			verb = "list"
		}
	case http.MethodPost:
		verb = "create"
	case http.MethodPut:
		verb = "update"
	case http.MethodPatch:
		verb = "patch"
	case http.MethodDelete:
		verb = "delete"
		if !named {
			verb = "deletecollection"
		}
	default:
		verb = strings.ToLower(req.Method)
	}
	return verb, resource
}
