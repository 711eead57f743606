package testenv

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AdmissionHold is a validating admission webhook on a namespace's Secrets
// that holds the admission of those its match selects, as a slow webhook
// does, and admits every other at once. A held admission ends when the API
// server gives up the call (the request's deadline passed, or its client
// went away and the API server heard it) or at Release, which admits it.
// Its failure policy is Ignore, so that a call the API server gave up
// does not itself refuse the request: what happens to the request then is
// the API server's own doing.
type AdmissionHold struct {
	match    func(operation, name string) bool
	released chan struct{}
	once     sync.Once

	reviews, held, givenUp atomic.Int64
}

// Held returns how many admissions have been held so far.
func (a *AdmissionHold) Held() int64 { return a.held.Load() }

// GivenUp returns how many held admissions the API server gave up.
func (a *AdmissionHold) GivenUp() int64 { return a.givenUp.Load() }

// Release admits the held admissions the API server still waits for, and
// every one from now on.
func (a *AdmissionHold) Release() { a.once.Do(func() { close(a.released) }) }

// HoldAdmissions registers an AdmissionHold for the Secrets of namespace
// and waits until the API server calls it; the test's end removes it.
func (c *Cluster) HoldAdmissions(t testing.TB, namespace string, match func(operation, name string) bool) *AdmissionHold {
	t.Helper()
	a := &AdmissionHold{match: match, released: make(chan struct{})}
	srv, client := webhookServer(t, "/validate", a.review)
	name := "autox-test-hold-" + namespace
	rules, nsSel := webhookRules("", "secrets", namespace)
	fail, none, timeout := admissionregistrationv1.Ignore, admissionregistrationv1.SideEffectClassNone, int32(30)
	hooks := c.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	_, err := hooks.Create(context.Background(), &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:                    "hold.autox.test",
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
		a.Release()
		srv.Close()
	})
	// The API server starts calling a new webhook a moment after it is
	// created: probe with dry-run creates until it does.
	probe := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: admissionProbe}}
	Eventually(t, time.Minute, "the admission webhook called", func() (bool, error) {
		_, err := c.Client.CoreV1().Secrets(namespace).Create(context.Background(), probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return a.reviews.Load() > 0, err
	})
	return a
}

func (a *AdmissionHold) review(r *http.Request, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	a.reviews.Add(1)
	if !strings.HasPrefix(req.Name, admissionProbe) && a.match(string(req.Operation), req.Name) {
		a.held.Add(1)
		select {
		case <-r.Context().Done():
			a.givenUp.Add(1)
			return nil
		case <-a.released:
		}
	}
	return &admissionv1.AdmissionResponse{UID: req.UID, Allowed: true}
}
