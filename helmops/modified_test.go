package helmops

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/release/common"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
)

func TestRecordWritten(t *testing.T) {
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   int64 // 0: unknown
	}{
		{"modified after created", map[string]string{"createdAt": "100", "modifiedAt": "200"}, 200},
		{"inherited older modifiedAt", map[string]string{"createdAt": "300", "modifiedAt": "200"}, 300},
		{"created only", map[string]string{"createdAt": "100"}, 100},
		{"modified only", map[string]string{"modifiedAt": "200"}, 200},
		{"garbage modifiedAt", map[string]string{"createdAt": "100", "modifiedAt": "soon"}, 100},
		{"neither", map[string]string{"name": "x"}, 0},
		{"garbage only", map[string]string{"createdAt": "-5", "modifiedAt": ""}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := recordWritten(tc.labels)
			if tc.want == 0 {
				if !got.IsZero() {
					t.Errorf("recordWritten = %v; want zero (unknown)", got)
				}
				return
			}
			if got.Unix() != tc.want {
				t.Errorf("recordWritten = %v; want %d", got, tc.want)
			}
		})
	}
}

func TestLastWrite(t *testing.T) {
	at := func(sec int64) *metav1.Time { v := metav1.Unix(sec, 0); return &v }
	meta := metav1.ObjectMeta{
		CreationTimestamp: *at(100),
		ManagedFields: []metav1.ManagedFieldsEntry{
			{Manager: "helm", Operation: metav1.ManagedFieldsOperationUpdate, Time: at(300)},
			{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationUpdate, Time: at(200)},
			{Manager: "old", Operation: metav1.ManagedFieldsOperationUpdate},
		},
	}
	if got := lastWrite(meta); got.Unix() != 300 {
		t.Errorf("lastWrite = %d, want the newest managedFields time 300", got.Unix())
	}
	meta.ManagedFields = nil
	if got := lastWrite(meta); got.Unix() != 100 {
		t.Errorf("lastWrite without managedFields = %d, want creationTimestamp 100", got.Unix())
	}
}

// recordRequests sits between a Manager and the API server: it counts GETs of
// single release records and refuses the requests refuse names, the way a
// process killed at that point would never have sent them.
type recordRequests struct {
	next   http.RoundTripper
	refuse func(*http.Request) bool
	// why is added to the refusal's message.
	why string

	mu   sync.Mutex
	gets int
}

func (rr *recordRequests) RoundTrip(req *http.Request) (*http.Response, error) {
	isRecord := strings.Contains(req.URL.Path, "/sh.helm.release.v1.")
	if isRecord && req.Method == http.MethodGet {
		rr.mu.Lock()
		rr.gets++
		rr.mu.Unlock()
	}
	if isRecord && rr.refuse != nil && rr.refuse(req) {
		return nil, fmt.Errorf("test refuses %s %s%s", req.Method, req.URL.Path, rr.why)
	}
	return rr.next.RoundTrip(req)
}

func (rr *recordRequests) recordGets() int {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	return rr.gets
}

func managerThrough(t *testing.T, driver string, rr *recordRequests) *Manager {
	t.Helper()
	cfg := rest.CopyConfig(cluster.Config)
	cfg.WrapTransport = func(next http.RoundTripper) http.RoundTripper { rr.next = next; return rr }
	m, err := New(withClients(t, Options{RESTConfig: cfg, StorageDriver: driver, Timeout: time.Minute, MaxHistory: 5}))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// record reads and edits the storage record of one release revision as a
// person with kubectl would.
type record struct {
	t         *testing.T
	driver    string
	namespace string
	key       string
}

func newRecord(t *testing.T, driver, namespace, name string, revision int) record {
	return record{t: t, driver: driver, namespace: namespace, key: fmt.Sprintf("sh.helm.release.v1.%s.v%d", name, revision)}
}

func (r record) meta() metav1.ObjectMeta {
	r.t.Helper()
	ctx := context.Background()
	if r.driver == DriverConfigMap {
		cm, err := cluster.Client.CoreV1().ConfigMaps(r.namespace).Get(ctx, r.key, metav1.GetOptions{})
		if err != nil {
			r.t.Fatal(err)
		}
		return cm.ObjectMeta
	}
	s, err := cluster.Client.CoreV1().Secrets(r.namespace).Get(ctx, r.key, metav1.GetOptions{})
	if err != nil {
		r.t.Fatal(err)
	}
	return s.ObjectMeta
}

// setLabels sets the record's labels; "" removes one.
func (r record) setLabels(labels map[string]string) {
	r.t.Helper()
	l := map[string]interface{}{}
	for k, v := range labels {
		if v == "" {
			l[k] = nil
		} else {
			l[k] = v
		}
	}
	patch := fmt.Sprintf(`{"metadata":{"labels":%s}}`, mustJSON(r.t, l))
	ctx := context.Background()
	var err error
	if r.driver == DriverConfigMap {
		_, err = cluster.Client.CoreV1().ConfigMaps(r.namespace).Patch(ctx, r.key, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	} else {
		_, err = cluster.Client.CoreV1().Secrets(r.namespace).Patch(ctx, r.key, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	}
	if err != nil {
		r.t.Fatal(err)
	}
}

// labelTime is the unix time in one of the record's labels.
func (r record) labelTime(label string) int64 {
	r.t.Helper()
	v, err := strconv.ParseInt(r.meta().Labels[label], 10, 64)
	if err != nil {
		r.t.Fatalf("record %s label %s: %v", r.key, label, err)
	}
	return v
}

// longAgo stands for a release deployed long before the test: a time no
// operation of the test can write.
const longAgo = "1000000000"

// TestModified: Release.Modified is when the latest record was last written,
// from the labels the real drivers write, else the record's
// creationTimestamp, else unknown (zero); and the interrupted operations that
// an unlock must judge (an upgrade, an uninstall) are not mistaken for old.
func TestModified(t *testing.T) {
	for _, driver := range []string{DriverSecret, DriverConfigMap} {
		t.Run(driver, func(t *testing.T) {
			ctx := context.Background()
			ns := cluster.Namespace(t)
			rr := &recordRequests{}
			m := managerThrough(t, driver, rr)
			if _, err := m.Install(ctx, desired(t, ns, "m", "charts/hello", nil)); err != nil {
				t.Fatal(err)
			}
			rec := newRecord(t, driver, ns, "m", 1)
			modified := func() time.Time {
				t.Helper()
				r, err := m.Lookup(ctx, ns, "m")
				if err != nil || r == nil {
					t.Fatalf("Lookup = %v, %v", r, err)
				}
				return r.Modified
			}

			// As the driver left it: created, then updated to deployed (the
			// update rewrites the labels from the release and drops createdAt).
			if got := modified().Unix(); got != rec.labelTime("modifiedAt") {
				t.Errorf("Modified = %d, record labels %v", got, rec.meta().Labels)
			}
			for _, tc := range []struct {
				name   string
				labels map[string]string
				want   int64
			}{
				{"modified after created", map[string]string{"createdAt": "1000000000", "modifiedAt": "1500000000"}, 1500000000},
				{"created only", map[string]string{"createdAt": "1200000000", "modifiedAt": ""}, 1200000000},
				{"older modifiedAt", map[string]string{"createdAt": "1300000000", "modifiedAt": "1100000000"}, 1300000000},
			} {
				rec.setLabels(tc.labels)
				if got := modified().Unix(); got != tc.want {
					t.Errorf("%s: Modified = %d, want %d", tc.name, got, tc.want)
				}
			}
			if rr.recordGets() != 0 {
				t.Errorf("%d GETs of release records while their labels were there", rr.recordGets())
			}

			rec.setLabels(map[string]string{"createdAt": "", "modifiedAt": ""})
			if got, want := modified(), lastWrite(rec.meta()); !got.Equal(want) || got.IsZero() {
				t.Errorf("labels stripped: Modified = %v, want the record's last write %v", got, want)
			}
			if rr.recordGets() != 1 {
				t.Errorf("labels stripped: %d GETs of the record, want 1", rr.recordGets())
			}
			rr.refuse = isMethod(http.MethodGet)
			if got := modified(); !got.IsZero() {
				t.Errorf("labels stripped and record unreadable: Modified = %v, want zero (unknown)", got)
			}
			rr.refuse = nil

			// An upgrade whose process died after it created the pending
			// record: Helm copied the deployed record's labels, an old
			// modifiedAt among them, into the record it created.
			rec.setLabels(map[string]string{"modifiedAt": longAgo})
			rr.refuse = isMethod(http.MethodPut)
			_, _ = m.Upgrade(ctx, desired(t, ns, "m", "charts/hello", map[string]interface{}{"greeting": "v2"}))
			rr.refuse = nil
			pending := newRecord(t, driver, ns, "m", 2)
			r, err := m.Lookup(ctx, ns, "m")
			if err != nil || r.Status != common.StatusPendingUpgrade {
				t.Fatalf("want a release left pending-upgrade: %+v, %v", r, err)
			}
			if got := pending.meta().Labels["modifiedAt"]; got != longAgo {
				t.Logf("Helm no longer copies modifiedAt into the record it creates: %q", got)
			}
			if want := later(time.Unix(pending.labelTime("createdAt"), 0), lastWrite(pending.meta())); !r.Modified.Equal(want) {
				t.Errorf("pending upgrade: Modified = %v, want %v (labels %v)", r.Modified, want, pending.meta().Labels)
			}

			// An uninstall in progress: its status update is a fresh write,
			// although the driver left the older modifiedAt on the record.
			if err := m.Rollback(ctx, ns, "m", 0, 1, nil); err != nil {
				t.Fatal(err)
			}
			last := newRecord(t, driver, ns, "m", 3)
			last.setLabels(map[string]string{"createdAt": longAgo, "modifiedAt": longAgo})
			rr.refuse = isMethod(http.MethodDelete)
			if err := m.Uninstall(ctx, ns, "m", 0, nil); err == nil {
				t.Fatal("uninstall must fail when its record deletes are refused")
			}
			rr.refuse = nil
			r, err = m.Lookup(ctx, ns, "m")
			if err != nil || r.Status != common.StatusUninstalling {
				t.Fatalf("want a release left uninstalling: %+v, %v", r, err)
			}
			if got := last.meta().Labels["modifiedAt"]; got != longAgo {
				t.Logf("Helm's update now keeps its own modifiedAt: %q", got)
			}
			if want := lastWrite(last.meta()); !r.Modified.Equal(want) || r.Modified.Unix() <= 1000000000 {
				t.Errorf("uninstalling: Modified = %v, want the record's last write %v", r.Modified, want)
			}
			rr.refuse = isMethod(http.MethodGet)
			if rels, err := m.ManagedReleases(ctx, []string{ns}); err != nil || len(rels) != 1 || !rels[0].Modified.IsZero() {
				t.Errorf("uninstalling, record metadata unreadable: %d releases, %v; want one with Modified zero, not the stale labels' time", len(rels), err)
				for _, r := range rels {
					t.Logf("Modified = %v", r.Modified)
				}
			}
			rr.refuse = nil
		})
	}
}

func isMethod(method string) func(*http.Request) bool {
	return func(req *http.Request) bool { return req.Method == method }
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func mustJSON(t *testing.T, v interface{}) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
