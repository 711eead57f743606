package helmops

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/autox-dev/autox/internal/format"
)

// TestFieldManager: the objects of an install, and of an upgrade, are
// managed by format.FieldManager whatever the binary is called (this test
// binary is helmops.test, the name Helm would use otherwise).
func TestFieldManager(t *testing.T) {
	ctx := context.Background()
	m := newManager(t, DriverSecret)
	ns := cluster.Namespace(t)
	if _, err := m.Install(ctx, desired(t, ns, "fm", "charts/hello", map[string]interface{}{"greeting": "hi"})); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Upgrade(ctx, desired(t, ns, "fm", "charts/hello", map[string]interface{}{"greeting": "hey"})); err != nil {
		t.Fatal(err)
	}
	cm, err := cluster.Client.CoreV1().ConfigMaps(ns).Get(ctx, "fm", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(cm.ManagedFields) == 0 {
		t.Fatal("no managedFields")
	}
	for _, f := range cm.ManagedFields {
		if f.Manager != format.FieldManager {
			t.Errorf("field manager %q (%s), want %q only", f.Manager, f.Operation, format.FieldManager)
		}
	}
}
