package helmops

import (
	"context"
	"testing"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/kube"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/autox-dev/autox/internal/format"
)

// installLabelled installs hello the way another tool (or an older autox)
// would: with exactly these release labels, applied client-side, waiting
// for hooks only.
func installLabelled(t *testing.T, m *Manager, ns, name string, labels map[string]string) {
	t.Helper()
	cfg, err := m.actionConfig(context.Background(), ns, nil)
	if err != nil {
		t.Fatal(err)
	}
	in := action.NewInstall(cfg)
	in.ReleaseName, in.Namespace, in.Labels = name, ns, labels
	in.WaitStrategy, in.ServerSideApply = kube.HookOnlyStrategy, false
	if _, err := in.Run(desired(t, ns, name, "charts/hello", nil).Chart, nil); err != nil {
		t.Fatal(err)
	}
}

func names(rels []*format.Release) []string {
	out := make([]string, len(rels))
	for i, r := range rels {
		out[i] = r.Name + "@" + r.Instance
	}
	return out
}

func recordNames(recs []format.Record) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = r.Name + "@" + r.Instance
	}
	return out
}

func sameStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestInstances: two installations in one namespace each see only their own
// releases; a release of an older autox (no instance label) is the default
// instance's; a release with only one autox label is nobody's; every write
// (install, upgrade, rollback, reinstall) leaves the instance label on.
func TestInstances(t *testing.T) {
	ctx := context.Background()
	ns := cluster.Namespace(t)
	def := newManager(t, DriverSecret)
	blue, err := New(withClients(t, Options{RESTConfig: cluster.Config, Instance: "blue", MaxHistory: 5}))
	if err != nil {
		t.Fatal(err)
	}
	if def.Instance() != format.DefaultInstance || blue.Instance() != "blue" {
		t.Fatalf("Instance() = %q, %q", def.Instance(), blue.Instance())
	}
	if _, err := New(Options{RESTConfig: cluster.Config, Instance: "not a label value"}); err == nil {
		t.Error("an instance that is no valid label value must be refused")
	}

	if _, err := def.Install(ctx, desired(t, ns, "a", "charts/hello", nil)); err != nil {
		t.Fatal(err)
	}
	b := desired(t, ns, "b", "charts/hello", nil)
	b.ReleaseSpec = "rb"
	if _, err := blue.Install(ctx, b); err != nil {
		t.Fatal(err)
	}
	installLabelled(t, def, ns, "legacy", map[string]string{format.LabelSpec: "spec", format.LabelReleaseSpec: "rl"})
	installLabelled(t, def, ns, "half", map[string]string{format.LabelSpec: "spec"})
	installLabelled(t, def, ns, "empty", map[string]string{format.LabelSpec: "spec", format.LabelReleaseSpec: ""})

	wantDef, wantBlue := []string{"a@autox", "legacy@autox"}, []string{"b@blue"}
	for _, tc := range []struct {
		m    *Manager
		want []string
	}{{def, wantDef}, {blue, wantBlue}} {
		rels, err := tc.m.SpecReleases(ctx, []string{ns}, "spec")
		if err != nil || !sameStrings(names(rels), tc.want) {
			t.Errorf("%s: SpecReleases = %v, %v; want %v", tc.m.Instance(), names(rels), err, tc.want)
		}
		rels, err = tc.m.ManagedReleases(ctx, []string{ns})
		if err != nil || !sameStrings(names(rels), tc.want) {
			t.Errorf("%s: ManagedReleases = %v, %v; want %v", tc.m.Instance(), names(rels), err, tc.want)
		}
		inv, err := tc.m.NewInventory()
		if err != nil {
			t.Fatal(err)
		}
		recs, err := inv.Managed(ctx, []string{ns})
		if err != nil || !sameStrings(recordNames(recs), tc.want) {
			t.Errorf("%s: Inventory.Managed = %v, %v; want %v", tc.m.Instance(), recordNames(recs), err, tc.want)
		}
	}

	// Lookup sees every release of the name; the caller decides.
	for name, want := range map[string]struct {
		instance     string
		managed      bool
		ownedByAutox bool
	}{
		"b": {"blue", true, false}, "legacy": {format.DefaultInstance, true, true}, "half": {"", false, false}, "empty": {"", false, false},
	} {
		r, err := def.Lookup(ctx, ns, name)
		if err != nil || r == nil {
			t.Fatalf("Lookup(%s) = %v, %v", name, r, err)
		}
		if r.Instance != want.instance || r.Managed() != want.managed || r.OwnedBy(format.DefaultInstance) != want.ownedByAutox {
			t.Errorf("Lookup(%s): Instance %q Managed %v OwnedBy(autox) %v; want %+v", name, r.Instance, r.Managed(), r.OwnedBy(format.DefaultInstance), want)
		}
	}

	// What the driver wrote on the records: the instance label on autox's writes.
	instanceLabel := func(name string) string {
		t.Helper()
		list, err := cluster.Client.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{LabelSelector: "owner=helm,name=" + name})
		if err != nil || len(list.Items) == 0 {
			t.Fatalf("records of %s: %v", name, err)
		}
		newest, rev := "", ""
		for _, s := range list.Items {
			if s.Labels["version"] > rev { // revisions stay below 10 here
				rev, newest = s.Labels["version"], s.Labels[format.LabelInstance]
			}
		}
		return newest
	}
	if got := instanceLabel("a"); got != format.DefaultInstance {
		t.Errorf("install by the default instance wrote %s=%q", format.LabelInstance, got)
	}
	if _, err := def.Upgrade(ctx, desired(t, ns, "legacy", "charts/hello", map[string]interface{}{"greeting": "x"})); err != nil {
		t.Fatal(err)
	}
	if got := instanceLabel("legacy"); got != format.DefaultInstance {
		t.Errorf("upgrade wrote %s=%q", format.LabelInstance, got)
	}

	// Rollback copies the target revision's labels, the instance among them.
	b.Values = map[string]interface{}{"greeting": "v2"}
	if _, err := blue.Upgrade(ctx, b); err != nil {
		t.Fatal(err)
	}
	if err := blue.Rollback(ctx, ns, "b", 0, 1, nil); err != nil {
		t.Fatal(err)
	}
	r, err := blue.Lookup(ctx, ns, "b")
	if err != nil || r.Revision != 3 || !r.OwnedBy("blue") || r.Spec != "spec" || r.ReleaseSpec != "rb" || instanceLabel("b") != "blue" {
		t.Errorf("after rollback: %+v, %v, label %q", r, err, instanceLabel("b"))
	}
	if rev, err := blue.Reinstall(ctx, b); err != nil || rev != 1 || instanceLabel("b") != "blue" {
		t.Errorf("Reinstall = %d, %v, label %q", rev, err, instanceLabel("b"))
	}
}
