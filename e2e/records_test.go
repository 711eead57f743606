package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/autox-dev/autox/internal/testenv"
)

// recordsOf returns the release records of a release, "name@resourceVersion"
// sorted: any write to them changes it.
func (e *env) recordsOf(name string) string {
	e.t.Helper()
	list, err := cluster.Client.CoreV1().Secrets(e.NS).List(context.Background(), metav1.ListOptions{LabelSelector: "owner=helm,name=" + name})
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, s := range list.Items {
		out = append(out, s.Name+"@"+s.ResourceVersion)
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

// TestUndecodableNewestRecord: the newest record of web-a holds garbage.
// Helm's drivers skip it and read web-a at revision 1; autox must not: the
// reconcile that would reinstall web-a from there (its release spec now
// onChange: reinstall, its trigger relabelled) fails that release spec with
// an error naming the record, writes nothing to web-a, and upgrades web-b.
func TestUndecodableNewestRecord(t *testing.T) {
	e := newEnv(t)
	e.Deployment("web", version("1.0.0"))
	specs := func(onChange string) string {
		return e.render(webSpec(`
      a:
        chart: {path: {{.Charts}}/hello}
        onChange: ` + onChange + `
      b:
        chart: {path: {{.Charts}}/hello}
`))
	}
	k := testenv.NewKubeletDir(t, "config.yaml", specs("upgrade"))
	p := e.run(k.Path(), "--config-debounce", "50ms")
	e.WaitRelease("web-a", "installed", deployedAt(1))
	e.WaitRelease("web-b", "installed", deployedAt(1))
	e.Relabel("web", version("2.0.0"))
	e.WaitRelease("web-a", "upgraded", deployedAt(2))
	e.WaitRelease("web-b", "upgraded", deployedAt(2))

	record := "sh.helm.release.v1.web-a.v2"
	secrets := cluster.Client.CoreV1().Secrets(e.NS)
	s, err := secrets.Get(context.Background(), record, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.Data["release"] = []byte("!!not-base64-garbage!!")
	if _, err := secrets.Update(context.Background(), s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	cm, err := cluster.Client.CoreV1().ConfigMaps(e.NS).Get(context.Background(), "web-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	before := e.recordsOf("web-a")
	untouched := func() {
		t.Helper()
		if after := e.recordsOf("web-a"); after != before {
			t.Fatalf("web-a's records were written:\nbefore %s\n after %s", before, after)
		}
		now, err := cluster.Client.CoreV1().ConfigMaps(e.NS).Get(context.Background(), "web-a", metav1.GetOptions{})
		if err != nil || now.UID != cm.UID {
			t.Fatalf("web-a's ConfigMap was replaced or removed: %v", err)
		}
	}

	k.Update(specs("reinstall"))
	e.Relabel("web", version("3.0.0"))
	testenv.Eventually(t, patience, "web-b upgraded beside the broken release", func() (bool, error) {
		untouched()
		r := e.Release("web-b")
		return r != nil && r.Revision == 3 && labelOf(r) == "3.0.0", nil
	})
	testenv.Eventually(t, patience, "a ReleaseFailed Event naming the record", func() (bool, error) {
		untouched()
		for _, ev := range e.eventsOf("web") {
			if ev.Reason == "ReleaseFailed" && strings.Contains(ev.Message, fmt.Sprintf("release %s/web-a: its newest record, Secret %s (revision 2), cannot be decoded", e.NS, record)) {
				return !strings.Contains(ev.Message, "garbage"), nil
			}
		}
		return false, nil
	})
	e.waitPasses(p, len(p.Output()), 2) // nor may the passes after it
	untouched()
	p.Stop(patience)
}
