package helmops

import (
	"context"
	"testing"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/kube"
	"helm.sh/helm/v4/pkg/storage/driver"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestUpgradeFollowsTheRecordedApplyMethod: autox installs client-side; a
// person then upgrades the release with `helm upgrade --server-side` (Helm
// 4 records "ssa"), and someone else (kubectl, its own field manager) sets a
// field server-side. autox's next upgrade follows the record, applies
// server-side and forces the conflict: the config's value wins, and the
// release stays server-side. Without a record saying so (an install) it
// applies client-side.
func TestUpgradeFollowsTheRecordedApplyMethod(t *testing.T) {
	ctx := context.Background()
	m := newManager(t, DriverSecret)
	ns := cluster.Namespace(t)
	store := driver.NewSecrets(cluster.Client.CoreV1().Secrets(ns))
	method := func(rev string) string {
		t.Helper()
		got, err := store.Get("sh.helm.release.v1.s.v" + rev)
		if err != nil {
			t.Fatal(err)
		}
		rel, err := asV1(got)
		if err != nil {
			t.Fatal(err)
		}
		return rel.ApplyMethod
	}
	if _, err := m.Install(ctx, desired(t, ns, "s", "charts/label", map[string]interface{}{"label": "one"})); err != nil {
		t.Fatal(err)
	}
	if got := method("1"); got != "csa" {
		t.Fatalf("autox's install applied %q, want csa", got)
	}

	// The person's `helm upgrade --server-side`.
	cfg, err := m.actionConfig(ctx, ns, nil)
	if err != nil {
		t.Fatal(err)
	}
	up := action.NewUpgrade(cfg)
	up.Namespace, up.ResetValues, up.WaitStrategy, up.ServerSideApply = ns, true, kube.HookOnlyStrategy, "true"
	if _, err := up.Run("s", desired(t, ns, "s", "charts/label", nil).Chart, map[string]interface{}{"label": "two"}); err != nil {
		t.Fatal(err)
	}
	// Another manager takes the field over.
	edit := []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"s"},"data":{"label":"edited"}}`)
	force := true
	if _, err := cluster.Client.CoreV1().ConfigMaps(ns).Patch(ctx, "s", types.ApplyPatchType, edit,
		metav1.PatchOptions{FieldManager: "kubectl", Force: &force}); err != nil {
		t.Fatal(err)
	}

	d := desired(t, ns, "s", "charts/label", map[string]interface{}{"label": "three"})
	d.Current, d.Revision = 2, 3
	if _, err := m.Upgrade(ctx, d); err != nil {
		t.Fatalf("autox's upgrade of a release last applied server-side: %v", err)
	}
	if got := method("3"); got != "ssa" {
		t.Errorf("autox's upgrade applied %q, want ssa (as the newest revision was)", got)
	}
	cm, err := cluster.Client.CoreV1().ConfigMaps(ns).Get(ctx, "s", metav1.GetOptions{})
	if err != nil || cm.Data["label"] != "three" {
		t.Errorf("the ConfigMap after autox's upgrade: %v, %v; want the config's value", cm.Data, err)
	}
}
