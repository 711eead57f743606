// Package apistatus makes "not found" mean that the API server said so.
//
// client-go turns every HTTP 404 into a NotFound StatusError: the API
// server's own, decoded from the Status body it sends, and otherwise one
// that client-go makes up, whose details name the object the request was
// for. A 404 from a proxy, gateway or ingress in front of the API server
// ("404 page not found", an HTML page) then reads exactly like "this object
// does not exist", and Helm (its kube client and storage drivers) and autox
// would take it for absence: an optional values source left out, a deleted
// object counted as gone, a release record as missing.
//
// Transport closes that where every client of the process meets: a 404
// without a Kubernetes Status body is not handed to client-go as a response
// at all, but as a transport error that no IsNotFound matches. NotFound is
// the check autox's own reads make on top of it: a NotFound decoded from a
// Status body, not made up by client-go, that names the object read.
package apistatus

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
)

// maxStatusBytes bounds the 404 body read to check it: the API server's
// Status for a NotFound is a few hundred bytes. A longer body is not one.
const maxStatusBytes = 64 << 10

// statusKind is what the API server's Status declares itself to be, in JSON
// as in protobuf.
var statusKind = schema.GroupVersionKind{Version: "v1", Kind: "Status"}

// codecs decode a Status in the media types client-go accepts (JSON,
// YAML, protobuf), and nothing else.
var codecs = func() serializer.CodecFactory {
	s := runtime.NewScheme()
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	return serializer.NewCodecFactory(s)
}()

// Transport wraps a client's transport (rest.Config.Wrap) so that a 404
// whose body is not a Status of the API server becomes a *ForeignNotFound
// error. Every other answer passes untouched.
func Transport(rt http.RoundTripper) http.RoundTripper { return verified{next: rt} }

type verified struct{ next http.RoundTripper }

func (v verified) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := v.next.RoundTrip(req)
	if err != nil || resp.StatusCode != http.StatusNotFound {
		return resp, err
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxStatusBytes+1))
	_ = resp.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("cannot read the body of a 404 answer to %s %s: %w", req.Method, req.URL.Path, err)
	}
	contentType := resp.Header.Get("Content-Type")
	if len(body) <= maxStatusBytes && IsStatus(contentType, body) {
		resp.Body = io.NopCloser(bytes.NewReader(body))
		return resp, nil
	}
	// net/http's client wraps this in a *url.Error naming method and URL.
	return nil, &ForeignNotFound{ContentType: contentType, Body: excerpt(body)}
}

// IsStatus reports whether body, of that Content-Type, is what the API
// server sends with an error: a Status (kind Status, apiVersion v1, status
// Failure) in a media type client-go decodes. It is exactly when client-go
// takes its error from the body rather than making one up (rest.Result's
// Error), except that an apiVersion is required: the API server always sends
// one.
func IsStatus(contentType string, body []byte) bool {
	mediaType, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return false
	}
	info, ok := runtime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), mediaType)
	if !ok {
		return false
	}
	obj, gvk, err := info.Serializer.Decode(body, nil, nil)
	if err != nil || gvk == nil || *gvk != statusKind {
		return false
	}
	st, ok := obj.(*metav1.Status)
	return ok && st.Status == metav1.StatusFailure
}

// ForeignNotFound is a 404 answer without a Status body: something between
// autox and the API server (a proxy, a gateway, an ingress, the wrong URL)
// answered, not the API server. It says nothing about the object.
type ForeignNotFound struct {
	ContentType string
	// Body is the start of what was answered, quoted.
	Body string
}

func (e *ForeignNotFound) Error() string {
	return fmt.Sprintf("404 Not Found without a Kubernetes Status body (Content-Type %q, body %s): not an answer of the API server (a proxy or gateway in between?), so nothing is taken for absent",
		e.ContentType, e.Body)
}

// excerpt quotes the start of a body for an error: a proxy's 404 page says
// who answered.
func excerpt(body []byte) string {
	const max = 80
	if len(body) > max {
		return strconv.Quote(string(body[:max])) + "…"
	}
	return strconv.Quote(string(body))
}

// NotFound reports whether err is the API server's answer that the object
// named name does not exist: a NotFound decoded from a Status body (client-go
// marks the ones it makes up from a bare 404 as an unexpected server
// response) whose details name that object. A NotFound naming nothing is
// about the URL (a resource that is not served), and one naming another
// object is about that one; neither says that this object is absent.
func NotFound(err error, name string) bool {
	var status apierrors.APIStatus
	if !apierrors.IsNotFound(err) || apierrors.IsUnexpectedServerError(err) || !errors.As(err, &status) {
		return false
	}
	d := status.Status().Details
	return d != nil && d.Name != "" && d.Name == name
}
