package helmops

import (
	"context"
	"errors"
	"fmt"
	rbacv1 "k8s.io/api/rbac/v1"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/release/common"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/autox-dev/autox/internal/format"
	"github.com/autox-dev/autox/internal/testenv"
)

// reads is everything a reconcile and a pass read of one namespace, as
// one comparable text: the releases of each spec and object, each name
// looked up, which names are in use, and the records of the pass.
func reads(t *testing.T, m *Manager, ns string, specs []string, objs []format.Object, lookups []string) string {
	t.Helper()
	ctx := context.Background()
	var b strings.Builder
	for _, spec := range specs {
		rels, err := m.SpecReleases(ctx, []string{ns}, spec)
		fmt.Fprintf(&b, "SpecReleases(%s) err=%v\n", spec, err)
		for _, r := range rels {
			fmt.Fprintf(&b, "  %+v\n", *r)
		}
		for _, o := range objs {
			rels, err := m.ObjectReleases(ctx, []string{ns}, spec, o)
			fmt.Fprintf(&b, "ObjectReleases(%s, %s) err=%v\n", spec, o, err)
			for _, r := range rels {
				fmt.Fprintf(&b, "  %+v\n", *r)
			}
		}
	}
	for _, name := range lookups {
		r, err := m.Lookup(ctx, ns, name)
		fmt.Fprintf(&b, "Lookup(%s) err=%v\n", name, err)
		if r != nil {
			fmt.Fprintf(&b, "  %+v\n", *r)
		}
	}
	inUse, err := m.NamesInUse(ctx, ns, lookups)
	fmt.Fprintf(&b, "NamesInUse = %v, %v\n", inUse, err)
	inv, err := m.NewInventory()
	if err != nil {
		t.Fatal(err)
	}
	recs, err := inv.Managed(ctx, []string{ns})
	fmt.Fprintf(&b, "Managed err=%v\n", err)
	for _, r := range recs {
		fmt.Fprintf(&b, "  %+v\n", r)
	}
	return b.String()
}

// sameReads checks that a Manager reading through an index (caught up with
// the namespace) reads what one reading live does, with no LIST.
func sameReads(t *testing.T, live, indexed *Manager, ix *RecordIndex, counter *verbCounter, ns string, specs []string, objs []format.Object, lookups []string) {
	t.Helper()
	caughtUp(t, ix, ns)
	before := counter.snapshot()
	got := reads(t, indexed, ns, specs, objs, lookups)
	if n := counter.since(before, "list"); n != 0 {
		t.Errorf("the reads through the index made %d LISTs", n)
	}
	if want := reads(t, live, ns, specs, objs, lookups); got != want {
		t.Errorf("through the index:\n%s\nlive:\n%s", got, want)
	}
}

// TestIndexedReadsAreLiveReads: for releases in every state a reconcile
// tells apart — deployed, upgraded, failed upgrades (the last deployed
// values), pending (the age from the API server's times), uninstalling,
// another spec's, another instance's, a selector spec's object releases,
// releases without autox's labels — a Manager reading through a record
// index reads exactly what one reading live does, and makes no LIST. With
// both storage drivers.
func TestIndexedReadsAreLiveReads(t *testing.T) {
	for _, driver := range []string{DriverSecret, DriverConfigMap} {
		t.Run(driver, func(t *testing.T) {
			ctx := context.Background()
			m := newManager(t, driver)
			ns := cluster.Namespace(t)
			obj := format.Object{Namespace: ns, Name: "web"}
			if _, err := m.Install(ctx, desired(t, ns, "plain", "charts/hello", map[string]interface{}{"greeting": "hi"})); err != nil {
				t.Fatal(err)
			}
			if _, err := m.Install(ctx, desired(t, ns, "up", "charts/hello", nil)); err != nil {
				t.Fatal(err)
			}
			if _, err := m.Upgrade(ctx, desired(t, ns, "up", "charts/hello-v2", map[string]interface{}{"greeting": "x"})); err != nil {
				t.Fatal(err)
			}
			if _, err := m.Install(ctx, desired(t, ns, "failing", "charts/label", map[string]interface{}{"label": "first"})); err != nil {
				t.Fatal(err)
			}
			if _, err := m.Upgrade(ctx, desired(t, ns, "failing", "charts/label", map[string]interface{}{"label": secret})); err == nil {
				t.Fatal("the API server must refuse the label")
			}
			other := desired(t, ns, "other", "charts/hello", nil)
			other.Spec = "second"
			if _, err := m.Install(ctx, other); err != nil {
				t.Fatal(err)
			}
			sel := desired(t, ns, "web-job", "charts/hello", nil)
			sel.Object = obj
			if _, err := m.Install(ctx, sel); err != nil {
				t.Fatal(err)
			}
			blue := newInstance(t, driver, "blue")
			if _, err := blue.Install(ctx, desired(t, ns, "blue", "charts/hello", nil)); err != nil {
				t.Fatal(err)
			}
			if driver == DriverSecret {
				installLabelled(t, m, ns, "foreign", nil)
				// Left pending by a process that died, and one uninstalling.
				if _, err := m.Install(ctx, desired(t, ns, "pending", "charts/hello", nil)); err != nil {
					t.Fatal(err)
				}
				setStatus(t, ns, "pending", 1, "pending-install")
				if _, err := m.Install(ctx, desired(t, ns, "leaving", "charts/hello", nil)); err != nil {
					t.Fatal(err)
				}
				setStatus(t, ns, "leaving", 1, "uninstalling")
			}

			// Pages of 2 records (--record-list-page-size): the index's
			// LIST takes several, and misses none.
			indexed, ix, counter := indexedManager(t, driver, &indexOpts{pageSize: 2}, ns)
			lookups := []string{"plain", "up", "failing", "other", "web-job", "blue", "foreign", "pending", "leaving", "free"}
			sameReads(t, m, indexed, ix, counter, ns, []string{"spec", "second", "none"}, []format.Object{obj, {Namespace: ns, Name: "other"}}, lookups)

			// And after writes the index learns by its watch.
			if _, err := m.Upgrade(ctx, desired(t, ns, "plain", "charts/hello", map[string]interface{}{"greeting": "hey"})); err != nil {
				t.Fatal(err)
			}
			if err := m.Uninstall(ctx, ns, "up", 0, nil); err != nil {
				t.Fatal(err)
			}
			sameReads(t, m, indexed, ix, counter, ns, []string{"spec", "second"}, []format.Object{obj}, lookups)
		})
	}
}

func newInstance(t *testing.T, driver, instance string) *Manager {
	t.Helper()
	m, err := New(withClients(t, Options{RESTConfig: cluster.Config, StorageDriver: driver, Instance: instance, Timeout: time.Minute, MaxHistory: 3}))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// setStatus rewrites the status of one release record, its payload and its
// label, as a process that stopped half-way leaves it, with the driver's
// time labels an hour old.
func setStatus(t *testing.T, ns, name string, revision int, status string) {
	t.Helper()
	ctx := context.Background()
	key := recordKey(name, revision)
	s, err := cluster.Client.CoreV1().Secrets(ns).Get(ctx, key, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rls, err := decodeRecord(string(s.Data["release"]))
	if err != nil {
		t.Fatal(err)
	}
	rls.Info.Status = common.Status(status)
	data, err := encodeRecord(rls)
	if err != nil {
		t.Fatal(err)
	}
	s.Data["release"] = data
	s.Labels["status"] = status
	// Helm's driver leaves the time of an older write in the labels (see
	// Manager.modified): only the API server's times tell the age.
	s.Labels[recordModifiedAt] = fmt.Sprint(time.Now().Add(-time.Hour).Unix())
	s.Labels[recordCreatedAt] = s.Labels[recordModifiedAt]
	if _, err := cluster.Client.CoreV1().Secrets(ns).Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestStaleIndexNeverHidesAChange: an index that looks healthy but has
// stopped seeing changes (its watch delivers nothing) still never makes a
// reader take a release for another state, nor a write land on a release it
// no longer describes:
//   - a release uninstalled behind it is gone (its record read by name is
//     not there), and one taken over by `helm upgrade` without autox's
//     labels is no longer ours (its record was written since): both are read
//     live;
//   - a revision someone is writing right now (pending-upgrade, not
//     labelled ours) while the one the index knows is unchanged is not seen,
//     but the uninstall and the upgrade decided on the old revision fail
//     before writing, on Helm's own read of the history;
//   - a name taken behind its back looks free, and the install over it
//     fails writing nothing, on the API server's refusal to create revision
//     1's record again.
func TestStaleIndexNeverHidesAChange(t *testing.T) {
	ctx := context.Background()
	m := newManager(t, DriverSecret)
	ns := cluster.Namespace(t)
	for _, name := range []string{"gone", "taken", "inflight", "kept"} {
		if _, err := m.Install(ctx, desired(t, ns, name, "charts/label", map[string]interface{}{"label": "one"})); err != nil {
			t.Fatal(err)
		}
	}
	frozen := &indexOpts{faults: testenv.MetadataFaults{Frozen: &atomic.Bool{}}}
	frozen.faults.Frozen.Store(true)
	indexed, _, _ := indexedManager(t, DriverSecret, frozen, ns)

	if err := m.Uninstall(ctx, ns, "gone", 0, nil); err != nil {
		t.Fatal(err)
	}
	if err := helmUpgrade(t, m, ns, "taken", map[string]interface{}{"label": "two"},
		map[string]string{format.LabelSpec: "null", format.LabelReleaseSpec: "null", format.LabelInstance: "null"}); err != nil {
		t.Fatal(err)
	}
	inflight := copyRecord(t, ns, "inflight", 1, 2, map[string]string{"status": "pending-upgrade", format.LabelSpec: "", format.LabelReleaseSpec: ""})
	installLabelled(t, m, ns, "fresh", nil)

	rels, err := indexed.SpecReleases(ctx, []string{ns}, "spec")
	if err != nil {
		t.Fatal(err)
	}
	if got := names(rels); !sameStrings(got, []string{"inflight@autox", "kept@autox"}) {
		t.Errorf("SpecReleases through the stale index = %v; want inflight (unchanged as far as it can tell) and kept", got)
	}
	if r, err := indexed.Lookup(ctx, ns, "taken"); err != nil || r == nil || r.Revision != 2 || r.Managed() {
		t.Errorf("Lookup(taken) = %+v, %v; want revision 2, not autox's", r, err)
	}
	if r, err := indexed.Lookup(ctx, ns, "gone"); err != nil || r != nil {
		t.Errorf("Lookup(gone) = %+v, %v; want none", r, err)
	}

	var changed *ChangedError
	if err := indexed.Uninstall(ctx, ns, "inflight", 1, nil); !errors.As(err, &changed) {
		t.Errorf("uninstall decided on revision 1 while revision 2 exists: %v; want a ChangedError", err)
	}
	up := desired(t, ns, "inflight", "charts/label", map[string]interface{}{"label": "three"})
	up.Revision, up.Current = 2, 1
	if _, err := indexed.Upgrade(ctx, up); !errors.As(err, &changed) {
		t.Errorf("upgrade decided on revision 1 while revision 2 exists: %v; want a ChangedError", err)
	}
	after, err := cluster.Client.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{LabelSelector: "owner=helm,name=inflight"})
	if err != nil {
		t.Fatal(err)
	}
	if len(after.Items) != 2 {
		t.Errorf("records of inflight after the refused writes: %d, want its 2", len(after.Items))
	}
	for _, s := range after.Items {
		if s.Name == inflight.Name && s.ResourceVersion != inflight.ResourceVersion {
			t.Error("the revision being written by someone else was written")
		}
	}

	inUse, err := indexed.NamesInUse(ctx, ns, []string{"fresh"})
	if err != nil || inUse["fresh"] {
		t.Fatalf("NamesInUse(fresh) = %v, %v: the index was meant to be behind", inUse, err)
	}
	before, err := cluster.Client.CoreV1().Secrets(ns).Get(ctx, recordKey("fresh", 1), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := indexed.Install(ctx, desired(t, ns, "fresh", "charts/hello", map[string]interface{}{"greeting": "mine"})); err == nil {
		t.Error("an install over a name taken behind the index's back must fail")
	}
	if after, err := cluster.Client.CoreV1().Secrets(ns).Get(ctx, recordKey("fresh", 1), metav1.GetOptions{}); err != nil || after.ResourceVersion != before.ResourceVersion {
		t.Errorf("the other release's record was written: %v", err)
	}
}

// copyRecord writes revision to of a release as a copy of revision from
// with these labels changed ("" removes one) and returns it: a revision
// another client is writing.
func copyRecord(t *testing.T, ns, name string, from, to int, labels map[string]string) *metav1.ObjectMeta {
	t.Helper()
	ctx := context.Background()
	s, err := cluster.Client.CoreV1().Secrets(ns).Get(ctx, recordKey(name, from), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rls, err := decodeRecord(string(s.Data["release"]))
	if err != nil {
		t.Fatal(err)
	}
	rls.Version = to
	if st, ok := labels["status"]; ok {
		rls.Info.Status = common.Status(st)
	}
	data, err := encodeRecord(rls)
	if err != nil {
		t.Fatal(err)
	}
	s.ObjectMeta = metav1.ObjectMeta{Name: recordKey(name, to), Namespace: ns, Labels: s.Labels}
	s.Labels["version"] = fmt.Sprint(to)
	for k, v := range labels {
		if v == "" {
			delete(s.Labels, k)
		} else {
			s.Labels[k] = v
		}
	}
	s.Data["release"] = data
	created, err := cluster.Client.CoreV1().Secrets(ns).Create(ctx, s, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return &created.ObjectMeta
}

// TestUnusableIndexReadsLive: an index that cannot list (it never syncs),
// and one that has lost its watch, are never taken for "no records": the
// Manager reads with live LISTs, and sees what is there.
func TestUnusableIndexReadsLive(t *testing.T) {
	ctx := context.Background()
	m := newManager(t, DriverSecret)
	ns := cluster.Namespace(t)
	if _, err := m.Install(ctx, desired(t, ns, "r", "charts/hello", nil)); err != nil {
		t.Fatal(err)
	}

	t.Run("never synced", func(t *testing.T) {
		o := &indexOpts{faults: testenv.MetadataFaults{ListFails: &atomic.Bool{}}, noWait: true}
		o.faults.ListFails.Store(true)
		indexed, _, counter := indexedManager(t, DriverSecret, o, ns)
		before := counter.snapshot()
		rels, err := indexed.SpecReleases(ctx, []string{ns}, "spec")
		if err != nil || len(rels) != 1 {
			t.Errorf("SpecReleases through an unsynced index = %v, %v; want r", names(rels), err)
		}
		if inUse, err := indexed.NamesInUse(ctx, ns, []string{"r"}); err != nil || !inUse["r"] {
			t.Errorf("NamesInUse through an unsynced index = %v, %v; want r", inUse, err)
		}
		if counter.since(before, "list") == 0 {
			t.Error("an unsynced index was read")
		}
	})

	t.Run("watch lost", func(t *testing.T) {
		o := &indexOpts{faults: testenv.MetadataFaults{WatchFails: &atomic.Bool{}}}
		indexed, ix, _ := indexedManager(t, DriverSecret, o, ns)
		// The API server ends the watch and refuses new ones (as when it
		// is unreachable): no watch is open.
		o.faults.WatchFails.Store(true)
		o.faults.EndWatches()
		ri := ix.spaces.Get(ns)
		testenv.Eventually(t, time.Minute, "no watch open", func() (bool, error) { return !ri.Watching(), nil })
		installLabelled(t, m, ns, "later", nil)
		if inUse, err := indexed.NamesInUse(ctx, ns, []string{"later"}); err != nil || !inUse["later"] {
			t.Errorf("NamesInUse through an index without a watch = %v, %v; want later", inUse, err)
		}
	})
}

// TestOwnWritesAreRead: what this process has just written is read back
// even by an index that never shows it (its watch delivers nothing): the
// name is in use at once, the inventory lists it, and the release is read
// live after a short wait.
func TestOwnWritesAreRead(t *testing.T) {
	ctx := context.Background()
	ns := cluster.Namespace(t)
	frozen := &indexOpts{faults: testenv.MetadataFaults{Frozen: &atomic.Bool{}}}
	frozen.faults.Frozen.Store(true)
	indexed, _, _ := indexedManager(t, DriverSecret, frozen, ns)
	if _, err := indexed.Install(ctx, desired(t, ns, "mine", "charts/hello", nil)); err != nil {
		t.Fatal(err)
	}
	if inUse, err := indexed.NamesInUse(ctx, ns, []string{"mine"}); err != nil || !inUse["mine"] {
		t.Errorf("NamesInUse after its own install = %v, %v", inUse, err)
	}
	rels, err := indexed.SpecReleases(ctx, []string{ns}, "spec")
	if err != nil || len(rels) != 1 || rels[0].Revision != 1 {
		t.Fatalf("SpecReleases after its own install = %v, %v", names(rels), err)
	}
	// The pass's inventory too: a namespace must not look empty of it.
	inv, err := indexed.NewInventory()
	if err != nil {
		t.Fatal(err)
	}
	if recs, err := inv.Managed(ctx, []string{ns}); err != nil || len(recs) != 1 || recs[0].Name != "mine" {
		t.Errorf("Managed after its own install = %+v, %v; want release mine", recs, err)
	}
	if _, err := indexed.Upgrade(ctx, desired(t, ns, "mine", "charts/hello", map[string]interface{}{"greeting": "x"})); err != nil {
		t.Fatal(err)
	}
	if r, err := indexed.Lookup(ctx, ns, "mine"); err != nil || r == nil || r.Revision != 2 {
		t.Errorf("Lookup after its own upgrade = %+v, %v; want revision 2", r, err)
	}
}

// TestServiceAccountWritesAreRead: an install as a service account (a view
// of Manager.As) is this process's own write too: the Manager it was made
// of finds it at once, even with an index that never shows it.
func TestServiceAccountWritesAreRead(t *testing.T) {
	ctx := context.Background()
	ns := cluster.Namespace(t)
	frozen := &indexOpts{faults: testenv.MetadataFaults{Frozen: &atomic.Bool{}}}
	frozen.faults.Frozen.Store(true)
	indexed, _, _ := indexedManager(t, DriverSecret, frozen, ns)
	cluster.ServiceAccount(t, ns, "deployer", []rbacv1.PolicyRule{testenv.HelmRecords, testenv.Manage("", "configmaps", "serviceaccounts", "services")})
	as, err := indexed.As(ctx, ServiceAccount{Namespace: ns, Name: "deployer"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := as.Install(ctx, desired(t, ns, "theirs", "charts/hello", nil)); err != nil {
		t.Fatal(err)
	}
	if inUse, err := indexed.NamesInUse(ctx, ns, []string{"theirs"}); err != nil || !inUse["theirs"] {
		t.Errorf("NamesInUse after an install as a service account = %v, %v", inUse, err)
	}
	if rels, err := indexed.SpecReleases(ctx, []string{ns}, "spec"); err != nil || len(rels) != 1 || rels[0].Revision != 1 {
		t.Errorf("SpecReleases after an install as a service account = %v, %v", names(rels), err)
	}
	inv, err := indexed.NewInventory()
	if err != nil {
		t.Fatal(err)
	}
	if recs, err := inv.Managed(ctx, []string{ns}); err != nil || len(recs) != 1 || recs[0].Name != "theirs" {
		t.Errorf("Managed after an install as a service account = %+v, %v; want release theirs", recs, err)
	}
}

// TestUndecodableNewestRecordIsAnError: a newest record the index names
// whose content cannot be decoded makes the release an *UndecodableError
// (beside the readable releases), never a release judged by the revision
// before it.
func TestUndecodableNewestRecordIsAnError(t *testing.T) {
	ctx := context.Background()
	m := newManager(t, DriverSecret)
	ns := cluster.Namespace(t)
	if _, err := m.Install(ctx, desired(t, ns, "r", "charts/hello", nil)); err != nil {
		t.Fatal(err)
	}
	indexed, ix, _ := indexedManager(t, DriverSecret, &indexOpts{}, ns)
	broken := copyRecord(t, ns, "r", 1, 2, nil)
	s, err := cluster.Client.CoreV1().Secrets(ns).Get(ctx, broken.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.Data["release"] = []byte("H4sIAAAA-not-a-release")
	if _, err := cluster.Client.CoreV1().Secrets(ns).Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	caughtUp(t, ix, ns)
	rels, err := indexed.SpecReleases(ctx, []string{ns}, "spec")
	var u *UndecodableError
	if !errors.As(FailedReleases(err)[ns+"/r"], &u) || u.Revision != 2 || len(rels) != 0 {
		t.Errorf("SpecReleases = %v, %v; want release %s/r undecodable at revision 2", names(rels), err, ns)
	}
	if r, err := indexed.Lookup(ctx, ns, "r"); !errors.As(err, &u) {
		t.Errorf("Lookup = %+v, %v; want an *UndecodableError", r, err)
	}
}

// TestUpgradeReadsItsHistoryOnce: an upgrade decided on a revision reads
// the release's history live once (the check of its premise); Helm's
// second read of it before the first write (pruning to --max-history, the
// deployed revision among them) is answered from that read, and pruning
// still keeps --max-history revisions with the newest deployed.
func TestUpgradeReadsItsHistoryOnce(t *testing.T) {
	ctx := context.Background()
	ns := cluster.Namespace(t)
	m, _, counter := indexedManager(t, DriverSecret, &indexOpts{}, ns)
	if _, err := m.Install(ctx, desired(t, ns, "h", "charts/hello", nil)); err != nil {
		t.Fatal(err)
	}
	byName := []string{"/namespaces/" + ns + "/secrets?", "name=h"}
	for rev := 1; rev <= 4; rev++ { // MaxHistory 3: the last two prune
		d := desired(t, ns, "h", "charts/hello", map[string]interface{}{"greeting": fmt.Sprint(rev)})
		d.Current, d.Revision = rev, rev+1
		before := counter.listsMatching(byName...)
		if got, err := m.Upgrade(ctx, d); err != nil || got != rev+1 {
			t.Fatalf("upgrade from revision %d = %d, %v", rev, got, err)
		}
		if n := counter.listsMatching(byName...) - before; n != 1 {
			t.Errorf("upgrade from revision %d listed the release's records %d times; want 1 (the premise's read)", rev, n)
		}
	}
	list, err := cluster.Client.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{LabelSelector: "owner=helm,name=h"})
	if err != nil {
		t.Fatal(err)
	}
	status := map[string]string{}
	for _, s := range list.Items {
		status[s.Labels["version"]] = s.Labels["status"]
	}
	if want := map[string]string{"3": "superseded", "4": "superseded", "5": "deployed"}; !reflect.DeepEqual(status, want) {
		t.Errorf("records after pruning = %v; want %v", status, want)
	}
}

// TestOwnAdoptionIsRead: a release this process has just adopted is read
// as its new owner's at once, even through an index that never shows the
// relabel (its watch delivers nothing), and no longer as the old owner's.
func TestOwnAdoptionIsRead(t *testing.T) {
	ctx := context.Background()
	ns := cluster.Namespace(t)
	frozen := &indexOpts{faults: testenv.MetadataFaults{Frozen: &atomic.Bool{}}}
	indexed, ix, _ := indexedManager(t, DriverSecret, frozen, ns)
	if _, err := indexed.Install(ctx, desired(t, ns, "mine", "charts/hello", nil)); err != nil {
		t.Fatal(err)
	}
	caughtUp(t, ix, ns)
	frozen.faults.Frozen.Store(true)
	before, err := indexed.Lookup(ctx, ns, "mine")
	if err != nil || before == nil {
		t.Fatalf("Lookup = %+v, %v", before, err)
	}
	to := format.Owner{Spec: "new", ReleaseSpec: "y", Instance: format.DefaultInstance}
	if err := indexed.Adopt(ctx, Adoption{Namespace: ns, Name: "mine", Revision: 1, From: before.Owner(), To: to}); err != nil {
		t.Fatal(err)
	}
	if rels, err := indexed.SpecReleases(ctx, []string{ns}, "new"); err != nil || len(rels) != 1 || rels[0].Spec != "new" {
		t.Errorf("the new owner's releases after the adoption = %v, %v; want mine", names(rels), err)
	}
	if rels, err := indexed.SpecReleases(ctx, []string{ns}, "spec"); err != nil || len(rels) != 0 {
		t.Errorf("the old owner's releases after the adoption = %v, %v; want none", names(rels), err)
	}
}
