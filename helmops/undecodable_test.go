package helmops

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	release "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage"
	"helm.sh/helm/v4/pkg/storage/driver"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestJudgeNewest: the revisions the metadata LIST saw against those a read
// decoded or not. A newest revision that did not decode is an error, never
// a fall-back to the one before.
func TestJudgeNewest(t *testing.T) {
	rels := func(vs ...int) []*release.Release {
		var out []*release.Release
		for _, v := range vs {
			out = append(out, &release.Release{Version: v})
		}
		return out
	}
	bad := func(vs ...int) []undecoded {
		var out []undecoded
		for _, v := range vs {
			out = append(out, undecoded{object: fmt.Sprintf("sh.helm.release.v1.r.v%d", v), revision: v})
		}
		return out
	}
	for _, c := range []struct {
		name      string
		all       []int
		decoded   []*release.Release
		undecoded []undecoded
		want      newestOf
		record    string
	}{
		{"no record left", nil, nil, nil, releaseGone, ""},
		{"all decoded", []int{1, 2, 3}, rels(1, 2, 3), nil, releaseComplete, ""},
		{"the newest did not decode", []int{1, 2, 3}, rels(1, 2), bad(3), releaseUndecodable, "sh.helm.release.v1.r.v3"},
		{"the only one did not decode", []int{1}, nil, bad(1), releaseUndecodable, "sh.helm.release.v1.r.v1"},
		{"an older one did not decode", []int{1, 2, 3}, rels(1, 3), bad(2), releaseComplete, ""},
		{"the newest is not in the group", []int{1, 2, 3}, rels(1, 2), nil, releaseNotInGroup, ""},
		{"an older one is not in the group", []int{1, 2, 3}, rels(2, 3), nil, releasePartial, ""},
		{"an older one is not in the group, the newest did not decode", []int{1, 2, 3}, rels(2), bad(3), releaseUndecodable, "sh.helm.release.v1.r.v3"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, u := judgeNewest(c.all, c.decoded, c.undecoded)
			if got != c.want {
				t.Errorf("judgeNewest = %d, want %d", got, c.want)
			}
			if (u != nil) != (c.record != "") || (u != nil && u.object != c.record) {
				t.Errorf("undecoded record %+v, want %q", u, c.record)
			}
		})
	}
}

// TestDecodeRecordRefusesWithoutQuoting: each layer of Helm's encoding that
// fails is named, and nothing of the content is quoted.
func TestDecodeRecordRefusesWithoutQuoting(t *testing.T) {
	b64 := base64.StdEncoding.EncodeToString
	for _, c := range []struct{ name, data, want string }{
		{"not base64", "!!s3cret-value!!", "not base64"},
		{"gzip magic, then garbage", b64([]byte("\x1f\x8b\x08s3cret-value")), "gzip"},
		{"not JSON", b64([]byte(`{"name": s3cret-value}`)), "not a Helm release"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := decodeRecord(c.data)
			if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "s3cret") {
				t.Errorf("decodeRecord = %v, want an error with %q and no content", err, c.want)
			}
		})
	}
}

// corruptNewest replaces the release data of the newest record of release
// name in ns by garbage and returns the record's name.
func corruptNewest(t *testing.T, storageDriver, ns, name string, revision int) string {
	t.Helper()
	ctx := context.Background()
	key := fmt.Sprintf("sh.helm.release.v1.%s.v%d", name, revision)
	if storageDriver == DriverConfigMap {
		c := cluster.Client.CoreV1().ConfigMaps(ns)
		cm, err := c.Get(ctx, key, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cm.Data["release"] = "!!garbage!!"
		if _, err := c.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		return key
	}
	c := cluster.Client.CoreV1().Secrets(ns)
	s, err := c.Get(ctx, key, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.Data = map[string][]byte{"release": []byte("!!garbage!!")}
	if _, err := c.Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	return key
}

// twoRevisions installs release name in ns and upgrades it once: its records
// are revisions 1 and 2.
func twoRevisions(t *testing.T, m *Manager, ns, name, upgradeChart string) {
	t.Helper()
	ctx := context.Background()
	if _, err := m.Install(ctx, desired(t, ns, name, "charts/hello", map[string]interface{}{"greeting": "hi"})); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Upgrade(ctx, desired(t, ns, name, upgradeChart, map[string]interface{}{"greeting": "hey"})); err != nil {
		t.Fatal(err)
	}
}

// helmDriver is Helm's own storage driver of that kind for ns.
func helmDriver(storageDriver, ns string) driver.Driver {
	if storageDriver == DriverConfigMap {
		return driver.NewConfigMaps(cluster.Client.CoreV1().ConfigMaps(ns))
	}
	return driver.NewSecrets(cluster.Client.CoreV1().Secrets(ns))
}

// TestUndecodableNewestRecord: with the newest record of r1 corrupt, Helm's
// drivers read r1 at the revision before; autox's reads return the other
// releases and name r1's record in the error, Lookup fails, and none of them
// falls back to revision 1.
func TestUndecodableNewestRecord(t *testing.T) {
	eachDriver(t, func(t *testing.T, storageDriver string, m *Manager, ns string) {
		ctx := context.Background()
		twoRevisions(t, m, ns, "r1", "charts/hello")
		if _, err := m.Install(ctx, desired(t, ns, "r2", "charts/hello", map[string]interface{}{"greeting": "hi"})); err != nil {
			t.Fatal(err)
		}
		record := corruptNewest(t, storageDriver, ns, "r1", 2)

		// What Helm's own drivers make of it: revision 1 as the newest.
		helm := helmDriver(storageDriver, ns)
		last, err := storage.Init(helm).Last("r1")
		if err != nil {
			t.Fatal(err)
		}
		if rel, err := asV1(last); err != nil || rel.Version != 1 {
			t.Fatalf("Helm's driver no longer falls back to revision 1: %v, %v", last, err)
		}

		kind := map[string]string{DriverSecret: "Secret", DriverConfigMap: "ConfigMap"}[storageDriver]
		isR1 := func(err error) bool {
			var u *UndecodableError
			return errors.As(err, &u) && u.Name == "r1" && u.Namespace == ns && u.Record == record && u.Kind == kind && u.Revision == 2 &&
				strings.Contains(err.Error(), kind+" "+record) && !strings.Contains(err.Error(), "garbage")
		}
		rels, err := m.SpecReleases(ctx, []string{ns}, "spec")
		if len(rels) != 1 || rels[0].Name != "r2" {
			t.Errorf("SpecReleases = %v, want r2 only", rels)
		}
		failed := FailedReleases(err)
		if len(failed) != 1 || !isR1(failed[ns+"/r1"]) || FailedNamespaces(err) != nil {
			t.Errorf("SpecReleases error = %v, want r1's record named", err)
		}
		if r, err := m.Lookup(ctx, ns, "r1"); r != nil || !isR1(err) {
			t.Errorf("Lookup = %+v, %v; want r1's record named", r, err)
		}
		if r, err := m.Lookup(ctx, ns, "r2"); err != nil || r == nil || r.Revision != 1 {
			t.Errorf("Lookup of r2 = %+v, %v", r, err)
		}
		rels, err = m.ManagedReleases(ctx, []string{ns})
		if len(rels) != 1 || rels[0].Name != "r2" || !isR1(FailedReleases(err)[ns+"/r1"]) {
			t.Errorf("ManagedReleases = %v, %v", rels, err)
		}
	})
}

// TestUndecodableOlderRecord: an older record that does not decode is
// skipped, as Helm's drivers do: the newest revision decides.
func TestUndecodableOlderRecord(t *testing.T) {
	ctx := context.Background()
	m := newManager(t, DriverSecret)
	ns := cluster.Namespace(t)
	twoRevisions(t, m, ns, "r1", "charts/hello")
	corruptNewest(t, DriverSecret, ns, "r1", 1)
	rels, err := m.SpecReleases(ctx, []string{ns}, "spec")
	if err != nil || len(rels) != 1 || rels[0].Revision != 2 {
		t.Errorf("SpecReleases = %v, %v", rels, err)
	}
	if r, err := m.Lookup(ctx, ns, "r1"); err != nil || r == nil || r.Revision != 2 {
		t.Errorf("Lookup = %+v, %v", r, err)
	}
}

// TestListRecordsReadsWhatHelmReads: autox's LIST and decoding of the
// records give the releases Helm's driver Query gives, labels included.
func TestListRecordsReadsWhatHelmReads(t *testing.T) {
	eachDriver(t, func(t *testing.T, storageDriver string, m *Manager, ns string) {
		ctx := context.Background()
		twoRevisions(t, m, ns, "r1", "charts/hello-v2")
		helm := helmDriver(storageDriver, ns)
		found, err := helm.Query(map[string]string{"name": "r1", "owner": "helm"})
		if err != nil || len(found) != 2 {
			t.Fatalf("Helm's Query = %v, %v", found, err)
		}
		want, err := asV1List(found)
		if err != nil {
			t.Fatal(err)
		}
		got, err := m.listRecords(ctx, ns, map[string]string{"name": "r1"})
		if err != nil || len(got.decoded["r1"]) != 2 || len(got.undecoded) != 0 {
			t.Fatalf("listRecords = %+v, %v", got, err)
		}
		byVersion := map[int]*release.Release{}
		for _, r := range got.decoded["r1"] {
			byVersion[r.Version] = r
		}
		for _, w := range want {
			g := byVersion[w.Version]
			wj, _ := json.Marshal(w)
			gj, _ := json.Marshal(g)
			if string(wj) != string(gj) || !reflect.DeepEqual(g.Labels, w.Labels) {
				t.Errorf("revision %d differs from Helm's reading:\n got %s %v\nwant %s %v", w.Version, gj, g.Labels, wj, w.Labels)
			}
		}
	})
}

// TestUndecodableNewestRecordStopsHelm: should the newest record of a
// release break after autox read it, Helm's actions themselves, which read
// the release's history with Helm's drivers, fail on it too instead of going
// on from the revision before: no upgrade, reinstall, rollback or uninstall
// touches the release.
func TestUndecodableNewestRecordStopsHelm(t *testing.T) {
	eachDriver(t, func(t *testing.T, storageDriver string, m *Manager, ns string) {
		ctx := context.Background()
		twoRevisions(t, m, ns, "r1", "charts/hello")
		record := corruptNewest(t, storageDriver, ns, "r1", 2)
		before, err := cluster.Client.CoreV1().ConfigMaps(ns).Get(ctx, "r1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		next := desired(t, ns, "r1", "charts/hello", map[string]interface{}{"greeting": "ho"})
		next.Revision = 3
		for _, op := range []struct {
			name string
			run  func() error
		}{
			{"upgrade", func() error { _, err := m.Upgrade(ctx, next); return err }},
			{"reinstall", func() error { _, err := m.Reinstall(ctx, next); return err }},
			{"rollback", func() error { return m.Rollback(ctx, ns, "r1", 0, 1, nil) }},
			{"uninstall", func() error { return m.Uninstall(ctx, ns, "r1", 0, nil) }},
		} {
			err := op.run()
			if err == nil || !strings.Contains(err.Error(), "its newest record") || !strings.Contains(err.Error(), record) {
				t.Errorf("%s = %v, want the error naming %s", op.name, err, record)
			}
			after, err := cluster.Client.CoreV1().ConfigMaps(ns).Get(ctx, "r1", metav1.GetOptions{})
			if err != nil || after.UID != before.UID || after.ResourceVersion != before.ResourceVersion {
				t.Fatalf("%s changed the release's ConfigMap: %v", op.name, err)
			}
		}
		if versions, err := m.recordVersions(ctx, ns, []string{"r1"}); err != nil || len(versions["r1"]) != 2 {
			t.Errorf("records of r1 = %v, %v; want revisions 1 and 2 as they were", versions, err)
		}
	})
}

// eachDriver runs test for each storage driver, with a Manager of that
// driver and a namespace of its own.
func eachDriver(t *testing.T, test func(t *testing.T, storageDriver string, m *Manager, ns string)) {
	for _, storageDriver := range []string{DriverSecret, DriverConfigMap} {
		t.Run(storageDriver, func(t *testing.T) {
			test(t, storageDriver, newManager(t, storageDriver), cluster.Namespace(t))
		})
	}
}
