package triggers

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"
	"helm.sh/helm/v4/pkg/release/common"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/helmops"
	"github.com/autox-dev/autox/helmops/chartsource"
	"github.com/autox-dev/autox/internal/format"
	"github.com/autox-dev/autox/internal/releasetest"
	"github.com/autox-dev/autox/internal/testenv"
	"github.com/autox-dev/autox/triggers/attempts"
	"github.com/autox-dev/autox/triggers/observe"
	"github.com/autox-dev/autox/triggers/plan"
)

var cluster *testenv.Cluster

func TestMain(m *testing.M) { os.Exit(testenv.RunMainNoLeaks(m, &cluster)) }

const patience = 60 * time.Second // a bound for a broken build, not a performance goal

// harness runs the real controller in process against the test API server.
type harness struct {
	*releasetest.Scene
	t    *testing.T
	ctrl *Controller
	stop context.CancelFunc
	done chan error
	// now is the reconciler's clock; nil means time.Now.
	now func() time.Time
	// as, if set, is the identity the controller acts with (h.Helm, which
	// the assertions read with, stays the admin's).
	as *rest.Config
	// shutdownTimeout, if set, replaces the default 30s.
	shutdownTimeout time.Duration
	// backoff, if set, is shared by the controllers started (as by the
	// controllers of successive leadership terms).
	backoff *Backoff
	// metrics and reads are those of the controller started last.
	metrics *Metrics
	reads   *liveReads
	// sources, if set, reads values sources (else a SourceReader).
	sources observe.ValuesSources
	// liveReads runs the controller without a record index: every read of
	// release records is a live LIST, as `autox plan` reads.
	liveReads bool
	// faults, if set, are what the record index's watch and LISTs see;
	// informerFaults, if set, what the trigger and values source
	// informers' watches see (the live reads of triggers go around them).
	faults, informerFaults *testenv.MetadataFaults
	// spy, if set, wraps the controller's Helm to watch its operations.
	spy func(Helm) Helm
	// managed, if set, makes the record of managed namespaces the
	// Reconciler keeps (else none).
	managed func(*ConfigState) *ManagedSet
	// home is autox's own namespace (the remediation records), made once.
	home string
	// afterList, if set, runs after each LIST of triggers returns.
	afterList func(observe.ListKey)
	// shard, if set, is the one shard the controller works for; watches
	// and sharedRecords, if set, the replica's watches it shares and the
	// record index its Manager reads through (as autox run --shards).
	shard         *Shard
	watches       *Watches
	sharedRecords *helmops.RecordIndex
}

// homeNS is autox's own namespace in the harness, another than h.NS.
func (h *harness) homeNS() string {
	if h.home == "" {
		h.home = cluster.Namespace(h.t)
	}
	return h.home
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	return &harness{Scene: releasetest.NewScene(t, cluster, patience), t: t}
}

// config renders a config template ({{.NS}}, {{.Charts}}) and loads it for real.
func (h *harness) config(text string) *config.Config {
	h.t.Helper()
	cfg, err := config.Load(h.WriteConfig(text))
	if err != nil {
		h.t.Fatal(err)
	}
	return cfg
}

func (h *harness) start(cfg *config.Config, resync time.Duration) {
	h.t.Helper()
	rc := cluster.Config
	if h.as != nil {
		rc = h.as
	}
	// The controller's own Manager, reading through a record index as
	// autox run's does; the scene's (h.Helm) reads live for the assertions.
	hopts := helmops.Options{RESTConfig: rc, Timeout: time.Minute, MaxHistory: 10, Log: zerolog.Nop()}
	if h.faults != nil {
		mc, err := metadata.NewForConfig(rc)
		if err != nil {
			h.t.Fatal(err)
		}
		hopts.Metadata = h.faults.Wrap(mc)
	}
	helm, err := helmops.New(hopts)
	if err != nil {
		h.t.Fatal(err)
	}
	var records RecordIndex
	switch {
	case h.sharedRecords != nil:
		helm.UseRecordIndex(h.sharedRecords)
	case !h.liveReads:
		records = helm.NewRecordIndex()
	}
	meta, err := metadata.NewForConfig(rc)
	if err != nil {
		h.t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		h.t.Fatal(err)
	}
	inv, err := helm.NewInventory()
	if err != nil {
		h.t.Fatal(err)
	}
	log := zerolog.New(zerolog.NewTestWriter(h.t)).Level(zerolog.InfoLevel)
	var ctrl *Controller
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		h.t.Fatal(err)
	}
	state := NewConfigState(cfg)
	reads := &liveReads{Triggers: observe.TriggerReader{Client: meta}, metrics: m, reads: map[string][]*liveRead{}, config: state.Config, afterList: h.afterList}
	var sources observe.ValuesSources = observe.SourceReader{Client: cluster.Client}
	if h.sources != nil {
		sources = h.sources
	}
	var writes Helm = ShardReleases(helm, h.shard)
	if h.spy != nil {
		writes = h.spy(helm)
	}
	var managed *ManagedSet
	if h.managed != nil {
		managed = h.managed(state)
	}
	rec := NewReconciler(ReconcilerOptions{Helm: writes, Charts: chartsource.LocalCharts{}, Triggers: reads, Sources: sources, Inventory: inv,
		Attempts: attempts.Store{Client: cs, Instance: helm.Instance(), Home: h.homeNS()}, State: state, Defaults: config.PolicyDefaults{Timeout: time.Minute, MaxHistory: 10}, Now: h.clock(),
		Log: log, Metrics: m, Managed: managed})
	var informerMeta metadata.Interface = meta
	if h.informerFaults != nil {
		informerMeta = h.informerFaults.Wrap(meta)
	}
	ctrl = NewController(Options{Reconciler: rec, Inventory: inv, Metadata: informerMeta, Records: records, Workers: 2, Resync: resync,
		ShutdownTimeout: h.shutdown(), RetryBase: 100 * time.Millisecond, RetryMax: time.Second, Backoff: h.backoff, Metrics: m, Log: log,
		Shard: h.shard, Watches: h.watches})
	h.ctrl, h.metrics, h.reads = ctrl, m, reads
	ctx, cancel := context.WithCancel(context.Background())
	h.stop, h.done = cancel, make(chan error, 1)
	go func() { h.done <- h.ctrl.Run(ctx) }()
	h.t.Cleanup(h.halt)
}

func (h *harness) shutdown() time.Duration {
	if h.shutdownTimeout > 0 {
		return h.shutdownTimeout
	}
	return 30 * time.Second
}

func (h *harness) clock() func() time.Time {
	if h.now != nil {
		return h.now
	}
	return time.Now
}

// halt stops the controller and waits for Run to return.
func (h *harness) halt() {
	if h.stop == nil {
		return
	}
	h.stop()
	if err := <-h.done; err != nil {
		h.t.Errorf("Run returned %v", err)
	}
	h.stop = nil
}

// reconciles returns how many reconciles of spec the controller started
// last has finished with result (resultSuccess or resultError).
func (h *harness) reconciles(spec, result string) float64 {
	return testutil.ToFloat64(h.metrics.reconciles.WithLabelValues(spec, result))
}

// finishedReconciles counts the reconciles of spec that m has seen finish
// (one that cannot decide is not counted: see liveReads).
func finishedReconciles(m *Metrics, spec string) float64 {
	return testutil.ToFloat64(m.reconciles.WithLabelValues(spec, resultSuccess)) +
		testutil.ToFloat64(m.reconciles.WithLabelValues(spec, resultError))
}

// waitReconciles waits until the controller started last has finished n
// reconciles of spec with result.
func (h *harness) waitReconciles(spec, result string, n float64) {
	h.t.Helper()
	testenv.Eventually(h.t, patience, fmt.Sprintf("%v %s reconciles of spec %s", n, result, spec), func() (bool, error) {
		return h.reconciles(spec, result) >= n, nil
	})
}

// waitPass waits until the first pass of the controller started last is
// complete: every spec proven in sync or reconciled.
func (h *harness) waitPass() {
	h.t.Helper()
	testenv.Eventually(h.t, patience, "the first pass complete", func() (bool, error) {
		return testutil.ToFloat64(h.metrics.lastPass) > 0, nil
	})
}

// waitFreshReconcile waits until a reconcile of spec has finished that read
// its trigger after this call, so it saw every change made before it.
func (h *harness) waitFreshReconcile(spec string) {
	h.t.Helper()
	from := len(h.reads.of(spec))
	testenv.Eventually(h.t, patience, "a reconcile of spec "+spec+" that read its trigger after the change", func() (bool, error) {
		finished := finishedReconciles(h.metrics, spec)
		for _, r := range h.reads.of(spec)[from:] {
			if finished > r.finishedBefore {
				return true, nil
			}
		}
		return false, nil
	})
}

// liveReads is the harness's trigger reader. It records every live read of
// a spec's trigger with how many reconciles of the spec had finished then.
// Reconciles of one spec never overlap, so once that count has grown, the
// reconcile that made the read has finished. The reads also show reconciles
// the metric does not count: those that cannot decide (a trigger read that
// fails) return before they count themselves.
type liveReads struct {
	observe.Triggers
	metrics   *Metrics
	config    func() *config.Config
	afterList func(observe.ListKey)

	mu    sync.Mutex
	reads map[string][]*liveRead // by spec
}

type liveRead struct {
	finishedBefore float64
	done           bool
	err            error
}

func (l *liveReads) Get(ctx context.Context, t config.Trigger) (plan.TriggerRead, *corev1.ObjectReference, error) {
	var mine []*liveRead
	for name, spec := range l.config().Specs {
		if keyOf(spec.Trigger) == keyOf(t) {
			r := &liveRead{finishedBefore: finishedReconciles(l.metrics, name)}
			l.mu.Lock()
			l.reads[name] = append(l.reads[name], r)
			l.mu.Unlock()
			mine = append(mine, r)
		}
	}
	obs, ref, err := l.Triggers.Get(ctx, t)
	l.mu.Lock()
	for _, r := range mine {
		r.done, r.err = true, err
	}
	l.mu.Unlock()
	return obs, ref, err
}

func (l *liveReads) List(ctx context.Context, k observe.ListKey) (map[string]plan.TriggerRead, error) {
	objs, err := l.Triggers.List(ctx, k)
	if l.afterList != nil {
		l.afterList(k)
	}
	return objs, err
}

// of returns copies of the reads of spec's trigger so far.
func (l *liveReads) of(spec string) []liveRead {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]liveRead, len(l.reads[spec]))
	for i, r := range l.reads[spec] {
		out[i] = *r
	}
	return out
}

var (
	deployedAt = releasetest.DeployedAt
	gone       = releasetest.Gone
	webSpec    = releasetest.WebSpec
)

func v(version string) map[string]string {
	return map[string]string{"app.kubernetes.io/version": version, "team": "x"}
}

var twoReleases = webSpec(`      hello:
        chart: {path: {{.Charts}}/hello}
        values: {greeting: hi, tasks: [ready, http]}
      job:
        chart: {path: {{.Charts}}/job}
        onChange: reinstall
        values: {message: go}
`)

func TestLifecycleOfOneTrigger(t *testing.T) {
	h := newHarness(t)
	h.Deployment("web", v("1.0.0"))
	h.start(h.config(twoReleases), time.Hour)

	hello := h.WaitRelease("web-hello", "installed", deployedAt(1))
	job := h.WaitRelease("web-job", "installed", deployedAt(1))
	wantTrigger := map[string]interface{}{"autox": plan.InjectedValues(config.Trigger{Group: "apps", Version: "v1", Resource: "deployments",
		Name: "web", Namespace: h.NS, Labels: []string{"app.kubernetes.io/version"}}, v("1.0.0")),
		"greeting": "hi", "tasks": []interface{}{"ready", "http"}}
	if d, _ := plan.ValuesDiff(wantTrigger, hello.Values); d != "" {
		t.Errorf("hello values differ at %s: %v", d, hello.Values)
	}
	if hello.Spec != "web" || hello.ReleaseSpec != "hello" {
		t.Errorf("labels: %+v", hello)
	}
	cm, err := cluster.Client.CoreV1().ConfigMaps(h.NS).Get(context.Background(), "web-hello", metav1.GetOptions{})
	if err != nil || !strings.Contains(cm.Data["trigger"], `"app.kubernetes.io/version":"1.0.0"`) || strings.Contains(cm.Data["trigger"], "team") {
		t.Errorf("rendered trigger values: %q %v", cm.Data["trigger"], err)
	}

	// A new version: upgrade (revision 2) for onChange upgrade, a fresh
	// install for onChange reinstall (revision 1 again, first deployed later).
	h.Relabel("web", v("2.0.0"))
	h.WaitRelease("web-hello", "upgraded", deployedAt(2))
	job2 := h.WaitRelease("web-job", "reinstalled", func(r *format.Release) bool {
		return r != nil && r.Status == common.StatusDeployed && r.FirstDeployed.After(job.FirstDeployed)
	})
	if job2.Revision != 1 {
		t.Errorf("reinstalled job revision = %d, want 1", job2.Revision)
	}

	// A label change autox does not watch changes nothing.
	h.Relabel("web", map[string]string{"app.kubernetes.io/version": "2.0.0", "team": "y"})
	h.waitFreshReconcile("web")
	if r := h.Release("web-hello"); r.Revision != 2 {
		t.Errorf("an unwatched label change made revision %d", r.Revision)
	}

	// Label removed: everything goes.
	h.Relabel("web", map[string]string{"team": "y"})
	h.WaitRelease("web-hello", "uninstalled", gone)
	h.WaitRelease("web-job", "uninstalled", gone)

	// Label back, then the object deleted.
	h.Relabel("web", v("3.0.0"))
	h.WaitRelease("web-hello", "installed again", deployedAt(1))
	if err := cluster.Client.AppsV1().Deployments(h.NS).Delete(context.Background(), "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.WaitRelease("web-hello", "uninstalled after delete", gone)
	h.WaitRelease("web-job", "uninstalled after delete", gone)
}

func TestRestartsChangeNothing(t *testing.T) {
	h := newHarness(t)
	h.Deployment("web", v("1.0.0"))
	cfg := h.config(twoReleases)
	h.start(cfg, time.Hour)
	h.WaitRelease("web-hello", "installed", deployedAt(1))
	h.WaitRelease("web-job", "installed", deployedAt(1))
	h.halt()
	before := h.Release("web-job").FirstDeployed

	for i := 0; i < 5; i++ {
		h.start(cfg, time.Hour)
		testenv.Eventually(t, patience, "controller ready", func() (bool, error) { return h.ctrl.Ready(), nil })
		h.waitPass()
		h.halt()
	}
	if r := h.Release("web-hello"); r.Revision != 1 {
		t.Errorf("web-hello revision after 5 restarts = %d, want 1", r.Revision)
	}
	if r := h.Release("web-job"); r.Revision != 1 || !r.FirstDeployed.Equal(before) {
		t.Errorf("web-job after 5 restarts: revision %d, first deployed %v (was %v)", r.Revision, r.FirstDeployed, before)
	}

	// A restart with the spec gone uninstalls its releases before the first pass.
	h.start(h.config("namespaces: ["+h.NS+"]\nspecs: {}\n"), time.Hour)
	h.WaitRelease("web-hello", "uninstalled by start-up cleanup", gone)
	h.WaitRelease("web-job", "uninstalled by start-up cleanup", gone)
}

func TestLiveConfigChange(t *testing.T) {
	h := newHarness(t)
	h.Deployment("web", v("1.0.0"))
	h.start(h.config(twoReleases), time.Hour)
	h.WaitRelease("web-hello", "installed", deployedAt(1))
	h.WaitRelease("web-job", "installed", deployedAt(1))

	// Drop one release spec and change the other's values.
	ch := h.ctrl.Reconfigure(context.Background(), h.config(webSpec(`      hello:
        chart: {path: {{.Charts}}/hello-v2}
        values: {greeting: hey}
`)))
	if len(ch.RemovedReleaseSpecs) != 1 || len(ch.ChangedSpecs) != 1 {
		t.Errorf("changes = %+v", ch)
	}
	h.WaitRelease("web-job", "uninstalled", gone)
	r := h.WaitRelease("web-hello", "upgraded", deployedAt(2))
	if r.ChartVersion != "0.2.0" {
		t.Errorf("chart version = %s", r.ChartVersion)
	}

	// Drop the whole spec.
	h.ctrl.Reconfigure(context.Background(), h.config("namespaces: ["+h.NS+"]\nspecs: {}\n"))
	h.WaitRelease("web-hello", "uninstalled", gone)
}

func TestConflictAndFailureIsolation(t *testing.T) {
	h := newHarness(t)
	cluster.InstallUnlabelled(t, h.NS, "web-hello", filepath.Join(h.Charts, "hello"))
	h.Deployment("web", v("1.0.0"))
	h.start(h.config(webSpec(`      hello: {chart: {path: {{.Charts}}/hello}}
      broken: {chart: {path: {{.Charts}}/broken}}
      missing: {chart: {path: {{.Charts}}/does-not-exist}}
      ok: {chart: {path: {{.Charts}}/hello}}
`)), 500*time.Millisecond)
	h.WaitRelease("web-ok", "installed despite its failing siblings", deployedAt(1))

	// Several reconciles later the foreign release is untouched and the
	// broken chart's failed install is retried, never turning into anything
	// else.
	h.waitReconciles("web", resultError, h.reconciles("web", resultError)+3)
	r := h.Release("web-hello")
	if r == nil || r.Managed() || r.Revision != 1 {
		t.Errorf("foreign release changed: %+v", r)
	}
	if b := h.Release("web-broken"); b != nil && b.Status == common.StatusDeployed {
		t.Errorf("broken chart deployed: %+v", b)
	}
	if r := h.Release("web-ok"); r.Revision != 1 {
		t.Errorf("web-ok revision %d after failing siblings were retried", r.Revision)
	}
}

func TestDriftIsCorrected(t *testing.T) {
	h := newHarness(t)
	h.Deployment("web", v("1.0.0"))
	h.start(h.config(webSpec(`      hello: {chart: {path: {{.Charts}}/hello}, values: {greeting: hi}}
`)), time.Second)
	r := h.WaitRelease("web-hello", "installed", deployedAt(1))

	// Someone upgrades the release behind autox's back, keeping the labels.
	ch, err := chartsource.LocalCharts{}.Load(context.Background(), config.Chart{Path: "hello"}, h.Charts)
	if err != nil {
		t.Fatal(err)
	}
	vals := map[string]interface{}{}
	for k, val := range r.Values {
		vals[k] = val
	}
	vals["greeting"] = "changed"
	if _, err := h.Helm.Upgrade(context.Background(), helmops.Target{Spec: "web", ReleaseSpec: "hello", Name: "web-hello", Namespace: h.NS, Chart: ch, Values: vals}); err != nil {
		t.Fatal(err)
	}
	// The next periodic pass puts the declared values back.
	r = h.WaitRelease("web-hello", "corrected", deployedAt(3))
	if r.Values["greeting"] != "hi" {
		t.Errorf("greeting = %v", r.Values["greeting"])
	}
}

func TestTriggerReadErrorsChangeNothing(t *testing.T) {
	h := newHarness(t)
	// The release exists; then the spec's trigger names a resource the API
	// server does not serve. A 404 for the resource is not "object not found".
	h.Deployment("web", v("1.0.0"))
	cfg := h.config(twoReleases)
	h.start(cfg, time.Hour)
	h.WaitRelease("web-hello", "installed", deployedAt(1))
	h.halt()

	h.start(h.config(strings.Replace(twoReleases, "group: apps, version: v1, resource: deployments", "group: example.com, version: v1, resource: widgets", 1)), 300*time.Millisecond)
	// The first pass waits for the widgets informer, which never syncs: only
	// reads of the trigger show that the spec was reconciled at all. Its
	// reconciles never overlap, so when the third read starts, the first
	// two reconciles have done all they would do.
	testenv.Eventually(t, patience, "3 live reads of spec web's trigger", func() (bool, error) {
		return len(h.reads.of("web")) >= 3, nil
	})
	if r := h.Release("web-hello"); r == nil || r.Revision != 1 {
		t.Fatalf("release changed although the trigger could not be read: %+v", r)
	}
	for i, r := range h.reads.of("web")[:2] {
		if r.err == nil {
			t.Errorf("read %d of the trigger of an unserved resource did not fail", i+1)
		}
	}

	_, _, err := observe.TriggerReader{Client: metadata.NewForConfigOrDie(cluster.Config)}.Get(context.Background(),
		config.Trigger{Group: "example.com", Version: "v1", Resource: "widgets", Name: "web", Namespace: h.NS})
	if err == nil {
		t.Fatal("reading an unserved resource must be an error, not NotFound")
	}
}
