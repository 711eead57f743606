package helmops

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/autox-dev/autox/internal/testenv"
)

// TestWroteNothing: the failures that leave a release as it was are told
// apart from those that wrote (a failed revision), against the real API
// server: a premise that changed, an object that exists and is not the
// release's, a refused preflight, an operation not started, partial
// discovery — wrote nothing; an install whose object the API server refuses
// after Helm wrote its record — wrote.
func TestWroteNothing(t *testing.T) {
	ctx := context.Background()
	m := newManager(t, DriverSecret)
	ns := cluster.Namespace(t)

	if _, err := m.Install(ctx, desired(t, ns, "web", "charts/hello", map[string]interface{}{"greeting": "hi"})); err != nil {
		t.Fatal(err)
	}
	changed := desired(t, ns, "web", "charts/hello", map[string]interface{}{"greeting": "two"})
	changed.Current, changed.Revision = 7, 8 // decided on a revision that is not the newest
	_, err := m.Upgrade(ctx, changed)
	assertWrote(t, "an upgrade whose premise changed", err, false)

	// An object of that name exists, of no release: Helm refuses before its record.
	if _, err := cluster.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "taken"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err = m.Install(ctx, desired(t, ns, "taken", "charts/hello", nil))
	assertWrote(t, "an install of an object that exists", err, false)

	done, cancel := context.WithCancel(ctx)
	cancel()
	_, err = m.Install(done, desired(t, ns, "late", "charts/hello", nil))
	assertWrote(t, "an install not started", err, false)

	// The API server refuses the object after Helm wrote the pending record.
	_, err = m.Install(ctx, desired(t, ns, "bad", "charts/rejected", nil))
	assertWrote(t, "an install whose object the API server refuses", err, true)

	cluster.ServiceAccount(t, ns, "records-only", []rbacv1.PolicyRule{testenv.HelmRecords})
	as, err := m.As(ctx, ServiceAccount{Namespace: ns, Name: "records-only"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = as.Install(ctx, desired(t, ns, "refused", "charts/hello", nil))
	assertWrote(t, "an install refused by its preflight", err, false)
}

// TestInstallAsAccountUnderPartialDiscovery: an install as a service account
// goes on while discovery is partial, as autox's own does (a new release
// deletes nothing); its preflight does not refuse it. An upgrade as the
// account fails, writing nothing.
func TestInstallAsAccountUnderPartialDiscovery(t *testing.T) {
	gadgetCRD(t)
	var failing atomic.Bool
	m, err := New(withClients(t, Options{RESTConfig: discoveryProxy(t, &failing), Timeout: time.Minute, Log: zerolog.Nop()}))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ns := cluster.Namespace(t)
	cluster.ServiceAccount(t, ns, "deployer", []rbacv1.PolicyRule{testenv.HelmRecords, testenv.Manage("", "configmaps")})
	as, err := m.As(ctx, ServiceAccount{Namespace: ns, Name: "deployer"})
	if err != nil {
		t.Fatal(err)
	}
	failing.Store(true)
	m.forgetCapabilities()
	as.forgetCapabilities()
	if _, err := as.Install(ctx, desired(t, ns, "g", "charts/gated", nil)); err != nil {
		t.Fatalf("install as an account during partial discovery: %v", err)
	}
	_, err = as.Upgrade(ctx, Target{Spec: "spec", ReleaseSpec: "rs", Name: "g", Namespace: ns, Chart: desired(t, ns, "g", "charts/gated", nil).Chart, Current: 1, Revision: 2})
	var partial *PartialDiscoveryError
	if !errors.As(err, &partial) {
		t.Fatalf("upgrade as an account during partial discovery: %v, want a *PartialDiscoveryError", err)
	}
	assertWrote(t, "an upgrade during partial discovery", err, false)
}

func assertWrote(t *testing.T, what string, err error, wrote bool) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: no error", what)
		return
	}
	if got := !WroteNothing(err); got != wrote {
		t.Errorf("%s: WroteNothing = %v, want %v (%v)", what, !got, !wrote, err)
	}
	// The marks survive the wrapping of callers.
	if got := !WroteNothing(fmt.Errorf("step: %w", err)); got != wrote {
		t.Errorf("%s, wrapped: WroteNothing = %v, want %v", what, !got, !wrote)
	}
}

// TestMarkAfterAWrite: an operation that wrote (the chart's CRDs) and was
// then refused by a premise that changed (an upgrade's pruning) wrote: its
// attempt counts. One that wrote nothing before the same refusal did not.
func TestMarkAfterAWrite(t *testing.T) {
	refused := func() error {
		return fmt.Errorf("cannot upgrade release ns/web: %w", &ChangedError{Namespace: "ns", Name: "web", Decided: 3, Newest: 4})
	}
	wrote := &writes{}
	wrote.note()
	if WroteNothing(wrote.mark(refused())) {
		t.Error("a refusal after a write counts as nothing written")
	}
	if !WroteNothing((&writes{}).mark(refused())) {
		t.Error("a refusal before any write counts as written")
	}
	if WroteNothing((&writes{}).mark(fmt.Errorf("x: %w", errLeftRunning))) {
		t.Error("an operation left running counts as nothing written")
	}
}
