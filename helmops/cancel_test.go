package helmops

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

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
