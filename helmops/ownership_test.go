package helmops

import (
	"context"
	"fmt"
	"net/http"
	"reflect"
	"strconv"
	"sync"
	"testing"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/kube"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/autox-dev/autox/internal/format"
)

// helmUpgrade upgrades a release the way a person with the helm CLI (or an
// old Helm client) would: Helm's own upgrade, with exactly these --labels,
// where "null" removes a label, and the Helm 4 CLI's defaults (no --wait:
// hooks only; applied as the release was last).
func helmUpgrade(t *testing.T, m *Manager, ns, name string, values map[string]interface{}, labels map[string]string) error {
	t.Helper()
	cfg, err := m.actionConfig(context.Background(), ns, nil)
	if err != nil {
		t.Fatal(err)
	}
	up := action.NewUpgrade(cfg)
	up.Namespace, up.Labels, up.ResetValues = ns, labels, true
	up.WaitStrategy = kube.HookOnlyStrategy
	_, err = up.Run(name, desired(t, ns, name, "charts/label", nil).Chart, values)
	return err
}

// newestRecordLabels returns the labels of a release's newest record.
func newestRecordLabels(t *testing.T, ns, name string) map[string]string {
	t.Helper()
	list, err := cluster.Client.CoreV1().Secrets(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "owner=helm,name=" + name})
	if err != nil {
		t.Fatal(err)
	}
	var newest map[string]string
	top := 0
	for _, s := range list.Items {
		if v, _ := strconv.Atoi(s.Labels["version"]); v > top {
			top, newest = v, s.Labels
		}
	}
	return newest
}

func findRelease(rels []*format.Release, name string) *format.Release {
	for _, r := range rels {
		if r.Name == name {
			return r
		}
	}
	return nil
}

// TestNewestRevisionDecidesOwnership: a release autox installed, then
// upgraded by Helm itself with other labels, is judged on that newest
// revision by SpecReleases, Inventory.Managed and ManagedReleases alike:
// without autox's labels (both, or one), with another instance's, it is not
// returned, though its older revisions carry autox's labels; with another
// spec's it is that spec's. A Helm upgrade that keeps (or puts back) autox's
// labels leaves it autox's, and a release labelled again after an unlabelled
// revision is summarised from its whole history. Lookup always finds it. A
// Manager reading through a record index reads all of it the same.
func TestNewestRevisionDecidesOwnership(t *testing.T) {
	ctx := context.Background()
	m := newManager(t, DriverSecret)
	ours := map[string]string{format.LabelSpec: "spec", format.LabelReleaseSpec: "rs", format.LabelInstance: format.DefaultInstance}
	unlabel := map[string]string{format.LabelSpec: "null", format.LabelReleaseSpec: "null", format.LabelInstance: "null"}
	type upgrade struct {
		labels map[string]string
		label  string // the chart's label value; secret makes the upgrade fail
	}
	for _, tc := range []struct {
		name     string
		upgrades []upgrade
		// what the readers of this instance say of the newest revision
		inSpec, inSpecOther, managed bool
	}{
		{"helm upgrade keeps the labels", []upgrade{{ours, "two"}}, true, false, true},
		{"autox labels removed", []upgrade{{unlabel, "two"}}, false, false, false},
		{"spec label removed", []upgrade{{map[string]string{format.LabelSpec: "null"}, "two"}}, false, false, false},
		{"another instance", []upgrade{{map[string]string{format.LabelInstance: "blue"}, "two"}}, false, false, false},
		{"another spec", []upgrade{{map[string]string{format.LabelSpec: "other"}, "two"}}, false, true, true},
		{"labelled again after an unlabelled revision", []upgrade{{unlabel, "two"}, {ours, secret}}, true, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := cluster.Namespace(t)
			d := desired(t, ns, "r", "charts/label", map[string]interface{}{"label": "one"})
			if _, err := m.Install(ctx, d); err != nil {
				t.Fatal(err)
			}
			for _, u := range tc.upgrades {
				err := helmUpgrade(t, m, ns, "r", map[string]interface{}{"label": u.label}, u.labels)
				if (err != nil) != (u.label == secret) {
					t.Fatalf("helm upgrade: %v", err)
				}
				// What Helm 3.22 wrote: "null" removes the label.
				got := newestRecordLabels(t, ns, "r")
				for k, v := range u.labels {
					if gv, ok := got[k]; (v == "null" && ok) || (v != "null" && gv != v) {
						t.Fatalf("newest record's labels %v; upgrade asked for %v", got, u.labels)
					}
				}
			}
			newest := len(tc.upgrades) + 1

			spec, err := m.SpecReleases(ctx, []string{ns}, "spec")
			if err != nil {
				t.Fatal(err)
			}
			other, err := m.SpecReleases(ctx, []string{ns}, "other")
			if err != nil {
				t.Fatal(err)
			}
			managed, err := m.ManagedReleases(ctx, []string{ns})
			if err != nil {
				t.Fatal(err)
			}
			inv, err := m.NewInventory()
			if err != nil {
				t.Fatal(err)
			}
			recs, err := inv.Managed(ctx, []string{ns})
			if err != nil {
				t.Fatal(err)
			}
			looked, err := m.Lookup(ctx, ns, "r")
			if err != nil || looked == nil || looked.Revision != newest || looked.OwnedBy(format.DefaultInstance) != tc.managed {
				t.Fatalf("Lookup = %+v, %v; want revision %d, ours %v", looked, err, newest, tc.managed)
			}

			for _, got := range []struct {
				what string
				rel  *format.Release
				want bool
			}{
				{`SpecReleases("spec")`, findRelease(spec, "r"), tc.inSpec},
				{`SpecReleases("other")`, findRelease(other, "r"), tc.inSpecOther},
				{"ManagedReleases", findRelease(managed, "r"), tc.managed},
			} {
				if (got.rel != nil) != got.want {
					t.Errorf("%s returned the release: %v, want %v", got.what, got.rel != nil, got.want)
					continue
				}
				if got.rel == nil {
					continue
				}
				// The same release as Lookup sees, from the whole history.
				if s, l := summary(got.rel), summary(looked); s != l {
					t.Errorf("%s = %s; Lookup = %s", got.what, s, l)
				}
			}
			// A Manager reading through a record index reads the same.
			indexed, ix, counter := indexedManager(t, DriverSecret, &indexOpts{}, ns)
			sameReads(t, m, indexed, ix, counter, ns, []string{"spec", "other"}, nil, []string{"r"})
			if len(recs) != 0 != tc.managed {
				t.Errorf("Inventory.Managed = %+v; want the release: %v", recs, tc.managed)
			} else if tc.managed && (recs[0].Revision != newest || recs[0].Spec != looked.Spec || string(recs[0].Status) != looked.Status.String()) {
				t.Errorf("Inventory.Managed = %+v; Lookup = %+v", recs[0], looked)
			}
		})
	}
}

// summary is what a reader says of a release, values of the last deployed
// revision included, as one comparable string.
func summary(r *format.Release) string {
	return fmt.Sprintf("rev %d %s spec %s/%s@%s deployed before %v, last deployed %d with %v, values %v",
		r.Revision, r.Status, r.Spec, r.ReleaseSpec, r.Instance, r.DeployedBefore, r.LastDeployedRevision, r.DeployedValues, r.Values)
}

// countRequests counts every request a Manager sends.
type countRequests struct {
	next http.RoundTripper
	mu   sync.Mutex
	n    int
}

func (c *countRequests) RoundTrip(req *http.Request) (*http.Response, error) {
	c.mu.Lock()
	c.n++
	c.mu.Unlock()
	return c.next.RoundTrip(req)
}

func (c *countRequests) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// TestInventoryCostsOneListPerNamespace: judging every release on its newest
// revision costs the quiet pass nothing more: one request per namespace,
// however many releases and revisions (autox's or not) are there. The
// requests are counted on the clients given to New, so the test also fails
// when the Manager reads through clients of its own.
func TestInventoryCostsOneListPerNamespace(t *testing.T) {
	ctx := context.Background()
	m := newManager(t, DriverSecret)
	namespaces := []string{cluster.Namespace(t), cluster.Namespace(t)}
	for _, ns := range namespaces {
		for _, name := range []string{"a", "b"} {
			if _, err := m.Install(ctx, desired(t, ns, name, "charts/hello", nil)); err != nil {
				t.Fatal(err)
			}
			if _, err := m.Upgrade(ctx, desired(t, ns, name, "charts/hello", map[string]interface{}{"greeting": "x"})); err != nil {
				t.Fatal(err)
			}
		}
		installLabelled(t, m, ns, "foreign", nil)
	}
	counter := &countRequests{}
	cfg := rest.CopyConfig(cluster.Config)
	cfg.WrapTransport = func(next http.RoundTripper) http.RoundTripper { counter.next = next; return counter }
	through := withClients(t, Options{RESTConfig: cfg})
	counted, err := New(Options{RESTConfig: cluster.Config, Clientset: through.Clientset, Metadata: through.Metadata})
	if err != nil {
		t.Fatal(err)
	}
	inv, err := counted.NewInventory()
	if err != nil {
		t.Fatal(err)
	}
	recs, err := inv.Managed(ctx, namespaces)
	if err != nil || len(recs) != 4 {
		t.Fatalf("Managed = %+v, %v", recs, err)
	}
	if got := counter.count(); got != len(namespaces) {
		t.Errorf("Inventory.Managed sent %d requests for %d namespaces", got, len(namespaces))
	}
}

// TestDeployedValues: every reader gives the values of the last deployed
// revision while the latest one is not it (failed upgrades here), so that
// callers can redact what a rollback or the next upgrade may quote; none
// while the latest revision is the deployed one. Through a record index too.
func TestDeployedValues(t *testing.T) {
	ctx := context.Background()
	m := newManager(t, DriverSecret)
	ns := cluster.Namespace(t)
	first := map[string]interface{}{"label": "first"}
	label := func(v string) Target { return desired(t, ns, "r", "charts/label", map[string]interface{}{"label": v}) }
	readers := map[string]func() *format.Release{
		"Lookup": func() *format.Release {
			r, err := m.Lookup(ctx, ns, "r")
			if err != nil {
				t.Fatal(err)
			}
			return r
		},
		"SpecReleases": func() *format.Release {
			rels, err := m.SpecReleases(ctx, []string{ns}, "spec")
			if err != nil {
				t.Fatal(err)
			}
			return findRelease(rels, "r")
		},
		"ManagedReleases": func() *format.Release {
			rels, err := m.ManagedReleases(ctx, []string{ns})
			if err != nil {
				t.Fatal(err)
			}
			return findRelease(rels, "r")
		},
	}
	// The same through a record index, caught up with each step.
	indexed, ix, _ := indexedManager(t, DriverSecret, &indexOpts{}, ns)
	readers["SpecReleases through the index"] = func() *format.Release {
		caughtUp(t, ix, ns)
		rels, err := indexed.SpecReleases(ctx, []string{ns}, "spec")
		if err != nil {
			t.Fatal(err)
		}
		return findRelease(rels, "r")
	}
	readers["Lookup through the index"] = func() *format.Release {
		caughtUp(t, ix, ns)
		r, err := indexed.Lookup(ctx, ns, "r")
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	check := func(step string, revision, lastDeployed int, deployedValues map[string]interface{}) {
		t.Helper()
		for name, read := range readers {
			r := read()
			if r == nil || r.Revision != revision || r.LastDeployedRevision != lastDeployed || !reflect.DeepEqual(r.DeployedValues, deployedValues) {
				t.Errorf("%s, %s: %+v; want revision %d, last deployed %d with %v", step, name, r, revision, lastDeployed, deployedValues)
			}
		}
	}

	if _, err := m.Install(ctx, label("first")); err != nil {
		t.Fatal(err)
	}
	check("installed", 1, 1, nil)
	for i := 2; i <= 3; i++ {
		if _, err := m.Upgrade(ctx, label(secret)); err == nil {
			t.Fatal("the API server must refuse the label")
		}
		check(fmt.Sprintf("failed upgrade to %d", i), i, 1, first)
	}
	if _, err := m.Upgrade(ctx, label("second")); err != nil {
		t.Fatal(err)
	}
	check("upgraded", 4, 4, nil)
}
