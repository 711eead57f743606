package observe

import (
	"context"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/internal/testenv"
)

var cluster *testenv.Cluster

func TestMain(m *testing.M) { os.Exit(testenv.RunMainNoLeaks(m, &cluster)) }

// readCounter counts the reads that reach the reader (one goroutine).
type readCounter struct {
	ValuesSources
	reads int
}

func (c *readCounter) Get(ctx context.Context, kind, namespace, name string) (bool, map[string]string, error) {
	c.reads++
	return c.ValuesSources.Get(ctx, kind, namespace, name)
}

// TestSourceReader: a ConfigMap's data and binaryData, a Secret's data, and
// NotFound as "not found" — never as an error, nor an error as absence.
func TestSourceReader(t *testing.T) {
	ctx := context.Background()
	ns := cluster.Namespace(t)
	if _, err := cluster.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm", Namespace: ns},
		Data: map[string]string{"values.yaml": "a: 1"}, BinaryData: map[string][]byte{"blob": []byte("b: 2")}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cluster.Client.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: ns},
		StringData: map[string]string{"token": "tok"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	r := SourceReader{Client: cluster.Client}
	found, data, err := r.Get(ctx, config.KindConfigMap, ns, "cm")
	if err != nil || !found || data["values.yaml"] != "a: 1" || data["blob"] != "b: 2" {
		t.Errorf("ConfigMap: %v %v %v", found, data, err)
	}
	found, data, err = r.Get(ctx, config.KindSecret, ns, "s")
	if err != nil || !found || len(data) != 1 || data["token"] != "tok" {
		t.Errorf("Secret: %v %v %v", found, data, err)
	}
	for _, kind := range []string{config.KindSecret, config.KindConfigMap} {
		if found, _, err := r.Get(ctx, kind, ns, "absent"); found || err != nil {
			t.Errorf("missing %s: found %v, %v; want not found, no error", kind, found, err)
		}
	}
	if _, _, err := r.Get(ctx, "Deployment", ns, "cm"); err == nil {
		t.Error("a kind that is not a values source read without error")
	}
	if _, _, err := r.Get(ctx, config.KindSecret, "no-such-namespace-x", "s"); err != nil {
		t.Errorf("a Secret of a namespace that does not exist: %v (the API server says NotFound)", err)
	}
}

// TestNoSecretSources: under the configmap storage driver a Secret source
// fails with an error saying why, without being read; a ConfigMap is read.
func TestNoSecretSources(t *testing.T) {
	ns := cluster.Namespace(t)
	if _, err := cluster.Client.CoreV1().ConfigMaps(ns).Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm", Namespace: ns},
		Data: map[string]string{"values.yaml": "a: 1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	inner := &readCounter{ValuesSources: SourceReader{Client: cluster.Client}}
	r := NoSecretSources{Sources: inner}
	if _, _, err := r.Get(context.Background(), config.KindSecret, ns, "creds"); err == nil || !strings.Contains(err.Error(), "--storage-driver secret") || inner.reads != 0 {
		t.Errorf("Secret: %v after %d reads, want a refusal naming the flag and no read", err, inner.reads)
	}
	if found, _, err := r.Get(context.Background(), config.KindConfigMap, ns, "cm"); !found || err != nil || inner.reads != 1 {
		t.Errorf("ConfigMap: %v %v after %d reads", found, err, inner.reads)
	}
}
