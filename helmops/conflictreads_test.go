package helmops

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
)

// configMapReads counts the requests for the ConfigMaps of one namespace:
// GETs of one object and LISTs.
type configMapReads struct {
	next      http.RoundTripper
	namespace string
	mu        sync.Mutex
	gets      map[string]int
	lists     int
}

func (c *configMapReads) RoundTrip(req *http.Request) (*http.Response, error) {
	prefix := "/api/v1/namespaces/" + c.namespace + "/configmaps"
	if req.Method == http.MethodGet && strings.HasPrefix(req.URL.Path, prefix) && req.URL.Query().Get("watch") != "true" {
		c.mu.Lock()
		if name := strings.TrimPrefix(strings.TrimPrefix(req.URL.Path, prefix), "/"); name != "" {
			c.gets[name]++
		} else {
			c.lists++
		}
		c.mu.Unlock()
	}
	return c.next.RoundTrip(req)
}

func (c *configMapReads) counts() (gets, lists int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range c.gets {
		gets += n
	}
	return gets, c.lists
}

func (c *configMapReads) getsOf(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gets[name]
}

// countedManager is a Manager whose ConfigMap reads in ns are counted.
func countedManager(t *testing.T, ns string) (*Manager, *configMapReads) {
	t.Helper()
	counter := &configMapReads{namespace: ns, gets: map[string]int{}}
	cfg := rest.CopyConfig(cluster.Config)
	cfg.WrapTransport = func(next http.RoundTripper) http.RoundTripper { counter.next = next; return counter }
	m, err := New(withClients(t, Options{RESTConfig: cfg, StorageDriver: DriverSecret, Timeout: time.Minute, MaxHistory: 3, Log: zerolog.Nop()}))
	if err != nil {
		t.Fatal(err)
	}
	return m, counter
}

// installMany installs releases prefix-0 … prefix-(n-1) of the chart "one"
// (one ConfigMap named as the release).
func installMany(t *testing.T, m *Manager, ns, prefix string, n int) {
	t.Helper()
	for i := range n {
		if _, err := m.Install(context.Background(), desired(t, ns, fmt.Sprintf("%s-%d", prefix, i), "charts/one", nil)); err != nil {
			t.Fatal(err)
		}
	}
}

// Many installs of one resource and namespace: once enough asked, one LIST
// answers Helm's conflict reads of the objects it shows absent.
func TestConflictReadsFromOneList(t *testing.T) {
	ns := cluster.Namespace(t)
	m, reads := countedManager(t, ns)
	n := 2 * conflictListDemand
	installMany(t, m, ns, "many", n)
	gets, lists := reads.counts()
	t.Logf("%d installs: %d GETs and %d LISTs of ConfigMaps", n, gets, lists)
	if lists < 1 {
		t.Fatalf("no LIST of ConfigMaps after %d installs", n)
	}
	// Every install read until one LIST was made; the installs after it
	// (within its 10 s) read nothing. Each install's wait may read too,
	// but the chart waits for hooks only.
	if gets > conflictListDemand+lists*conflictListDemand {
		t.Errorf("%d GETs of ConfigMaps for %d installs and %d LISTs: the LIST answered none", gets, n, lists)
	}
	for i := range n {
		if _, err := cluster.Client.CoreV1().ConfigMaps(ns).Get(context.Background(), fmt.Sprintf("many-%d", i), metav1.GetOptions{}); err != nil {
			t.Fatalf("install %d made no object: %v", i, err)
		}
	}
}

// Two Managers (two shard terms of a replica) sharing their conflict
// LISTs: the installs of both count toward one demand, one LIST made with
// the shared client answers both, and neither term LISTs by itself.
func TestConflictReadsShared(t *testing.T) {
	ns := cluster.Namespace(t)
	a, readsA := countedManager(t, ns)
	b, readsB := countedManager(t, ns)
	own, ownReads := countedManager(t, ns) // the replica's own client
	shared := NewSharedConflictReads(own.meta)
	if err := a.UseConflictReads(shared); err != nil {
		t.Fatal(err)
	}
	if err := b.UseConflictReads(shared); err != nil {
		t.Fatal(err)
	}
	n := conflictListDemand // each term alone would ask half the demand
	for i := range 2 * n {
		m := a
		if i%2 == 1 {
			m = b
		}
		if _, err := m.Install(context.Background(), desired(t, ns, fmt.Sprintf("shared-%d", i), "charts/one", nil)); err != nil {
			t.Fatal(err)
		}
	}
	getsA, listsA := readsA.counts()
	getsB, listsB := readsB.counts()
	_, lists := ownReads.counts()
	t.Logf("%d installs over two terms: %d + %d GETs, %d + %d LISTs of their own, %d shared LISTs", 2*n, getsA, getsB, listsA, listsB, lists)
	if listsA+listsB != 0 || lists < 1 {
		t.Fatalf("LISTs by the terms' clients %d + %d, by the shared one %d: want 0 + 0 and at least one", listsA, listsB, lists)
	}
	// Unshared, each term would have read every one of its objects (its
	// demand reached conflictListDemand only at its last install).
	if gets := getsA + getsB; gets > conflictListDemand+lists*conflictListDemand || gets >= 2*n {
		t.Errorf("%d GETs of ConfigMaps for %d installs and %d shared LISTs: the LIST answered none", gets, 2*n, lists)
	}
}

// A LIST answers only for what it proves absent: an object made after it
// by another release is refused by the API server (the install fails, the
// object stays as it was, and the failed release's uninstall leaves it),
// and an object of the release itself that the LIST shows (kept by a
// resource policy) is read by Helm and adopted as before.
func TestConflictReadsKeepHelmsCheck(t *testing.T) {
	ctx := context.Background()
	ns := cluster.Namespace(t)
	m, reads := countedManager(t, ns)
	cms := cluster.Client.CoreV1().ConfigMaps(ns)

	if _, err := cms.Create(ctx, helmOwned(ns, "kept", "kept"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	installMany(t, m, ns, "warm", conflictListDemand) // the last one lists
	if _, lists := reads.counts(); lists != 1 {
		t.Fatalf("%d LISTs after %d installs, want 1", lists, conflictListDemand)
	}

	// Made after the LIST, by another release: the LIST says "absent".
	made, err := cms.Create(ctx, helmOwned(ns, "theirs", "other"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = m.Install(ctx, desired(t, ns, "theirs", "charts/one", nil))
	if reads.getsOf("theirs") != 0 {
		t.Fatal("Helm read the object the LIST showed absent: the LIST answered nothing")
	}
	if err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("install over an object made after the LIST: %v, want the API server's AlreadyExists", err)
	}
	if err := m.Uninstall(ctx, ns, "theirs", 0, nil); err != nil {
		t.Fatalf("uninstalling the failed release: %v", err)
	}
	after, err := cms.Get(ctx, "theirs", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the other release's object is gone after the failed release's uninstall: %v", err)
	}
	if after.ResourceVersion != made.ResourceVersion || after.Data["owner"] != "other" {
		t.Errorf("the other release's object was changed: %v", after.Data)
	}

	// In the LIST, with this release's owner marks: Helm reads and adopts it.
	if _, err := m.Install(ctx, desired(t, ns, "kept", "charts/one", nil)); err != nil {
		t.Fatalf("install adopting its kept object: %v", err)
	}
	if reads.getsOf("kept") == 0 {
		t.Error("Helm did not read the object the LIST showed")
	}
	if _, err := cms.Get(ctx, "kept", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
}

// A LIST that fails answers nothing: Helm reads as before, and the LIST is
// not tried again by every install.
func TestConflictListDecisions(t *testing.T) {
	now := time.Unix(1000, 0)
	listed := 0
	fail := true
	c := &conflictLists{lists: map[conflictKey]*conflictList{}, asked: map[conflictKey]*demand{},
		now: func() time.Time { return now },
		listFn: func(context.Context, conflictKey) (map[string]struct{}, error) {
			listed++
			if fail {
				return nil, apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "", fmt.Errorf("no"))
			}
			return map[string]struct{}{"there": {}}, nil
		}}
	k := conflictKey{namespace: "ns"}
	for i := range conflictListDemand - 1 {
		if c.absent(k, fmt.Sprint("a", i)) || listed != 0 {
			t.Fatal("answered or listed below the demand")
		}
	}
	if c.absent(k, "x") || listed != 1 {
		t.Fatalf("the failed LIST answered, or was not made (%d)", listed)
	}
	for i := range 3 * conflictListDemand {
		if c.absent(k, fmt.Sprint("b", i)) {
			t.Fatal("answered after a failed LIST")
		}
	}
	if listed != 1 {
		t.Fatalf("%d LISTs within a window after one failed, want 1", listed)
	}
	now = now.Add(conflictListMaxAge)
	fail = false
	for i := range conflictListDemand - 1 {
		c.absent(k, fmt.Sprint("c", i))
	}
	if !c.absent(k, "missing") || listed != 2 {
		t.Fatalf("a LIST that showed no %q did not answer (%d LISTs)", "missing", listed)
	}
	if c.absent(k, "there") {
		t.Error("an object the LIST showed was answered absent")
	}
	now = now.Add(conflictListMaxAge - time.Millisecond)
	if !c.absent(k, "other") {
		t.Error("a LIST younger than its bound did not answer")
	}
	now = now.Add(time.Millisecond)
	if c.absent(k, "other") {
		t.Error("a LIST as old as its bound answered")
	}
}

// One object of the release itself in the LIST (kept) makes Helm read
// every object and adopt by updating them all: an object another release
// made after the LIST is then found by Helm's own read and refused with
// nothing written, never patched into this release.
func TestConflictReadsAllOrNone(t *testing.T) {
	ctx := context.Background()
	ns := cluster.Namespace(t)
	m, reads := countedManager(t, ns)
	cms := cluster.Client.CoreV1().ConfigMaps(ns)
	if _, err := cms.Create(ctx, helmOwned(ns, "kept", "kept"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	installMany(t, m, ns, "warm", conflictListDemand)
	if _, lists := reads.counts(); lists != 1 {
		t.Fatalf("%d LISTs after %d installs, want 1", lists, conflictListDemand)
	}
	made, err := cms.Create(ctx, helmOwned(ns, "shared", "other"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = m.Install(ctx, desired(t, ns, "kept", "charts/twoshared", nil)) // kept and shared
	if err == nil || !WroteNothing(err) {
		t.Fatalf("install over another release's object: %v (wrote nothing: %v), want Helm's refusal before any write", err, WroteNothing(err))
	}
	if reads.getsOf("shared") == 0 {
		t.Error("Helm did not read the object the LIST showed absent, though it read another of the install")
	}
	after, err := cms.Get(ctx, "shared", metav1.GetOptions{})
	if err != nil || after.ResourceVersion != made.ResourceVersion {
		t.Fatalf("the other release's object was changed or removed: %v %v", after, err)
	}
}

// An install with a pre-install hook reads as Helm does: its hooks run
// after the pending record, so a LIST's answer could let them run before
// an object made since fails the install.
func TestConflictReadsNotForHooks(t *testing.T) {
	ctx := context.Background()
	ns := cluster.Namespace(t)
	m, reads := countedManager(t, ns)
	installMany(t, m, ns, "warm", conflictListDemand)
	theirs := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "shared2", Namespace: ns}, Data: map[string]string{"owner": "user"}}
	if _, err := cluster.Client.CoreV1().ConfigMaps(ns).Create(ctx, theirs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err := m.Install(ctx, desired(t, ns, "ph", "charts/prehook", nil))
	if err == nil || !WroteNothing(err) {
		t.Fatalf("install with a hook over a user's object: %v (wrote nothing: %v), want Helm's refusal before any write", err, WroteNothing(err))
	}
	if reads.getsOf("shared2") == 0 {
		t.Error("an install with hooks did not read its objects")
	}
	if _, err := cluster.Client.CoreV1().ConfigMaps(ns).Get(ctx, "ph-hook", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the pre-install hook ran: %v", err)
	}
}

// helmOwned is a ConfigMap carrying Helm's owner marks of release (and
// data naming it).
func helmOwned(ns, name, release string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns,
		Labels:      map[string]string{"app.kubernetes.io/managed-by": "Helm"},
		Annotations: map[string]string{"meta.helm.sh/release-name": release, "meta.helm.sh/release-namespace": ns}},
		Data: map[string]string{"owner": release}}
}
