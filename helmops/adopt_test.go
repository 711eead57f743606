package helmops

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/autox-dev/autox/internal/format"
)

// recordLabels returns the labels of one revision's record.
func recordLabels(t *testing.T, m *Manager, ns, name, rev string) map[string]string {
	t.Helper()
	key := "sh.helm.release.v1." + name + ".v" + rev
	if m.opts.StorageDriver == DriverConfigMap {
		c, err := cluster.Client.CoreV1().ConfigMaps(ns).Get(context.Background(), key, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return c.Labels
	}
	s, err := cluster.Client.CoreV1().Secrets(ns).Get(context.Background(), key, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s.Labels
}

// TestAdopt: an adoption relabels the newest record for the new owner and
// nothing else — no revision, the same deploy times, values, digest and
// revision labels, no hook run, the history as it was — and every reader
// then names the new owner; Helm's next upgrade copies its labels on. An
// adoption based on a read that is no longer true writes nothing: a newer
// revision, another owner, a record changed between the read and the write.
func TestAdopt(t *testing.T) {
	for _, driver := range []string{DriverSecret, DriverConfigMap} {
		t.Run(driver, func(t *testing.T) {
			ctx := context.Background()
			m := newManager(t, driver)
			ns := cluster.Namespace(t)
			d := desired(t, ns, "r", "charts/hooked", map[string]interface{}{"k": "v"})
			d.Spec, d.ReleaseSpec, d.Digest = "old", "x", "0123"
			if _, err := m.Install(ctx, d); err != nil {
				t.Fatal(err)
			}
			d.Values, d.Revision = map[string]interface{}{"k": "w"}, 2
			if _, err := m.Upgrade(ctx, d); err != nil {
				t.Fatal(err)
			}
			before, err := m.Lookup(ctx, ns, "r")
			if err != nil || before.Revision != 2 {
				t.Fatalf("before: %+v, %v", before, err)
			}
			hook, err := cluster.Client.CoreV1().ConfigMaps(ns).Get(ctx, "r-hook", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			oldLabels := recordLabels(t, m, ns, "r", "2")
			from := before.Owner()
			to := format.Owner{Spec: "new", ReleaseSpec: "y", Instance: format.DefaultInstance}

			if err := m.Adopt(ctx, Adoption{Namespace: ns, Name: "r", Revision: 1, From: from, To: to}); err == nil ||
				!strings.Contains(err.Error(), "newest revision is 2, not 1") {
				t.Errorf("adoption of an older revision: %v", err)
			}
			other := from
			other.Spec = "someone"
			if err := m.Adopt(ctx, Adoption{Namespace: ns, Name: "r", Revision: 2, From: other, To: to}); err == nil ||
				!strings.Contains(err.Error(), `names spec "old"`) {
				t.Errorf("adoption from an owner the record does not name: %v", err)
			}
			if got := recordLabels(t, m, ns, "r", "2"); got[format.LabelSpec] != "old" {
				t.Fatalf("a refused adoption wrote: %v", got)
			}

			if err := m.Adopt(ctx, Adoption{Namespace: ns, Name: "r", Revision: 2, From: from, To: to}); err != nil {
				t.Fatal(err)
			}
			after, err := m.Lookup(ctx, ns, "r")
			if err != nil || after.Spec != "new" || after.ReleaseSpec != "y" || after.Instance != format.DefaultInstance || after.Revision != 2 ||
				!after.FirstDeployed.Equal(before.FirstDeployed) || !after.Updated.Equal(before.Updated) || after.Values["k"] != "w" || !after.DeployedBefore {
				t.Fatalf("after the adoption: %+v, %v (before %+v)", after, err, before)
			}
			labels := recordLabels(t, m, ns, "r", "2")
			for _, k := range []string{format.LabelDigest, format.LabelRevision, "name", "owner", "status", "version", recordCreatedAt} {
				if labels[k] != oldLabels[k] {
					t.Errorf("label %s = %q, was %q", k, labels[k], oldLabels[k])
				}
			}
			if labels[recordModifiedAt] == "" {
				t.Error("no modifiedAt on the updated record")
			}
			if got := recordLabels(t, m, ns, "r", "1"); got[format.LabelSpec] != "old" {
				t.Errorf("the history was relabelled: %v", got)
			}
			if now, err := cluster.Client.CoreV1().ConfigMaps(ns).Get(ctx, "r-hook", metav1.GetOptions{}); err != nil || now.UID != hook.UID {
				t.Errorf("a hook ran: %v", err)
			}
			if rels, err := m.SpecReleases(ctx, []string{ns}, "new"); err != nil || len(rels) != 1 || rels[0].LastDeployedRevision != 2 {
				t.Errorf("SpecReleases(new) = %+v, %v", rels, err)
			}
			if rels, err := m.SpecReleases(ctx, []string{ns}, "old"); err != nil || len(rels) != 0 {
				t.Errorf("SpecReleases(old) = %+v, %v", rels, err)
			}
			inv, _ := m.NewInventory()
			if recs, err := inv.Managed(ctx, []string{ns}); err != nil || len(recs) != 1 || recs[0].Spec != "new" || recs[0].AutoxRevision != 2 {
				t.Errorf("Managed = %+v, %v", recs, err)
			}

			// The next revision, even one Helm itself makes without labels,
			// carries the new owner's.
			if err := helmUpgrade(t, m, ns, "r", nil, nil); err != nil {
				t.Fatal(err)
			}
			if got := recordLabels(t, m, ns, "r", "3"); got[format.LabelSpec] != "new" || got[format.LabelReleaseSpec] != "y" {
				t.Errorf("Helm's next revision has labels %v", got)
			}
		})
	}
}

// TestAdoptRefusesAChangedRecord: the record is written back on the
// condition that it is the one read; a writer in between makes the update
// fail, and its write stays.
func TestAdoptRefusesAChangedRecord(t *testing.T) {
	ctx := context.Background()
	m := newManager(t, DriverSecret)
	ns := cluster.Namespace(t)
	if _, err := m.Install(ctx, desired(t, ns, "r", "charts/hello", nil)); err != nil {
		t.Fatal(err)
	}
	key := "sh.helm.release.v1.r.v1"
	records := m.recordObjects(ns)
	labels, err := records.labels(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	s, err := cluster.Client.CoreV1().Secrets(ns).Get(ctx, key, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.Labels["someone"] = "else"
	if _, err := cluster.Client.CoreV1().Secrets(ns).Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	labels[format.LabelSpec] = "new"
	if err := records.relabel(ctx, labels); !apierrors.IsConflict(err) {
		t.Fatalf("relabel over a newer write: %v, want a conflict", err)
	}
	if got := recordLabels(t, m, ns, "r", "1"); got["someone"] != "else" || got[format.LabelSpec] != "spec" {
		t.Errorf("the other writer's labels were overwritten: %v", got)
	}
}

// TestDryRunReplacement: the new release of a release spec that moved to
// another namespace is proven before the old one goes. The old release's
// own cluster-scoped objects do not stop it (Helm's own check would), a
// chart that cannot render in the new namespace does, and so does an
// object someone else owns; nothing is written.
func TestDryRunReplacement(t *testing.T) {
	ctx := context.Background()
	m := newManager(t, DriverSecret)
	ns, moved := cluster.Namespace(t), cluster.Namespace(t)
	role := map[string]interface{}{"name": ns + "-role"}
	if _, err := m.Install(ctx, desired(t, ns, "r", "charts/clusterrole", role)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Uninstall(context.Background(), ns, "r", 0, nil) })
	d := desired(t, moved, "r", "charts/clusterrole", role)
	if err := m.DryRunReplacement(ctx, d, Ref{Namespace: ns, Name: "r"}); err != nil {
		t.Errorf("replacing the release that owns the ClusterRole: %v", err)
	}
	if err := m.dryRunInstall(ctx, d); err == nil || !strings.Contains(err.Error(), "ClusterRole") {
		t.Errorf("Helm's own check accepts another release's ClusterRole (%v): this test proves nothing", err)
	}
	if err := m.DryRunReplacement(ctx, d, Ref{Namespace: ns, Name: "other"}); err == nil ||
		!strings.Contains(err.Error(), "belongs to release "+ns+"/r") {
		t.Errorf("replacing another release, the ClusterRole of r is accepted: %v", err)
	}

	if _, err := cluster.Client.CoreV1().ConfigMaps(ns).Create(ctx, prerequisite(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Install(ctx, desired(t, ns, "p", "charts/prerequisite", nil)); err != nil {
		t.Fatal(err)
	}
	err := m.DryRunReplacement(ctx, desired(t, moved, "p", "charts/prerequisite", nil), Ref{Namespace: ns, Name: "p"})
	if err == nil || !strings.Contains(err.Error(), "ConfigMap prerequisite is missing in namespace "+moved) {
		t.Errorf("a chart that cannot render in the new namespace: %v", err)
	}
	if rels, err := m.ManagedReleases(ctx, []string{moved}); err != nil || len(rels) != 0 {
		t.Errorf("the dry runs wrote releases: %+v, %v", rels, err)
	}
}

func prerequisite() *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "prerequisite"}}
}
