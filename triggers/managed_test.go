package triggers

import (
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"
	"helm.sh/helm/v4/pkg/release/common"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/internal/format"
	"github.com/autox-dev/autox/internal/testenv"
	"github.com/autox-dev/autox/triggers/apply"
	"github.com/autox-dev/autox/triggers/plan"
)

// recordOf reads the record of instance in namespace home; nil when there is none.
func recordOf(t *testing.T, home, instance string) *corev1.ConfigMap {
	t.Helper()
	cm, err := cluster.Client.CoreV1().ConfigMaps(home).Get(context.Background(), ManagedSetName(instance), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return cm
}

func newManagedSet(client kubernetes.Interface, home, instance string, state *ConfigState) *ManagedSet {
	return NewManagedSet(ManagedSetOptions{Client: client.CoreV1(), Namespace: home, Instance: instance, State: state, Log: zerolog.Nop()})
}

// installsIn is the observation of spec s, wanted, whose release spec r-<ns>
// installs release r-<ns> in each of namespaces, and whose release spec
// "up" upgrades release up in namespace a.
func installsIn(namespaces ...string) plan.Observation {
	spec := &config.Spec{ReleaseSpecs: map[string]*config.ReleaseSpec{"up": {ReleaseName: "up", Namespace: "a"}}}
	o := plan.Observation{Spec: "s", Config: spec, Instance: "autox", Trigger: plan.TriggerRead{Found: true},
		ReleaseSpecs: map[string]plan.ReleaseSpecObservation{"up": {Chart: plan.ChartID{Name: "c", Version: "2"}}},
		Current: []*format.Release{{Record: format.Record{Name: "up", Namespace: "a", Spec: "s", ReleaseSpec: "up", Instance: "autox",
			Status: common.StatusDeployed, Revision: 1}, LastDeployedRevision: 1, ChartName: "c", ChartVersion: "1"}}}
	for _, ns := range namespaces {
		spec.ReleaseSpecs["r-"+ns] = &config.ReleaseSpec{ReleaseName: "r-" + ns, Namespace: ns}
		o.ReleaseSpecs["r-"+ns] = plan.ReleaseSpecObservation{Chart: plan.ChartID{Name: "c", Version: "1"}}
	}
	return o
}

// admit decides o as a reconcile does with the record m (Reconciler.run):
// from the record as observed, and when a step waits for its namespace,
// again once m has synced.
func admit(ctx context.Context, m *ManagedSet, o plan.Observation) plan.Plan {
	o.Managed = m.Recorded()
	if p := plan.Decide(o); !p.Unrecorded() {
		return p
	}
	_ = m.Sync(ctx)
	o.Managed = m.Recorded()
	return plan.Decide(o)
}

// step is the step of release in p.
func step(p plan.Plan, release string) plan.Step {
	for _, s := range p.Steps {
		if s.Release == release {
			return s
		}
	}
	return plan.Step{}
}

// TestManagedSetInTheCluster: the record of managed namespaces against the
// real API server. It is created with the config's namespaces, written only
// when it changes, merged (never overwritten) when it was changed behind
// autox's back, and a namespace leaves it after a listing found it empty;
// each instance has its own.
func TestManagedSetInTheCluster(t *testing.T) {
	ctx := context.Background()
	home := cluster.Namespace(t)
	state := NewConfigState(namespaces("a", "b"))
	m := newManagedSet(cluster.Client, home, "one", state)
	if p := admit(ctx, m, installsIn("a")); len(p.Failed) != 0 || step(p, "r-a").Action != plan.ActionInstall {
		t.Fatalf("the plan before any record = %+v: the install should record its namespace and go ahead", p)
	}
	cm := recordOf(t, home, "one")
	if cm == nil || cm.Data["namespaces"] != "a\nb\n" || cm.Labels[format.LabelInstance] != "one" {
		t.Fatalf("first record: %+v", cm)
	}
	rv := cm.ResourceVersion

	if err := m.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if got := recordOf(t, home, "one").ResourceVersion; got != rv {
		t.Errorf("an unchanged set was written again (resourceVersion %s -> %s)", rv, got)
	}

	// A second instance has a record of its own.
	two := newManagedSet(cluster.Client, home, "two", NewConfigState(namespaces("c")))
	if err := two.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if got := recordOf(t, home, "two"); got == nil || got.Data["namespaces"] != "c\n" {
		t.Errorf("the second instance's record: %+v", got)
	}
	if got := recordOf(t, home, "one"); got.ResourceVersion != rv {
		t.Errorf("the second instance wrote the first one's record: %v", got.Data)
	}

	// Changed behind autox's back (a namespace x added): the next write is
	// refused by its resourceVersion, read again and merged.
	cm = recordOf(t, home, "one")
	cm.Data["namespaces"] = "a\nb\nx\n"
	if _, err := cluster.Client.CoreV1().ConfigMaps(home).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	state.Replace(namespaces("a", "c")) // b dropped now, c added
	if err := m.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if got := recordOf(t, home, "one").Data["namespaces"]; got != "a\nb\nc\nx\n" {
		t.Errorf("after a write behind autox's back: %q, want a, b, c and x", got)
	}
	if got := state.GCNamespaces(); !slices.Equal(got, []string{"a", "c", "b", "x"}) {
		t.Errorf("GCNamespaces = %v: the record's namespaces are not looked in", got)
	}

	// x found empty by a listing leaves; b, dropped after that listing
	// began, stays.
	state.Collected([]string{"b", "x"}, time.Now().Add(-time.Hour))
	if err := m.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if got := recordOf(t, home, "one").Data["namespaces"]; got != "a\nb\nc\n" {
		t.Errorf("after x was found empty: %q, want a, b and c", got)
	}

	// Deleted behind autox's back: written again whole.
	if err := cluster.Client.CoreV1().ConfigMaps(home).Delete(ctx, ManagedSetName("one"), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	state.Replace(namespaces("a", "c", "d"))
	if err := m.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if got := recordOf(t, home, "one").Data["namespaces"]; got != "a\nb\nc\nd\n" {
		t.Errorf("after a delete: %q, want a, b, c and d", got)
	}
}

// TestUnreadableManagedSet: a record that cannot be read — forbidden, not
// autox's, malformed, or a 404 that is not the API server's — is an error,
// is never written over, never counts as empty, and holds back only the
// installs into namespaces not recorded yet; garbage collection still covers
// the config's namespaces.
func TestUnreadableManagedSet(t *testing.T) {
	ctx := context.Background()
	home := cluster.Namespace(t)
	put := func(instance string, labels map[string]string, data string) string {
		t.Helper()
		cm, err := cluster.Client.CoreV1().ConfigMaps(home).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: ManagedSetName(instance), Labels: labels},
			Data:       map[string]string{"namespaces": data}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return cm.ResourceVersion
	}
	nobody := rest.CopyConfig(cluster.Config)
	nobody.Impersonate = rest.ImpersonationConfig{UserName: "nobody"}
	bare404 := rest.CopyConfig(cluster.Config)
	bare404.Wrap(func(rt http.RoundTripper) http.RoundTripper { return plain404{rt} })
	client := func(rc *rest.Config) kubernetes.Interface {
		c, err := kubernetes.NewForConfig(rc)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	for _, tc := range []struct {
		name, instance string
		client         kubernetes.Interface
		setup          func() string // the resourceVersion it left, "" for none
		want           string        // in the error
	}{
		{"forbidden", "forbidden", client(nobody),
			func() string { return put("forbidden", map[string]string{format.LabelInstance: "forbidden"}, "kept\n") }, "forbidden"},
		{"not autox's", "foreign", cluster.Client,
			func() string { return put("foreign", map[string]string{"app": "other"}, "kept\n") }, "is not the record of autox instance"},
		{"malformed", "malformed", cluster.Client,
			func() string {
				return put("malformed", map[string]string{format.LabelInstance: "malformed"}, "kept\nNot_A_Namespace\n")
			}, "is not a namespace name"},
		{"a bare 404", "bare", client(bare404), func() string { return "" }, "cannot read"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rv := tc.setup()
			state := NewConfigState(namespaces("a"))
			m := newManagedSet(tc.client, home, tc.instance, state)
			err := m.Sync(ctx)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Sync = %v, want an error with %q", err, tc.want)
			}
			got := recordOf(t, home, tc.instance)
			switch {
			case rv == "" && got != nil:
				t.Errorf("a record was created over an unread one: %v", got.Data)
			case rv != "" && got.ResourceVersion != rv:
				t.Errorf("an unread record was written: %v", got.Data)
			}
			if gc := state.GCNamespaces(); !slices.Equal(gc, []string{"a"}) {
				t.Errorf("GCNamespaces = %v, want the config's [a]", gc)
			}
			// Only installs into a namespace not recorded wait; applied, the
			// waiting one fails, naming why.
			p := admit(ctx, m, installsIn("a"))
			held := step(p, "r-a")
			acts := apply.New(apply.Options{Log: zerolog.Nop()}).Start(false)
			acts.Act(ctx, plan.Plan{Spec: "s", Steps: []plan.Step{held}})
			if err := acts.Err(); !held.Unrecorded || err == nil || !strings.Contains(err.Error(), "not installing release a/r-a") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("the held install %+v fails with %v", held, err)
			}
			if up := step(p, "up"); up.Action != plan.ActionUpgrade || up.Unrecorded {
				t.Errorf("the upgrade is held too: %+v", up)
			}
		})
	}
}

// plain404 answers GETs of a record with a 404 that has no Status body, as
// a proxy or gateway might: that says nothing about the record.
type plain404 struct{ next http.RoundTripper }

func (p plain404) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method != http.MethodGet || !strings.Contains(r.URL.Path, "/configmaps/"+managedPrefix) {
		return p.next.RoundTrip(r)
	}
	if r.Body != nil {
		_ = r.Body.Close()
	}
	return &http.Response{StatusCode: http.StatusNotFound, Status: "404 Not Found", Request: r,
		Header: http.Header{"Content-Type": []string{"text/plain"}}, Body: io.NopCloser(strings.NewReader("404 page not found"))}, nil
}

// failConfigMaps fails every request for ConfigMaps while on is set, as an
// API server that cannot serve them would; the others go through.
type failConfigMaps struct {
	on   *atomic.Bool
	next http.RoundTripper
}

func (f failConfigMaps) RoundTrip(r *http.Request) (*http.Response, error) {
	if f.on.Load() && strings.Contains(r.URL.Path, "/configmaps") {
		if r.Body != nil {
			_ = r.Body.Close()
		}
		return nil, errors.New("injected: the ConfigMap cannot be reached")
	}
	return f.next.RoundTrip(r)
}

// TestInstallWaitsForTheRecord: the controller does not install a release
// into a namespace its record does not hold yet; once the record can be
// written, the retry records the namespace and installs.
func TestInstallWaitsForTheRecord(t *testing.T) {
	h := newHarness(t)
	home := cluster.Namespace(t)
	var failing atomic.Bool
	failing.Store(true)
	rc := rest.CopyConfig(cluster.Config)
	rc.Wrap(func(rt http.RoundTripper) http.RoundTripper { return failConfigMaps{on: &failing, next: rt} })
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	h.managed = func(s *ConfigState) *ManagedSet { return newManagedSet(client, home, "autox", s) }
	h.Deployment("web", v("1.0.0"))
	h.start(h.config(webSpec(`      hello: {chart: {path: {{.Charts}}/hello}}
`)), time.Hour)
	h.waitReconciles("web", resultError, 1)
	if r := h.Release("web-hello"); r != nil {
		t.Fatalf("installed before its namespace was recorded: %+v", r)
	}
	if cm := recordOf(t, home, "autox"); cm != nil {
		t.Fatalf("a record was written while ConfigMaps failed: %v", cm.Data)
	}
	// The held install is a failure of its release spec, where alerts look.
	if got := gauge(t, h.metrics.releaseSpecs, "autox_release_spec_failing", "web", "hello"); got != 1 {
		t.Errorf("autox_release_spec_failing = %v while the install is held, want 1", got)
	}
	failing.Store(false)
	h.WaitRelease("web-hello", "installed once its namespace is recorded", deployedAt(1))
	if cm := recordOf(t, home, "autox"); cm == nil || cm.Data["namespaces"] != h.NS+"\n" {
		t.Errorf("the record after the install: %+v", cm)
	}
	testenv.Eventually(t, patience, "the release spec no longer failing", func() (bool, error) {
		return gauge(t, h.metrics.releaseSpecs, "autox_release_spec_failing", "web", "hello") == 0, nil
	})
}

// TestCleanupWithAnUnreadableRecord: a record that cannot be read (here a
// ConfigMap of its name that autox did not write) is no reason to skip
// start-up cleanup: a spec removed while autox was down is uninstalled from
// the config's namespaces, and the record is left as it is.
func TestCleanupWithAnUnreadableRecord(t *testing.T) {
	h := newHarness(t)
	home := cluster.Namespace(t)
	h.Deployment("web", v("1.0.0"))
	h.start(h.config(twoReleases), time.Hour)
	h.WaitRelease("web-job", "installed", deployedAt(1))
	h.halt()

	foreign, err := cluster.Client.CoreV1().ConfigMaps(home).Create(context.Background(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: ManagedSetName("autox")}, Data: map[string]string{"namespaces": "x\n"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h.managed = func(s *ConfigState) *ManagedSet { return newManagedSet(cluster.Client, home, "autox", s) }
	h.start(h.config(webSpec(`      hello:
        chart: {path: {{.Charts}}/hello}
        values: {greeting: hi, tasks: [ready, http]}
`)), time.Hour)
	h.WaitRelease("web-job", "uninstalled", gone)
	// Before the first pass: it saw one release (the pass would catch it too).
	h.waitPass()
	if n := testutil.ToFloat64(h.metrics.releases.WithLabelValues("deployed")); n != 1 {
		t.Errorf("the first pass saw %v deployed releases, want 1: start-up cleanup did not run", n)
	}
	if r := h.Release("web-hello"); r == nil || r.Revision != 1 {
		t.Errorf("web-hello: %+v", r)
	}
	if cm := recordOf(t, home, "autox"); cm.ResourceVersion != foreign.ResourceVersion {
		t.Errorf("the foreign ConfigMap was written: %v", cm.Data)
	}
}

// TestNewTermClaimsTheRecord: a new term's first Sync writes the record even
// when its set is unchanged, so a write of the term before it, still in
// flight on the resourceVersion both read, fails with a Conflict instead of
// undoing the record the new term relies on. Later Syncs of the term with
// nothing to change write nothing.
func TestNewTermClaimsTheRecord(t *testing.T) {
	ctx := context.Background()
	home := cluster.Namespace(t)
	old := newManagedSet(cluster.Client, home, "one", NewConfigState(namespaces("a", "b")))
	if err := old.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	rv := recordOf(t, home, "one").ResourceVersion

	next := newManagedSet(cluster.Client, home, "one", NewConfigState(namespaces("a", "b")))
	if err := next.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	claimed := recordOf(t, home, "one")
	if claimed.ResourceVersion == rv || claimed.Data["namespaces"] != "a\nb\n" {
		t.Fatalf("the new term did not claim the record (resourceVersion %s -> %s, %q)", rv, claimed.ResourceVersion, claimed.Data["namespaces"])
	}
	// The old term's write, decided on what it read: b found empty.
	if err := old.write(ctx, []string{"a"}); !apierrors.IsConflict(err) {
		t.Errorf("a write of the ended term on the old resourceVersion = %v, want a Conflict", err)
	}
	if got := recordOf(t, home, "one"); got.Data["namespaces"] != "a\nb\n" || got.ResourceVersion != claimed.ResourceVersion {
		t.Errorf("the ended term changed the record: %q", got.Data["namespaces"])
	}
	if err := next.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if got := recordOf(t, home, "one").ResourceVersion; got != claimed.ResourceVersion {
		t.Errorf("an unchanged set was written again in the same term (resourceVersion %s -> %s)", claimed.ResourceVersion, got)
	}
}
