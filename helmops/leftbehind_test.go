package helmops

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestUninstallReportsWhatItLeaves: an object a release's manifest names
// but that lacks Helm's marks of the release (here its managed-by label was
// taken off) is left by Helm 4's uninstall, and autox says so: a warning
// naming the release and the object; the release's other objects go, and
// the release is gone. Helm's slog output never becomes the process's
// default logger.
func TestUninstallReportsWhatItLeaves(t *testing.T) {
	ctx := context.Background()
	defaultLog := slog.Default().Handler()
	var logs logBuffer
	m, err := New(withClients(t, Options{RESTConfig: cluster.Config, StorageDriver: DriverSecret, Timeout: time.Minute, MaxHistory: 3,
		Log: zerolog.New(&logs).Level(zerolog.InfoLevel)}))
	if err != nil {
		t.Fatal(err)
	}
	ns := cluster.Namespace(t)
	if _, err := m.Install(ctx, desired(t, ns, "u", "charts/hello", nil)); err != nil {
		t.Fatal(err)
	}
	unmark, _ := json.Marshal(map[string]interface{}{"metadata": map[string]interface{}{"labels": map[string]interface{}{"app.kubernetes.io/managed-by": nil}}})
	if _, err := cluster.Client.CoreV1().ConfigMaps(ns).Patch(ctx, "u", types.MergePatchType, unmark, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := m.Uninstall(ctx, ns, "u", 1, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := cluster.Client.CoreV1().ConfigMaps(ns).Get(ctx, "u", metav1.GetOptions{}); err != nil {
		t.Errorf("the ConfigMap without Helm's marks: %v, want it left in place", err)
	}
	if _, err := cluster.Client.CoreV1().ServiceAccounts(ns).Get(ctx, "u", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the release's ServiceAccount: %v, want it deleted", err)
	}
	if r, err := m.Lookup(ctx, ns, "u"); err != nil || r != nil {
		t.Errorf("the release after its uninstall: %+v, %v", r, err)
	}
	out := logs.String()
	if !strings.Contains(out, `"level":"warn"`) || !strings.Contains(out, `"release":"u"`) || !strings.Contains(out, `"objects":["ConfigMap/u"]`) {
		t.Errorf("the log does not name the object left:\n%s", out)
	}
	if slog.Default().Handler() != defaultLog {
		t.Error("Helm's operations changed slog.Default: Helm's package-level lines would then bypass RouteStdLog's withholding")
	}
}
