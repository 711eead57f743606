package helmops

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/release/common"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/autox-dev/autox/config"
)

// The tests of the per-operation policies run the real Helm actions
// against the test API server, which runs no controller manager: a
// Deployment never gets ready there, and a Job never completes.

// TestPolicyWaitTimesOut: with wait, an upgrade whose Deployment never gets
// ready fails within its timeout and leaves a failed revision; a rollback
// with wait goes back to the deployed one. Without wait the same upgrade
// is deployed at once.
func TestPolicyWaitTimesOut(t *testing.T) {
	ctx := context.Background()
	m := newManager(t, DriverSecret)
	ns := cluster.Namespace(t)
	wait := config.Policy{Wait: true, Timeout: 2 * time.Second}

	d := desired(t, ns, "w", "charts/ready", nil)
	d.Policy = wait
	if rev, err := m.Install(ctx, d); err != nil || rev != 1 {
		t.Fatalf("install of what is ready at once, with wait: %d, %v", rev, err)
	}
	d = desired(t, ns, "w", "charts/ready", map[string]interface{}{"deployment": true})
	d.Policy, d.Revision = wait, 2
	_, err := m.Upgrade(ctx, d)
	if err == nil {
		t.Fatal("an upgrade that waits for a Deployment that never gets ready succeeded")
	}
	if r, _ := m.Lookup(ctx, ns, "w"); r.Revision != 2 || r.Status != common.StatusFailed || r.LastDeployedRevision != 1 {
		t.Fatalf("after the timeout: %+v, want revision 2 failed after revision 1 (%v)", r, err)
	}
	if err := m.RollbackWith(ctx, ns, "w", 0, 1, nil, wait); err != nil {
		t.Fatal(err)
	}
	if r, _ := m.Lookup(ctx, ns, "w"); r.Revision != 3 || r.Status != common.StatusDeployed {
		t.Fatalf("after the rollback: %+v", r)
	}

	// The default: no wait, deployed as soon as the objects are written.
	d = desired(t, ns, "w", "charts/ready", map[string]interface{}{"deployment": true})
	d.Revision = 4
	if rev, err := m.Upgrade(ctx, d); err != nil || rev != 4 {
		t.Fatalf("upgrade without wait: %d, %v", rev, err)
	}
}

// TestPolicyDisableHooksAndMaxHistory: disableHooks skips a pre-install hook
// (a Job that never completes here), maxHistory bounds the records of one
// release below the Manager's.
func TestPolicyDisableHooksAndMaxHistory(t *testing.T) {
	ctx := context.Background()
	m := newManager(t, DriverSecret) // --max-history 3
	ns := cluster.Namespace(t)
	d := desired(t, ns, "s", "charts/slow", nil)
	d.Policy = config.Policy{DisableHooks: true, Timeout: 2 * time.Second, MaxHistory: 2}
	if _, err := m.Install(ctx, d); err != nil {
		t.Fatalf("install with the hooks disabled: %v", err)
	}
	if _, err := cluster.Client.BatchV1().Jobs(ns).Get(ctx, "s-wait", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the pre-install hook ran: %v", err)
	}
	for i := 2; i <= 4; i++ {
		d := desired(t, ns, "s", "charts/slow", map[string]interface{}{"n": i})
		d.Policy, d.Revision = config.Policy{DisableHooks: true, MaxHistory: 2}, i
		if _, err := m.Upgrade(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	if recs := releaseRecords(t, ns, "s"); len(recs) != 2 {
		t.Errorf("records %v, want maxHistory 2", recs)
	}
}

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// TestPolicyCRDs: the crds policy decides what happens to a chart's crds/
// directory. Skip never creates; Helm's default leaves CRDs alone on
// upgrade; Create creates a missing one on upgrade and leaves an existing
// one; CreateReplace replaces it with the chart's.
func TestPolicyCRDs(t *testing.T) {
	ctx := context.Background()
	m := newManager(t, DriverSecret)
	ns := cluster.Namespace(t)
	dyn, err := dynamic.NewForConfig(cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	crds := dyn.Resource(crdResource)
	const name = "widgets.autox.test"
	// The CRD is cluster-wide: this test and TestCRDsWaitForTheChecks are the
	// package's only users of it.
	drop := func() {
		if err := crds.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
	}
	drop()
	t.Cleanup(drop)
	shortNames := func() (string, bool) {
		t.Helper()
		crd, err := crds.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return "", false
		}
		if err != nil {
			t.Fatal(err)
		}
		names, _, _ := unstructured.NestedStringSlice(crd.Object, "spec", "names", "shortNames")
		return strings.Join(names, ","), true
	}
	revision := 1
	run := func(p config.Policy, withShortName bool) {
		t.Helper()
		d := desired(t, ns, "c", "charts/crd", nil)
		d.Policy, d.Revision = p, revision
		if withShortName {
			for _, f := range d.Chart.Files {
				if strings.HasPrefix(f.Name, "crds/") {
					f.Data = []byte(strings.Replace(string(f.Data), "    kind: Widget\n", "    kind: Widget\n    shortNames: [wdg]\n", 1))
				}
			}
		}
		var err error
		if revision == 1 {
			_, err = m.Install(ctx, d)
		} else {
			_, err = m.Upgrade(ctx, d)
		}
		if err != nil {
			t.Fatalf("revision %d with crds %q: %v", revision, p.CRDs, err)
		}
		revision++
	}
	run(config.Policy{CRDs: config.CRDsSkip}, false)
	if _, exists := shortNames(); exists {
		t.Fatal("crds Skip: the install created the CRD")
	}
	run(config.Policy{}, false)
	if _, exists := shortNames(); exists {
		t.Fatal("the default: an upgrade created the CRD (Helm leaves CRDs alone on upgrade)")
	}
	run(config.Policy{CRDs: config.CRDsCreate}, false)
	if sn, exists := shortNames(); !exists || sn != "" {
		t.Fatalf("crds Create: the upgrade did not create the CRD as the chart has it (exists %v, shortNames %q)", exists, sn)
	}
	run(config.Policy{CRDs: config.CRDsCreate}, true)
	if sn, _ := shortNames(); sn != "" {
		t.Fatalf("crds Create: an existing CRD was changed (shortNames %q)", sn)
	}
	run(config.Policy{CRDs: config.CRDsCreateReplace}, true)
	if sn, _ := shortNames(); sn != "wdg" {
		t.Fatalf("crds CreateReplace: the CRD was not replaced by the chart's (shortNames %q)", sn)
	}
	// Uninstalling never deletes a CRD.
	if err := m.UninstallWith(ctx, ns, "c", 0, nil, config.Policy{CRDs: config.CRDsCreateReplace}); err != nil {
		t.Fatal(err)
	}
	if _, exists := shortNames(); !exists {
		t.Fatal("the uninstall deleted the CRD")
	}
}

// TestCRDsWaitForTheChecks: the chart's CRDs are written only after the
// checks Helm makes before its first write: an install whose name is taken,
// an upgrade of a release with an operation in progress, or one decided on
// another revision than the newest, write no CRD.
func TestCRDsWaitForTheChecks(t *testing.T) {
	ctx := context.Background()
	m := newManager(t, DriverSecret)
	ns := cluster.Namespace(t)
	dyn, err := dynamic.NewForConfig(cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	crds := dyn.Resource(crdResource)
	const name = "widgets.autox.test"
	drop := func() { dropCRD(t, crds, name) }
	drop()
	t.Cleanup(drop)
	noCRD := func(what string) {
		t.Helper()
		if _, err := crds.Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Fatalf("%s: the CRD was written (%v)", what, err)
		}
	}
	d := desired(t, ns, "c", "charts/crd", nil)
	d.Policy = config.Policy{CRDs: config.CRDsSkip}
	if _, err := m.Install(ctx, d); err != nil {
		t.Fatal(err)
	}
	noCRD("crds Skip")
	for _, p := range []string{config.CRDsCreateReplace, config.CRDsCreate, ""} {
		d.Policy = config.Policy{CRDs: p}
		if _, err := m.Install(ctx, d); err == nil || !strings.Contains(err.Error(), "in use") {
			t.Errorf("install over a taken name with crds %q: %v; want the name in use", p, err)
		}
		noCRD(fmt.Sprintf("install over a taken name with crds %q", p))
	}
	d.Current, d.Revision = 1, 2
	for _, p := range []string{config.CRDsCreateReplace, config.CRDsCreate} {
		d.Policy = config.Policy{CRDs: p}
		d.Current = 7
		var changed *ChangedError
		if _, err := m.Upgrade(ctx, d); !errors.As(err, &changed) {
			t.Errorf("upgrade decided on another revision with crds %q: %v; want a *ChangedError", p, err)
		}
		noCRD(fmt.Sprintf("upgrade decided on another revision with crds %q", p))
	}
	setStatus(t, ns, "c", 1, "pending-install")
	d.Current = 1
	for _, p := range []string{config.CRDsCreateReplace, config.CRDsCreate} {
		d.Policy = config.Policy{CRDs: p}
		if _, err := m.Upgrade(ctx, d); err == nil || !strings.Contains(err.Error(), "in progress") {
			t.Errorf("upgrade of a pending release with crds %q: %v; want an operation in progress", p, err)
		}
		noCRD(fmt.Sprintf("upgrade of a pending release with crds %q", p))
	}
}
