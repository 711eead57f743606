package helmops

import (
	"context"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/release/common"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// releaseRecords returns the names of a release's storage records.
func releaseRecords(t *testing.T, ns, name string) []string {
	t.Helper()
	list, err := cluster.Client.CoreV1().Secrets(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "owner=helm,name=" + name})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range list.Items {
		out = append(out, s.Name+"@"+s.ResourceVersion)
	}
	return out
}

// TestReinstallKeepsWhatItCannotReplace: a reinstall whose new release does
// not render (a required value missing), maps to no resource (an unknown
// kind) or is refused by the API server (a bad label value) leaves the
// running release as it was; a good reinstall replaces it (revision 1, new
// first-deployed time).
func TestReinstallKeepsWhatItCannotReplace(t *testing.T) {
	ctx := context.Background()
	m := newManager(t, DriverSecret)
	ns := cluster.Namespace(t)
	if _, err := m.Install(ctx, desired(t, ns, "r", "charts/label", nil)); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Upgrade(ctx, desired(t, ns, "r", "charts/label", map[string]interface{}{"label": "second"})); err != nil {
		t.Fatal(err)
	}
	before, err := m.Lookup(ctx, ns, "r")
	if err != nil || before.Revision != 2 || before.Status != common.StatusDeployed {
		t.Fatalf("before: %+v, %v", before, err)
	}
	records := releaseRecords(t, ns, "r")

	for _, tc := range []struct {
		name, chart string
		values      map[string]interface{}
		cause       string
	}{
		{"does not render", "charts/broken", nil, "value .needed is required"},
		{"unknown kind", "charts/unknown-kind", nil, "Thing"},
		{"refused by the API server", "charts/label", map[string]interface{}{"label": "Not A Label Value!"}, "Invalid value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := m.Reinstall(ctx, desired(t, ns, "r", tc.chart, tc.values))
			want := "cannot reinstall release " + ns + "/r: the new release does not render or validate; the running release is kept: "
			if err == nil || !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), tc.cause) {
				t.Fatalf("Reinstall error = %v, want %q ... %q", err, want, tc.cause)
			}
			after, err := m.Lookup(ctx, ns, "r")
			if err != nil || after == nil || after.Revision != 2 || after.Status != common.StatusDeployed ||
				!after.FirstDeployed.Equal(before.FirstDeployed) || after.Values["label"] != "second" {
				t.Fatalf("the running release changed: %+v, %v", after, err)
			}
			cm, err := cluster.Client.CoreV1().ConfigMaps(ns).Get(ctx, "r", metav1.GetOptions{})
			if err != nil || cm.Labels["x"] != "second" {
				t.Fatalf("the running release's object changed: %v, %v", cm, err)
			}
			if got := releaseRecords(t, ns, "r"); strings.Join(got, ",") != strings.Join(records, ",") {
				t.Fatalf("release records written: %v, before %v", got, records)
			}
		})
	}

	// The same chart, with values that make it fail to render.
	if _, err := m.Install(ctx, desired(t, ns, "b", "charts/broken", map[string]interface{}{"needed": "present"})); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Reinstall(ctx, desired(t, ns, "b", "charts/broken", map[string]interface{}{"other": "x"})); err == nil ||
		!strings.Contains(err.Error(), "the running release is kept") {
		t.Fatalf("Reinstall without .needed = %v", err)
	}
	if b, err := m.Lookup(ctx, ns, "b"); err != nil || b == nil || b.Revision != 1 || b.Status != common.StatusDeployed || b.Values["needed"] != "present" {
		t.Fatalf("the running release changed: %+v, %v", b, err)
	}

	// The dry run itself: the name is taken, yet it passes, and it writes nothing.
	if err := m.dryRunInstall(ctx, desired(t, ns, "r", "charts/label", map[string]interface{}{"label": "third"})); err != nil {
		t.Fatalf("dry run of a good release under the taken name: %v", err)
	}
	if got := releaseRecords(t, ns, "r"); strings.Join(got, ",") != strings.Join(records, ",") {
		t.Fatalf("the dry run wrote release records: %v, before %v", got, records)
	}

	rev, err := m.Reinstall(ctx, desired(t, ns, "r", "charts/label", map[string]interface{}{"label": "third"}))
	if err != nil || rev != 1 {
		t.Fatalf("good Reinstall = %d, %v", rev, err)
	}
	after, err := m.Lookup(ctx, ns, "r")
	if err != nil || after.Revision != 1 || after.Status != common.StatusDeployed || !after.FirstDeployed.After(before.FirstDeployed) {
		t.Fatalf("after a good reinstall: %+v (first deployed before: %v), %v", after, before.FirstDeployed, err)
	}
}
