package driftwatch

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
	"go.uber.org/goleak"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/release/common"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/record"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/helmops"
	"github.com/autox-dev/autox/helmops/chartsource"
	"github.com/autox-dev/autox/internal/testenv"
)

var cluster *testenv.Cluster

func TestMain(m *testing.M) {
	code := testenv.RunMain(m, &cluster)
	if code == 0 {
		if err := goleak.Find(goleak.IgnoreTopFunction("k8s.io/klog/v2.(*flushDaemon).run.func1")); err != nil {
			fmt.Fprintln(os.Stderr, "goroutines leaked:", err)
			code = 1
		}
	}
	os.Exit(code)
}

const patience = 60 * time.Second // a bound for a broken build, not a performance goal

// scene installs the drift chart as release "d" in a new namespace with the
// real Helm SDK, and returns the Manager, the namespace and the clients.
func scene(t *testing.T) (*helmops.Manager, string, metadata.Interface) {
	t.Helper()
	cs, mc := clients(t)
	m := manager(t, cluster.Config, cs, mc)
	ch := loadChart(t, "drift")
	ns := cluster.Namespace(t)
	rev, err := m.Install(context.Background(), helmops.Target{Spec: "spec", ReleaseSpec: "rs", Name: "d", Namespace: ns, Chart: ch,
		Values: map[string]interface{}{"password": "s3cr3t-drift-password"}})
	if err != nil || rev != 1 {
		t.Fatalf("Install = %d, %v", rev, err)
	}
	return m, ns, mc
}

// clients are a clientset and a metadata client of the test cluster.
func clients(t *testing.T) (kubernetes.Interface, metadata.Interface) {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	mc, err := metadata.NewForConfig(cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	return cs, mc
}

// manager is a Manager of rc (with secret records).
func manager(t *testing.T, rc *rest.Config, cs kubernetes.Interface, mc metadata.Interface) *helmops.Manager {
	t.Helper()
	m, err := helmops.New(helmops.Options{RESTConfig: rc, Clientset: cs, Metadata: mc, StorageDriver: helmops.DriverSecret,
		Timeout: time.Minute, MaxHistory: 3, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// loadChart is chart testdata/charts/name.
func loadChart(t *testing.T, name string) *chart.Chart {
	t.Helper()
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	ch, err := chartsource.LocalCharts{}.Load(context.Background(), config.Chart{Path: "charts/" + name}, filepath.Join(root, "testdata"))
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

// running runs l until ctx ends; the func returned cancels it and waits.
func running(t *testing.T, ctx context.Context, cancel context.CancelFunc, l *Loop) func() {
	done := make(chan error)
	go func() { done <- l.Run(ctx) }()
	return func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}

func mapper(t *testing.T) *restmapper.DeferredDiscoveryRESTMapper {
	t.Helper()
	dc, err := discovery.NewDiscoveryClientForConfig(cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	return restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
}

func replicas(t *testing.T, ns string) int32 {
	t.Helper()
	d, err := cluster.Client.AppsV1().Deployments(ns).Get(context.Background(), "d", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return *d.Spec.Replicas
}

// TestWatchCorrects: a release in correct mode whose Deployment is scaled
// is put back by the check the Deployment's watch triggered (the periodic
// check is an hour away), with no new revision; the first check only
// waits for the watch's start.
func TestWatchCorrects(t *testing.T) {
	m, ns, mc := scene(t)
	target := Target{DriftTarget: helmops.DriftTarget{Namespace: ns, Name: "d", Revision: 1, Policy: &config.Drift{Mode: config.DriftCorrect}}}
	events := record.NewBroadcaster()
	defer events.Shutdown()
	events.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cluster.Client.CoreV1().Events("")})
	recorder := events.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "autox"})
	metrics, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu      sync.Mutex
		reports []*helmops.DriftReport
		errs    []error
	)
	l := New(Options{
		Checker: m.NewDriftChecker(helmops.DriftOptions{}), Metadata: mc, Mapper: mapper(t),
		Source:   func(context.Context) ([]Target, error) { return []Target{target}, nil },
		Coalesce: 100 * time.Millisecond, Period: time.Hour, Refresh: time.Hour,
		Report: func(_ Target, rep *helmops.DriftReport, err error) {
			mu.Lock()
			defer mu.Unlock()
			reports, errs = append(reports, rep), append(errs, err)
		},
		Events: recorder, Ref: func(Target) *corev1.ObjectReference {
			return &corev1.ObjectReference{APIVersion: "v1", Kind: "ConfigMap", Namespace: ns, Name: "trigger"}
		},
		Metrics: metrics,
		Log:     zerolog.Nop(),
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer running(t, ctx, cancel, l)()
	deadline := time.Now().Add(patience)
	deployments := watchKey{GVR: schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, Namespace: ns}
	for inf := l.set.Get(deployments); inf == nil || !inf.HasSynced(); inf = l.set.Get(deployments) {
		if time.Now().After(deadline) {
			t.Fatal("the watches never synced")
		}
		time.Sleep(20 * time.Millisecond)
	}

	if _, err := cluster.Client.AppsV1().Deployments(ns).UpdateScale(context.Background(), "d",
		&autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: "d", Namespace: ns}, Spec: autoscalingv1.ScaleSpec{Replicas: 3}},
		metav1.UpdateOptions{FieldManager: "kubectl"}); err != nil {
		t.Fatal(err)
	}
	for replicas(t, ns) != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("never put back: replicas %d", replicas(t, ns))
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The correction lands before its check reports.
	for {
		mu.Lock()
		n := len(reports)
		mu.Unlock()
		if n > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(reports) != 1 || errs[0] != nil {
		t.Fatalf("%d checks, errors %v; want the one the watch triggered", len(reports), errs)
	}
	rep := reports[0]
	if len(rep.Objects) != 1 || rep.Objects[0].Object.Kind != "Deployment" || !rep.Objects[0].Corrected {
		t.Errorf("the check was not of the changed Deployment only, or did not correct it: %+v", rep.Objects)
	}
	if r, err := m.Lookup(context.Background(), ns, "d"); err != nil || r.Revision != 1 || r.Status != common.StatusDeployed {
		t.Errorf("release = %+v, %v; want revision 1 deployed", r, err)
	}
	if got := testutil.ToFloat64(metrics.corrections.WithLabelValues(resultCorrected)); got != 1 {
		t.Errorf("autox_drift_corrections_total{result=corrected} = %v", got)
	}
	if got := testutil.ToFloat64(metrics.drifted); got != 0 {
		t.Errorf("autox_drifted_releases = %v after the correction", got)
	}
	for {
		list, err := cluster.Client.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var found *corev1.Event
		for i, e := range list.Items {
			if strings.Contains(e.Message, "s3cr3t") {
				t.Fatalf("an Event holds the Secret's value: %s", e.Message)
			}
			if e.Reason == EventCorrected {
				found = &list.Items[i]
			}
		}
		if found != nil {
			if found.InvolvedObject.Name != "trigger" || !strings.Contains(found.Message, "/spec/replicas") || !strings.Contains(found.Message, ns+"/d") {
				t.Errorf("Event %s: %q on %+v", found.Reason, found.Message, found.InvolvedObject)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no DriftCorrected Event")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestChanged: what an update must change to be checked.
func TestChanged(t *testing.T) {
	base := metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{UID: "u", Generation: 2, ResourceVersion: "10",
		Labels: map[string]string{"a": "1"}, Annotations: map[string]string{"b": "2"}}}
	for name, c := range map[string]struct {
		edit func(m *metav1.PartialObjectMetadata)
		want bool
	}{
		"status only":            {func(m *metav1.PartialObjectMetadata) { m.ResourceVersion = "11" }, false},
		"generation":             {func(m *metav1.PartialObjectMetadata) { m.Generation = 3 }, true},
		"uid":                    {func(m *metav1.PartialObjectMetadata) { m.UID = "v" }, true},
		"label":                  {func(m *metav1.PartialObjectMetadata) { m.Labels = map[string]string{"a": "2"} }, true},
		"annotation":             {func(m *metav1.PartialObjectMetadata) { m.Annotations = nil }, true},
		"no generation, written": {func(m *metav1.PartialObjectMetadata) { m.Generation = 0; m.ResourceVersion = "11" }, true},
	} {
		o, n := base.DeepCopy(), base.DeepCopy()
		if name == "no generation, written" {
			o.Generation = 0
		}
		c.edit(n)
		if got := Changed(o, n); got != c.want {
			t.Errorf("%s: Changed = %v, want %v", name, got, c.want)
		}
	}
}
