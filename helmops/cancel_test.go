package helmops

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/internal/format"
	"github.com/autox-dev/autox/internal/testenv"
)

// waitUntil polls cond until it holds. The bound only ends a test that
// would otherwise hang; it decides nothing.
func waitUntil(t *testing.T, what string, cond func() (bool, error)) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 2*time.Minute, true,
		func(context.Context) (bool, error) { return cond() })
	if err != nil {
		t.Fatalf("waiting until %s: %v", what, err)
	}
}

// TestNoWriteAfterCancel: Install, Upgrade and Reinstall with a context
// already cancelled say what they did not start and write nothing: Helm's
// RunWithContext would write a pending record before looking at it.
func TestNoWriteAfterCancel(t *testing.T) {
	m := newManager(t, DriverSecret)
	ns := cluster.Namespace(t)
	if _, err := m.Install(context.Background(), desired(t, ns, "r", "charts/hello", nil)); err != nil {
		t.Fatal(err)
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	changed := desired(t, ns, "r", "charts/hello", map[string]interface{}{"greeting": "changed"})
	for _, tc := range []struct {
		operation, release string
		run                func() (int, error)
	}{
		{"install", "new", func() (int, error) { return m.Install(cancelled, desired(t, ns, "new", "charts/hello", nil)) }},
		{"upgrade", "r", func() (int, error) { return m.Upgrade(cancelled, changed) }},
		{"reinstall", "r", func() (int, error) { return m.Reinstall(cancelled, changed) }},
	} {
		t.Run(tc.operation, func(t *testing.T) {
			before := releaseRecords(t, ns, tc.release)
			_, err := tc.run()
			want := fmt.Sprintf("%s of release %s/%s not started: ", tc.operation, ns, tc.release)
			if !errors.Is(err, context.Canceled) || err == nil || !strings.HasPrefix(err.Error(), want) {
				t.Errorf("error = %v; want context.Canceled, saying %q", err, want)
			}
			if after := releaseRecords(t, ns, tc.release); strings.Join(after, ",") != strings.Join(before, ",") {
				t.Errorf("release records written: %v, before %v", after, before)
			}
		})
	}
	if cm, err := cluster.Client.CoreV1().ConfigMaps(ns).Get(context.Background(), "r", metav1.GetOptions{}); err != nil || cm.Data["greeting"] != "hello" {
		t.Errorf("the release's object changed: %v, %v", cm.Data, err)
	}
}

// completeJob does what the Job controller, absent from the test control
// plane, would do when a Job's pod succeeds.
func completeJob(t *testing.T, ns, name string) {
	t.Helper()
	ctx := context.Background()
	job, err := cluster.Client.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	job.Status = batchv1.JobStatus{
		StartTime: &now, CompletionTime: &now, Succeeded: 1,
		Conditions: []batchv1.JobCondition{
			{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: now},
		},
	}
	if _, err := cluster.Client.BatchV1().Jobs(ns).UpdateStatus(ctx, job, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestUninstallAndRollbackReturnOnCancel: Helm's uninstall and rollback take
// no context and wait on a hook Job (here one no controller runs) up to the
// Helm timeout; cancelled after the hook started, Uninstall and Rollback
// return the context's error at once, and the operation goes on in the
// background: once the test completes the Job, it finishes.
func TestUninstallAndRollbackReturnOnCancel(t *testing.T) {
	m := newManager(t, DriverSecret)
	for _, tc := range []struct {
		operation string
		upgrades  int
		run       func(ctx context.Context, ns string) error
		after     func(r *format.Release) bool // what the background operation leaves
	}{
		{"uninstall", 0, func(ctx context.Context, ns string) error { return m.Uninstall(ctx, ns, "r", 0, nil) },
			func(r *format.Release) bool { return r == nil }},
		{"rollback", 1, func(ctx context.Context, ns string) error { return m.Rollback(ctx, ns, "r", 0, 1, nil) },
			func(r *format.Release) bool {
				return r != nil && r.Revision == 3 && r.Status == "deployed" && r.Values["count"] == "1"
			}},
	} {
		t.Run(tc.operation, func(t *testing.T) {
			ns := cluster.Namespace(t)
			if _, err := m.Install(context.Background(), desired(t, ns, "r", "charts/hold", map[string]interface{}{"count": "1"})); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < tc.upgrades; i++ {
				if _, err := m.Upgrade(context.Background(), desired(t, ns, "r", "charts/hold", map[string]interface{}{"count": "2"})); err != nil {
					t.Fatal(err)
				}
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			result := make(chan error, 1)
			go func() { result <- tc.run(ctx, ns) }()
			waitUntil(t, "the hook Job exists", func() (bool, error) {
				_, err := cluster.Client.BatchV1().Jobs(ns).Get(context.Background(), "r-hold", metav1.GetOptions{})
				return err == nil, testenv.IgnoreNotFound(err)
			})
			cancel()
			err := <-result
			want := fmt.Sprintf("%s of release %s/r", tc.operation, ns)
			if !errors.Is(err, context.Canceled) || !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), "goes on in the background") {
				t.Fatalf("error = %v; want context.Canceled, saying %q goes on in the background", err, want)
			}

			completeJob(t, ns, "r-hold")
			m.background.Wait()
			r, err := m.Lookup(context.Background(), ns, "r")
			if err != nil || !tc.after(r) {
				t.Errorf("after the background %s: %+v, %v", tc.operation, r, err)
			}
		})
	}
}

// TestReinstallPair: the old release's ConfigMap is held by a finalizer for
// a while after the uninstall deleted it. Reinstall waits until it is gone
// before it installs, so the new release has a ConfigMap of its own (an
// install at once would fail on, or adopt, the object being deleted, which
// then goes). A context cancelled meanwhile cuts the pair at once — no early
// return may leave Helm working beside the next reconcile — and nothing is
// installed after it.
func TestReinstallPair(t *testing.T) {
	m := newManager(t, DriverSecret)
	for _, tc := range []struct {
		name   string
		cancel bool
	}{{"not cancelled", false}, {"cancelled during the uninstall's wait", true}} {
		t.Run(tc.name, func(t *testing.T) {
			bg := context.Background()
			ns := cluster.Namespace(t)
			cms := cluster.Client.CoreV1().ConfigMaps(ns)
			if _, err := m.Install(bg, desired(t, ns, "r", "charts/finalizer", map[string]interface{}{"count": "1"})); err != nil {
				t.Fatal(err)
			}
			old, err := cms.Get(bg, "r", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			release := func(uid types.UID) {
				t.Helper()
				patch := fmt.Sprintf(`{"metadata":{"uid":%q,"finalizers":null}}`, uid)
				if _, err := cms.Patch(bg, "r", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
					t.Fatalf("removing the finalizer of ConfigMap r (uid %s): %v", uid, err)
				}
			}

			ctx, cancel := context.WithCancel(bg)
			defer cancel()
			type result struct {
				rev int
				err error
			}
			done := make(chan result, 1)
			go func() {
				rev, err := m.Reinstall(ctx, desired(t, ns, "r", "charts/finalizer", map[string]interface{}{"count": "2"}))
				done <- result{rev, err}
			}()
			waitUntil(t, "the uninstall deleted the old ConfigMap", func() (bool, error) {
				cm, err := cms.Get(bg, "r", metav1.GetOptions{})
				return err == nil && cm.UID == old.UID && cm.DeletionTimestamp != nil, err
			})
			if tc.cancel {
				cancel()
			}
			release(old.UID)
			res := <-done
			m.background.Wait()
			if tc.cancel {
				// Cut: the caller cancels only past the shutdown timeout or
				// with a fenced term. Reinstall returned while the uninstall
				// went on, and installed nothing after it.
				if !errors.Is(res.err, context.Canceled) {
					t.Fatalf("Reinstall cancelled during its uninstall = %d, %v; want a context error", res.rev, res.err)
				}
				if r, err := m.Lookup(bg, ns, "r"); err != nil || r != nil {
					t.Fatalf("a cancelled Reinstall installed after its uninstall: %+v, %v", r, err)
				}
				return
			}
			if res.err != nil || res.rev != 1 {
				t.Fatalf("Reinstall = %d, %v", res.rev, res.err)
			}
			cm, err := cms.Get(bg, "r", metav1.GetOptions{})
			if err != nil || cm.UID == old.UID || cm.DeletionTimestamp != nil || cm.Data["count"] != "2" {
				t.Fatalf("the new release's ConfigMap: %v (old uid %s), %v", cm, old.UID, err)
			}
			defer release(cm.UID)
			if r, err := m.Lookup(bg, ns, "r"); err != nil || r == nil || r.Revision != 1 || r.Status != "deployed" || r.Values["count"] != "2" {
				t.Errorf("after Reinstall: %+v, %v", r, err)
			}
		})
	}
}

// TestUninstallMovedWaitsForObjects: the uninstall of a release a rename
// moves returns only once its objects are gone, so that the replacement,
// which makes an object of the same name, installs instead of failing on
// the old one a finalizer still holds.
func TestUninstallMovedWaitsForObjects(t *testing.T) {
	bg := context.Background()
	m := newManager(t, DriverSecret)
	ns := cluster.Namespace(t)
	cms := cluster.Client.CoreV1().ConfigMaps(ns)
	values := map[string]interface{}{"name": "shared"}
	if _, err := m.Install(bg, desired(t, ns, "old", "charts/finalizer", values)); err != nil {
		t.Fatal(err)
	}
	held, err := cms.Get(bg, "shared", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var left error // the Get of the object as the uninstall returned
	done := make(chan error, 1)
	go func() {
		err := m.UninstallMoved(bg, ns, "old", 1, nil, config.Policy{Timeout: 2 * time.Minute})
		_, left = cms.Get(bg, "shared", metav1.GetOptions{})
		done <- err
	}()
	waitUntil(t, "the uninstall deleted the old ConfigMap", func() (bool, error) {
		cm, err := cms.Get(bg, "shared", metav1.GetOptions{})
		return err == nil && cm.UID == held.UID && cm.DeletionTimestamp != nil, err
	})
	select {
	case err := <-done:
		t.Fatalf("UninstallMoved returned (%v) while a finalizer held its ConfigMap", err)
	default:
	}
	patch := fmt.Sprintf(`{"metadata":{"uid":%q,"finalizers":null}}`, held.UID)
	if _, err := cms.Patch(bg, "shared", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := testenv.Receive(t, "the uninstall returned", done); err != nil || !apierrors.IsNotFound(left) {
		t.Fatalf("UninstallMoved = %v; the ConfigMap as it returned: %v, want gone", err, left)
	}
	if _, err := m.Install(bg, desired(t, ns, "new", "charts/finalizer", values)); err != nil {
		t.Fatalf("the replacement's install: %v", err)
	}
	cm, err := cms.Get(bg, "shared", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = cms.Patch(bg, "shared", types.MergePatchType, []byte(fmt.Sprintf(`{"metadata":{"uid":%q,"finalizers":null}}`, cm.UID)), metav1.PatchOptions{})
	})
}
