package eventsink

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"

	"github.com/autox-dev/autox/internal/testenv"
)

var cluster *testenv.Cluster

func TestMain(m *testing.M) { os.Exit(testenv.RunMainNoLeaks(m, &cluster)) }

// start runs a Sink and a broadcaster recording to it, as a term does, and
// stops both when the test ends.
func start(t *testing.T, opts Options) (record.EventRecorder, *Metrics) {
	t.Helper()
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	opts.Metrics, opts.Log = m, zerolog.Nop()
	sink := New(cluster.Client.CoreV1().Events(""), opts)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); sink.Run(ctx, 5*time.Second) }()
	b := record.NewBroadcaster()
	b.StartRecordingToSink(sink)
	t.Cleanup(func() {
		b.Shutdown()
		cancel()
		<-done
	})
	return b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "autox"}), m
}

func configMap(t *testing.T, ns, name string) *corev1.ConfigMap {
	t.Helper()
	cm, err := cluster.Client.CoreV1().ConfigMaps(ns).Create(context.Background(),
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return cm
}

func events(t *testing.T, ns string) []corev1.Event {
	t.Helper()
	list, err := cluster.Client.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// TestEventsWrittenAndAggregated: the broadcaster's aggregation still works
// through the asynchronous sink (a repeated Event becomes one with a count,
// written by a patch after its create), and every distinct Event lands.
func TestEventsWrittenAndAggregated(t *testing.T) {
	ns := cluster.Namespace(t)
	rec, m := start(t, Options{})
	cm := configMap(t, ns, "trigger")
	for i := 0; i < 3; i++ {
		rec.Event(cm, corev1.EventTypeWarning, "ReleaseFailed", "install failed")
	}
	for i := 0; i < 5; i++ {
		rec.Event(cm, corev1.EventTypeNormal, fmt.Sprintf("Step%d", i), "done")
	}
	testenv.Eventually(t, 30*time.Second, "events written", func() (bool, error) {
		var repeated, steps int
		for _, e := range events(t, ns) {
			switch {
			case e.Reason == "ReleaseFailed" && e.Count == 3:
				repeated++
			case e.Reason != "ReleaseFailed":
				steps++
			}
		}
		return repeated == 1 && steps == 5, nil
	})
	if got := testutil.ToFloat64(m.events.WithLabelValues(resultSent)); got != 8 {
		t.Errorf("sent = %v, want 8 (6 creates and 2 patches)", got)
	}
}

// TestBudgetDropsInsteadOfWaiting: Events over the budget are dropped and
// counted at once; none is held back to be sent later. Normal Events have
// a budget of their own: spent, it never keeps a Warning out.
func TestBudgetDropsInsteadOfWaiting(t *testing.T) {
	ns := cluster.Namespace(t)
	rec, m := start(t, Options{QPS: 0.001, Burst: 2, NormalQPS: 0.001, NormalBurst: 3})
	for i := 0; i < 10; i++ {
		cm := configMap(t, ns, fmt.Sprintf("t%d", i))
		rec.Event(cm, corev1.EventTypeNormal, "ReleaseInstalled", "installed")
		if i%3 == 0 {
			rec.Event(cm, corev1.EventTypeWarning, "ReleaseFailed", "failed")
		}
	}
	testenv.Eventually(t, 30*time.Second, "5 sent, 9 dropped", func() (bool, error) {
		return testutil.ToFloat64(m.events.WithLabelValues(resultSent)) == 5 &&
			testutil.ToFloat64(m.events.WithLabelValues(resultDropped)) == 9, nil
	})
	var normal, warning int
	for _, e := range events(t, ns) {
		if e.Type == corev1.EventTypeWarning {
			warning++
		} else {
			normal++
		}
	}
	if normal != 3 || warning != 2 {
		t.Errorf("%d Normal and %d Warning Events in the namespace, want the 3 and 2 of their budgets", normal, warning)
	}
}

// TestSharedBudget: the sinks of several shard terms of one process share
// one budget: together they send no more than it allows.
func TestSharedBudget(t *testing.T) {
	ns := cluster.Namespace(t)
	budget := NewBudget(Options{NormalQPS: 0.001, NormalBurst: 4})
	rec1, m1 := start(t, Options{Budget: budget})
	rec2, m2 := start(t, Options{Budget: budget})
	for i := 0; i < 6; i++ {
		rec1.Event(configMap(t, ns, fmt.Sprintf("a%d", i)), corev1.EventTypeNormal, "ReleaseInstalled", "installed")
		rec2.Event(configMap(t, ns, fmt.Sprintf("b%d", i)), corev1.EventTypeNormal, "ReleaseInstalled", "installed")
	}
	testenv.Eventually(t, 30*time.Second, "4 sent, 8 dropped by both sinks", func() (bool, error) {
		sent := testutil.ToFloat64(m1.events.WithLabelValues(resultSent)) + testutil.ToFloat64(m2.events.WithLabelValues(resultSent))
		dropped := testutil.ToFloat64(m1.events.WithLabelValues(resultDropped)) + testutil.ToFloat64(m2.events.WithLabelValues(resultDropped))
		return sent == 4 && dropped == 8, nil
	})
	if n := len(events(t, ns)); n != 4 {
		t.Errorf("%d Events in the namespace, want the budget's 4", n)
	}
}
