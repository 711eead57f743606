package helmops

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/autox-dev/autox/internal/testenv"
)

// hookHold is a finalizer of the test's: it holds a deleted hook Job as a
// controller finishing its cleanup would.
const hookHold = "autox.dev/test-hold"

// TestHookRecreatedOnlyOnceGone: a pre-upgrade Job hook with the
// before-hook-creation delete policy runs on two upgrades in a row. Before
// the second creates it again, Helm deletes the first; that Job is held by
// a finalizer for a moment, and the upgrade waits until it is gone (as
// Helm 3 did) instead of failing to create the new one (AlreadyExists, as
// Helm 4's hookOnly waiter would, whose wait for deletions returns at once).
func TestHookRecreatedOnlyOnceGone(t *testing.T) {
	ctx := context.Background()
	m := newManager(t, DriverSecret)
	ns := cluster.Namespace(t)
	job := "h-wait"
	if _, err := m.Install(ctx, desired(t, ns, "h", "charts/hookupgrade", map[string]interface{}{"n": 1})); err != nil {
		t.Fatal(err)
	}

	upgrade := func(revision int, meanwhile func(done <-chan error)) {
		t.Helper()
		d := desired(t, ns, "h", "charts/hookupgrade", map[string]interface{}{"n": revision})
		d.Revision, d.Current = revision, revision-1
		done := make(chan error, 1)
		go func() {
			_, err := m.Upgrade(ctx, d)
			done <- err
		}()
		meanwhile(done)
		if err := testenv.Receive(t, "the upgrade returned", done); err != nil {
			t.Fatalf("upgrade to revision %d: %v", revision, err)
		}
	}
	// completeNew completes the hook Job once one other than old exists
	// (the test control plane runs no Job controller); its UID is returned.
	completeNew := func(done <-chan error, old types.UID) types.UID {
		t.Helper()
		var uid types.UID
		testenv.Eventually(t, 2*time.Minute, "a new hook Job", func() (bool, error) {
			select {
			case err := <-done:
				t.Fatalf("the upgrade returned before its hook ran: %v", err)
			default:
			}
			j, err := cluster.Client.BatchV1().Jobs(ns).Get(ctx, job, metav1.GetOptions{})
			if err != nil || j.UID == old || j.DeletionTimestamp != nil {
				return false, testenv.IgnoreNotFound(err)
			}
			uid = j.UID
			return true, nil
		})
		completeJob(t, ns, job)
		return uid
	}

	var first types.UID
	upgrade(2, func(done <-chan error) { first = completeNew(done, "") })

	// Hold the first Job: its deletion then waits for the finalizer.
	hold, _ := json.Marshal(map[string]interface{}{"metadata": map[string]interface{}{"finalizers": []string{hookHold}}})
	if _, err := cluster.Client.BatchV1().Jobs(ns).Patch(ctx, job, types.MergePatchType, hold, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	upgrade(3, func(done <-chan error) {
		testenv.Eventually(t, 2*time.Minute, "Helm deleting the first hook Job", func() (bool, error) {
			j, err := cluster.Client.BatchV1().Jobs(ns).Get(ctx, job, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			return j.DeletionTimestamp != nil, nil
		})
		// A moment in which the deleted Job is still there: Helm must not
		// try to create the new one meanwhile. Not a timing assertion: the
		// upgrade is only required not to fail.
		time.Sleep(3 * time.Second)
		select {
		case err := <-done:
			t.Fatalf("the upgrade ended while the deleted hook was held: %v", err)
		default:
		}
		release, _ := json.Marshal(map[string]interface{}{"metadata": map[string]interface{}{"finalizers": nil}})
		if _, err := cluster.Client.BatchV1().Jobs(ns).Patch(ctx, job, types.MergePatchType, release, metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		completeNew(done, first)
	})
	if r, err := m.Lookup(ctx, ns, "h"); err != nil || r.Revision != 3 {
		t.Fatalf("after two hooked upgrades: %+v, %v", r, err)
	}
}

// TestBlockScalarsKeepTheirNewlines pins a rendering difference between the
// majors (testdata/charts/blockscalar): a `|` block and a `|+` block that
// end a document followed by another keep the newlines YAML's chomping asks
// for under Helm 4, where Helm 3 dropped them; `|-` strips in both. So the
// first real upgrade after the switch to Helm 4 may patch such objects (the
// switch alone writes nothing: autox compares chart and values, never
// manifests). The `|+` block keeps every newline up to the separator, the
// one Helm's template aggregation adds included.
func TestBlockScalarsKeepTheirNewlines(t *testing.T) {
	ctx := context.Background()
	m := newManager(t, DriverSecret)
	ns := cluster.Namespace(t)
	if _, err := m.Install(ctx, desired(t, ns, "b", "charts/blockscalar", nil)); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"b-clip": "echo hi\n", "b-keep": "echo hi\n\n\n\n", "b-strip": "echo hi"} {
		cm, err := cluster.Client.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := cm.Data["script"]; got != want {
			t.Errorf("ConfigMap %s: script %q, want %q", name, got, want)
		}
	}
}
