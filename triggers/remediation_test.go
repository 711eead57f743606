package triggers

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/autox-dev/autox/helmops"
	"github.com/autox-dev/autox/internal/format"
	"github.com/autox-dev/autox/internal/testenv"
	"github.com/autox-dev/autox/triggers/attempts"
)

// attemptsOf returns the failed attempts recorded for release in the
// harness's namespace, nil when none are.
func (h *harness) attemptsOf(release string) *attempts.Entry {
	h.t.Helper()
	recs, err := attempts.Store{Client: cluster.Client, Instance: format.DefaultInstance, Home: h.homeNS()}.Read(context.Background(), h.NS)
	if err != nil {
		h.t.Fatal(err)
	}
	if e, ok := recs[release]; ok {
		return &e
	}
	return nil
}

// helloRules are what the hello chart needs of an account in its namespace.
var helloRules = []rbacv1.PolicyRule{testenv.HelmRecords, testenv.Manage("", "configmaps", "services", "serviceaccounts")}

// TestOnlyRealAttemptsCount: a release spec with retries: 1 and onFailure:
// rollback whose service account does not exist yet fails reconcile after
// reconcile, writing nothing; none of those is an attempt of the release.
// Once the account exists the release installs: no retries used up, no
// remedy.
func TestOnlyRealAttemptsCount(t *testing.T) {
	h := newHarness(t)
	h.Deployment("web", v("1"))
	h.start(h.config(webSpec(`      hello:
        chart: {path: {{.Charts}}/hello}
        serviceAccountName: deployer
        remediation: {retries: 1, onFailure: rollback}
`)), time.Hour)
	testenv.Eventually(t, patience, "3 reconciles of spec web", func() (bool, error) {
		return finishedReconciles(h.metrics, "web") >= 3, nil
	})
	if e := h.attemptsOf("web-hello"); e != nil {
		t.Errorf("failures without a write were recorded as attempts: %+v", *e)
	}
	cluster.ServiceAccount(t, h.NS, "deployer", helloRules)
	h.WaitRelease("web-hello", "installed once its account exists", deployedAt(1))
	// The install's own attempt is recorded before its write and forgotten
	// once the install returns, a moment after its record shows deployed.
	var last *attempts.Entry
	testenv.Eventually(t, patience, "no attempt recorded once installed", func() (bool, error) {
		last = h.attemptsOf("web-hello")
		return last == nil, fmt.Errorf("recorded: %+v", last)
	})
}

// recordingSpy notes, at each install, the failures recorded for the
// release then: what a process killed during the install leaves.
type recordingSpy struct {
	Helm
	h    *harness
	mu   sync.Mutex
	seen []int
}

func (s *recordingSpy) Install(ctx context.Context, d helmops.Target) (int, error) {
	n := 0
	if e := s.h.attemptsOf(d.Name); e != nil {
		n = e.Failures
	}
	s.mu.Lock()
	s.seen = append(s.seen, n)
	s.mu.Unlock()
	return s.Helm.Install(ctx, d)
}

func (s *recordingSpy) Reinstall(ctx context.Context, d helmops.Target) (int, error) {
	n := 0
	if e := s.h.attemptsOf(d.Name); e != nil {
		n = e.Failures
	}
	s.mu.Lock()
	s.seen = append(s.seen, n)
	s.mu.Unlock()
	return s.Helm.Reinstall(ctx, d)
}

// TestAttemptRecordedBeforeItsWrite: each attempt of a release spec with
// bounded retries is recorded before its first Helm write, so that a
// process killed during it has counted it: at each install (then
// reinstall) the record already holds that attempt. Each attempt writes:
// the test control plane runs no Deployment controller, so a release that
// waits for its Deployment times out.
func TestAttemptRecordedBeforeItsWrite(t *testing.T) {
	h := newHarness(t)
	spy := &recordingSpy{h: h}
	h.spy = func(helm Helm) Helm { spy.Helm = helm; return spy }
	h.Deployment("web", v("1"))
	h.start(h.config(webSpec(`      bad:
        chart: {path: {{.Charts}}/ready}
        values: {deployment: true}
        wait: true
        timeout: 1s
        remediation: {retries: 2}
`)), time.Hour)
	testenv.Eventually(t, patience, "the retries of web-bad used up", func() (bool, error) {
		e := h.attemptsOf("web-bad")
		return e != nil && e.Failures == 3, nil
	})
	// In autox's own namespace, none in the release's (DESIGN §3).
	if _, err := cluster.Client.CoreV1().ConfigMaps(h.NS).Get(context.Background(), attempts.Name(format.DefaultInstance), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("remediation records in the release's namespace: %v, want none", err)
	}
	spy.mu.Lock()
	defer spy.mu.Unlock()
	if !slices.Equal(spy.seen, []int{1, 2, 3}) {
		t.Errorf("failures recorded at each install: %v, want [1 2 3] (each attempt recorded before it starts)", spy.seen)
	}
}

// TestRemedyRunsOncePerDesiredState: an upgrade that fails with retries: 0
// and onFailure: rollback is rolled back once; the rollback's hook never
// completes (the test control plane runs no Job controller), so the
// rollback fails. It is not run again at every backoff and pass, adding a
// failed revision and running the hook each time, nor recovered from the
// pending-rollback it leaves (the same rollback again): the release spec
// stays exhausted, with three revisions, until the config changes.
func TestRemedyRunsOncePerDesiredState(t *testing.T) {
	h := newHarness(t)
	h.Deployment("web", v("1"))
	cfg := func(chart string) string {
		return webSpec(`      app:
        chart: {path: {{.Charts}}/` + chart + `}
        timeout: 2s
        remediation: {retries: 0, onFailure: rollback}
`)
	}
	// The reconciler's clock: an hour on once the rollback was tried, so that
	// the release it leaves pending-rollback is stale at once.
	var later atomic.Bool
	h.now = func() time.Time {
		if later.Load() {
			return time.Now().Add(time.Hour)
		}
		return time.Now()
	}
	h.start(h.config(cfg("hold")), 300*time.Millisecond)
	h.WaitRelease("web-app", "installed", deployedAt(1))
	h.ctrl.Reconfigure(context.Background(), h.config(cfg("rejected")))
	testenv.Eventually(t, patience, "the rollback tried", func() (bool, error) {
		return len(h.revisions("web-app")) >= 3, nil
	})
	later.Store(true)
	from := finishedReconciles(h.metrics, "web")
	testenv.Eventually(t, patience, "5 more reconciles of spec web", func() (bool, error) {
		return finishedReconciles(h.metrics, "web") >= from+5, nil
	})
	if revs := h.revisions("web-app"); len(revs) != 3 {
		t.Errorf("revisions of web-app: %v, want 3 (deployed, the failed upgrade, the one failed rollback)", revs)
	}
	if e := h.attemptsOf("web-app"); e == nil || !e.Remedied || e.Failures != 1 {
		t.Errorf("record of web-app: %+v, want 1 failure, remedied", e)
	}
}

// revisions are the revision numbers of release's records, as stored.
func (h *harness) revisions(release string) []string {
	h.t.Helper()
	recs, err := cluster.Client.CoreV1().Secrets(h.NS).List(context.Background(), metav1.ListOptions{LabelSelector: "owner=helm,name=" + release})
	if err != nil {
		h.t.Fatal(err)
	}
	var out []string
	for _, r := range recs.Items {
		out = append(out, r.Labels["version"]+":"+r.Labels["status"])
	}
	slices.Sort(out)
	return out
}

// TestAttemptRecordsMoveHome: the records live in autox's own namespace,
// keyed by namespace and release; those an older version kept in a release
// namespace are read (a record at home wins) and removed with their
// release's record, so an upgrade forgets no attempt. Writers at once
// lose no key.
func TestAttemptRecordsMoveHome(t *testing.T) {
	ctx := context.Background()
	ns, home := cluster.Namespace(t), cluster.Namespace(t)
	store := attempts.Store{Client: cluster.Client, Instance: format.DefaultInstance, Home: home}
	old := attempts.Entry{Spec: "web", ReleaseSpec: "app", Fingerprint: "f", Failures: 3}
	text, _ := json.Marshal(old)
	legacy := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: attempts.Name(format.DefaultInstance), Namespace: ns,
		Labels: map[string]string{"app.kubernetes.io/managed-by": "autox", "app.kubernetes.io/instance": format.DefaultInstance}},
		Data: map[string]string{"web-app": string(text), "web-other": string(text)}}
	if _, err := cluster.Client.CoreV1().ConfigMaps(ns).Create(ctx, legacy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	recs, err := store.Read(ctx, ns)
	if err != nil || recs["web-app"] != old {
		t.Fatalf("Read of an older version's records: %v, %v", recs, err)
	}
	newer := old
	newer.Failures = 4
	if err := store.Record(ctx, ns, "web-other", newer); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := store.Record(ctx, ns, fmt.Sprintf("r%d", i), old); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if recs, err = store.Read(ctx, ns); err != nil || len(recs) != 14 || recs["web-other"] != newer {
		t.Fatalf("records after writers at once: %d of 14, web-other %+v, %v", len(recs), recs["web-other"], err)
	}
	if err := store.Forget(ctx, ns, "web-app"); err != nil {
		t.Fatal(err)
	}
	if err := store.Forget(ctx, ns, "web-other"); err != nil {
		t.Fatal(err)
	}
	if _, err := cluster.Client.CoreV1().ConfigMaps(ns).Get(ctx, legacy.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the older version's records after their releases were forgotten: %v, want gone", err)
	}
	if recs, err = store.Read(ctx, ns); err != nil || len(recs) != 12 {
		t.Errorf("records after forgetting two: %d, %v; want 12", len(recs), err)
	}
	home2, err := cluster.Client.CoreV1().ConfigMaps(home).Get(ctx, legacy.Name, metav1.GetOptions{})
	if err != nil || home2.Data[attempts.Key(ns, "r0")] == "" {
		t.Errorf("records in autox's namespace: %v, %v", home2, err)
	}
}
