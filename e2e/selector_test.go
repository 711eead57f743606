package e2e

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/internal/format"
	"github.com/autox-dev/autox/internal/testenv"
)

// selectorConfig is one selector spec, exp, over the Deployments of the
// test's namespace labelled autox.dev/experiment=enabled (namespace omitted:
// every managed namespace), with one release spec, job.
const selectorConfig = `
namespaces: [{{.NS}}]
specs:
  exp:
    trigger:
      group: apps
      version: v1
      resource: deployments
      selector: {matchLabels: {autox.dev/experiment: enabled}}
    releaseSpecs:
      job:
        chart: {path: {{.Charts}}/hello}
        values: {greeting: hi}
`

// selected are the labels of a Deployment exp serves: selected, with the
// trigger label set.
func selected(v string) map[string]string {
	return map[string]string{"autox.dev/experiment": "enabled", "app.kubernetes.io/version": v}
}

func (e *env) deleteDeployment(name string) {
	e.t.Helper()
	if err := cluster.Client.AppsV1().Deployments(e.NS).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		e.t.Fatal(err)
	}
	testenv.Eventually(e.t, patience, "deployment "+name+" gone", func() (bool, error) {
		_, err := cluster.Client.AppsV1().Deployments(e.NS).Get(context.Background(), name, metav1.GetOptions{})
		return err != nil, nil
	})
}

// objectOf returns the object labels of a release's newest record.
func (e *env) objectOf(name string) (string, string) {
	e.t.Helper()
	list, err := cluster.Client.CoreV1().Secrets(e.NS).List(context.Background(), metav1.ListOptions{LabelSelector: "owner=helm,name=" + name})
	if err != nil {
		e.t.Fatal(err)
	}
	best, ns, obj := -1, "", ""
	for _, s := range list.Items {
		var v int
		if _, err := fmt.Sscan(s.Labels["version"], &v); err == nil && v > best {
			best, ns, obj = v, s.Labels[format.LabelObjectNamespace], s.Labels[format.LabelObject]
		}
	}
	return ns, obj
}

// helmWrites counts the Helm writes p logged.
func helmWrites(p *testenv.Process) int { return strings.Count(p.Output(), `"message":"release `) }

// TestSelectorObjectsComeAndGo: every selected, labelled Deployment gets its
// own release, named after it and labelled with it; one that stops matching,
// loses its label or is deleted loses it; one recreated under the same name
// gets a new one; objects outside the selector get nothing.
func TestSelectorObjectsComeAndGo(t *testing.T) {
	e := newEnv(t)
	e.Deployment("a", selected("1"))
	e.Deployment("b", map[string]string{"autox.dev/experiment": "enabled"}) // selected, no trigger label
	e.Deployment("c", version("1"))                                         // not selected
	p := e.run(e.WriteConfig(selectorConfig))

	rel := e.WaitRelease("a-job", "installed for object a", deployedAt(1))
	trig := rel.Values["autox"].(map[string]interface{})["trigger"].(map[string]interface{})
	if trig["name"] != "a" || trig["namespace"] != e.NS {
		t.Errorf("injected trigger = %v, want object a", trig)
	}
	if ns, obj := e.objectOf("a-job"); ns != e.NS || obj != "a" || rel.Spec != "exp" || rel.ReleaseSpec != "job" {
		t.Errorf("release labels: object %s/%s, spec %s, release spec %s", ns, obj, rel.Spec, rel.ReleaseSpec)
	}
	e.waitPasses(p, 0, 2)
	for _, name := range []string{"b-job", "c-job"} {
		if r := e.Release(name); r != nil {
			t.Errorf("%s installed for an object exp does not serve", name)
		}
	}

	e.Relabel("b", selected("1"))
	e.WaitRelease("b-job", "installed once b has its trigger label", deployedAt(1))
	e.Relabel("a", version("1")) // no longer selected
	e.WaitRelease("a-job", "uninstalled once a left the selector", gone)
	e.Relabel("b", map[string]string{"autox.dev/experiment": "enabled"})
	e.WaitRelease("b-job", "uninstalled once b lost its trigger label", gone)

	e.Deployment("d", selected("1"))
	first := e.WaitRelease("d-job", "installed for a new object", deployedAt(1))
	e.deleteDeployment("d")
	e.WaitRelease("d-job", "uninstalled once d was deleted", gone)
	e.Deployment("d", selected("2"))
	again := e.WaitRelease("d-job", "installed for d recreated", deployedAt(1))
	if !again.FirstDeployed.After(first.FirstDeployed) && again.FirstDeployed.Equal(first.FirstDeployed) {
		t.Errorf("d-job of the recreated d is the old release")
	}
	p.Stop(patience)
}

// TestSelectorWhileDown: objects added and deleted while autox is down are
// served and cleaned up at start; a restart with nothing changed makes no
// Helm write. One object's name is longer than 63 characters, so that its
// release's object label holds a hash, and its release name over 53.
func TestSelectorWhileDown(t *testing.T) {
	e := newEnv(t)
	long := "very-long-deployment-name-" + strings.Repeat("x", 45) // 71 characters
	e.Deployment("a", selected("1"))
	e.Deployment(long, selected("1"))
	cfg := e.WriteConfig(selectorConfig)
	p := e.run(cfg)
	e.WaitRelease("a-job", "installed", deployedAt(1))
	longRelease, err := config.RenderReleaseName(config.DefaultSelectorReleaseName, "exp", "job", e.NS, long)
	if err != nil {
		t.Fatal(err)
	}
	if len(longRelease) != 53 || !strings.HasPrefix(longRelease, (long + "-job")[:40]+"-") {
		t.Fatalf("long release name %q: want its first 40 characters, '-' and 12 hex digits", longRelease)
	}
	e.WaitRelease(longRelease, "installed for the long-named object", deployedAt(1))
	if _, obj := e.objectOf(longRelease); len(obj) != 63 || !strings.HasPrefix(obj, long[:50]) {
		t.Errorf("object label of the long name = %q", obj)
	}
	p.Stop(patience)

	e.deleteDeployment("a")
	e.deleteDeployment(long)
	e.Deployment("e", selected("1"))
	p = e.run(cfg)
	e.WaitRelease("e-job", "installed for an object added while down", deployedAt(1))
	e.WaitRelease("a-job", "uninstalled for an object deleted while down", gone)
	e.WaitRelease(longRelease, "uninstalled for the long-named object deleted while down", gone)
	p.Stop(patience)

	p = e.run(cfg)
	e.waitPasses(p, 0, 3)
	p.Stop(patience)
	if n := helmWrites(p); n != 0 {
		t.Errorf("a restart with nothing changed made %d Helm writes:\n%s", n, p.Output())
	}
	if r := e.Release("e-job"); r == nil || r.Revision != 1 {
		t.Errorf("e-job after the restart: %+v", r)
	}

	// plan and list show the object of each release.
	steps := e.cli(0, "plan", "--config", cfg, "-o", "json")
	if !strings.Contains(steps, `"object": "`+e.NS+`/e"`) {
		t.Errorf("plan -o json does not name the object:\n%s", steps)
	}
	if list := e.cli(0, "list", "--config", cfg); !strings.Contains(list, "OBJECT") || !strings.Contains(list, e.NS+"/e") {
		t.Errorf("list does not show the object:\n%s", list)
	}
}

// TestSelectorConflict: a Deployment that is the named trigger of one spec
// and selected by another's selector is a conflict: neither spec installs
// or upgrades anything for it, what it has stays, a TriggerConflict Event
// names both specs, and plan shows the conflict.
func TestSelectorConflict(t *testing.T) {
	e := newEnv(t)
	named := webSpec(`      hello: {chart: {path: {{.Charts}}/hello}}
`)
	e.Deployment("web", selected("1"))
	e.Deployment("other", selected("1"))
	cfg := e.WriteConfig(named)
	p := e.run(cfg)
	e.WaitRelease("web-hello", "installed by the named spec", deployedAt(1))

	// Add the selector spec live, and change the named spec's values: the
	// conflict freezes web; other is served.
	both := named + strings.SplitN(selectorConfig, "specs:\n", 2)[1]
	e.WriteConfig(strings.Replace(both, "hello: {chart: {path: {{.Charts}}/hello}}", "hello: {chart: {path: {{.Charts}}/hello}, values: {greeting: changed}}", 1))
	e.WaitRelease("other-job", "installed for the unclaimed object", deployedAt(1))
	e.waitEvent("web", "TriggerConflict")
	_, text := e.events("web")
	if !strings.Contains(text, "exp, web") {
		t.Errorf("TriggerConflict Event does not name both specs:\n%s", text)
	}
	offset := len(p.Output())
	e.waitPasses(p, offset, 2)
	if r := e.Release("web-hello"); r == nil || r.Revision != 1 {
		t.Errorf("web-hello changed during the conflict: %+v", r)
	}
	if r := e.Release("web-job"); r != nil {
		t.Errorf("the selector spec installed web-job for an object in conflict")
	}
	p.Stop(patience)

	conflicts := 0
	for _, s := range e.plan(e.Dir + "/config.yaml") {
		if s.Action == "conflict" && strings.Contains(s.Reason, "exp, web") {
			conflicts++
		}
	}
	if conflicts != 2 {
		t.Errorf("plan shows %d conflict steps naming both specs, want 2 (one per spec)", conflicts)
	}
}

// TestSelectorMaxObjects: past maxObjects, objects in namespace/name order
// get nothing, with a warning Event and the over_limit metric; when one
// before them goes, the next one is served; a new object earlier in the
// order takes nothing from those served.
func TestSelectorMaxObjects(t *testing.T) {
	e := newEnv(t)
	for _, n := range []string{"o1", "o2", "o3", "o4"} {
		e.Deployment(n, selected("1"))
	}
	cfg := e.WriteConfig(strings.Replace(selectorConfig, "      selector:", "      maxObjects: 2\n      selector:", 1))
	p := e.run(cfg)
	e.WaitRelease("o1-job", "installed", deployedAt(1))
	e.WaitRelease("o2-job", "installed", deployedAt(1))
	e.waitEvent("o3", "TriggerOverLimit")
	e.waitEvent("o4", "TriggerOverLimit")
	base := e.httpBase(p)
	testenv.Eventually(t, patience, "over_limit metric", func() (bool, error) {
		_, body := httpGet(base + "/metrics")
		return metricValue(body, `autox_selector_objects{spec="exp",state="over_limit"}`) == "2", nil
	})
	for _, n := range []string{"o3-job", "o4-job"} {
		if r := e.Release(n); r != nil {
			t.Errorf("%s installed past maxObjects", n)
		}
	}
	e.deleteDeployment("o1")
	e.WaitRelease("o1-job", "uninstalled", gone)
	e.WaitRelease("o3-job", "installed once o1 left room", deployedAt(1))
	// o0 comes first in name order, but o2 and o3 are served and keep
	// their releases: o0 gets nothing.
	e.Deployment("o0", selected("1"))
	e.waitEvent("o0", "TriggerOverLimit")
	offset := len(p.Output())
	e.waitPasses(p, offset, 2)
	for _, n := range []string{"o0-job", "o4-job"} {
		if r := e.Release(n); r != nil {
			t.Errorf("%s installed past maxObjects", n)
		}
	}
	for _, n := range []string{"o2-job", "o3-job"} {
		if r := e.Release(n); r == nil || r.Revision != 1 {
			t.Errorf("%s disturbed by an object earlier in the order: %+v", n, r)
		}
	}
	p.Stop(patience)
}

// TestSelectorListErrorUninstallsNothing: while every LIST (and watch) of
// the selected Deployments fails (a proxy answers 500 to those requests
// only), no object is taken for gone: nothing is uninstalled. While the read
// of one object by name fails, its lost label removes nothing either; once
// it can be read, the confirmed removal goes through.
func TestSelectorListErrorUninstallsNothing(t *testing.T) {
	e := newEnv(t)
	proxy, kubeconfig := e.proxied()
	e.Deployment("a", selected("1"))
	e.Deployment("b", selected("1"))
	cfg := e.WriteConfig(selectorConfig)
	p := e.run(cfg, "--kubeconfig", kubeconfig)
	e.WaitRelease("a-job", "installed", deployedAt(1))
	e.WaitRelease("b-job", "installed", deployedAt(1))

	listsSelected := func(r *http.Request) bool {
		return r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/deployments") &&
			strings.Contains(r.URL.Query().Get("labelSelector"), "autox.dev/experiment")
	}
	proxy.FailMatching(http.StatusInternalServerError, listsSelected)
	offset := len(p.Output())
	testenv.Eventually(t, patience, "failed selector LISTs", func() (bool, error) { return proxy.Failed() >= 3, nil })
	deadline := time.Now().Add(6 * time.Second) // three resync periods of 2s
	for time.Now().Before(deadline) {
		for _, n := range []string{"a-job", "b-job"} {
			if r := e.Release(n); r == nil || r.Revision != 1 {
				t.Fatalf("%s changed while the LISTs failed: %+v\n%s", n, r, p.Output()[offset:])
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	if strings.Contains(p.Output()[offset:], `"message":"release uninstall"`) {
		t.Fatalf("an uninstall while the LISTs failed:\n%s", p.Output()[offset:])
	}
	proxy.FailWith(0)

	// Now the live reads of b fail while b loses its trigger label: the
	// event and the passes reconcile b, and nothing may go until b can be
	// read. The pass's consistent LIST of the selected objects is a live
	// read of b too (design §3, bulk live reads): it fails as well.
	readsB := func(r *http.Request) bool {
		return r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/deployments/b") || listsSelected(r)
	}
	proxy.FailMatching(http.StatusInternalServerError, readsB)
	failedBefore := proxy.Failed()
	e.Relabel("b", map[string]string{"autox.dev/experiment": "enabled"})
	testenv.Eventually(t, patience, "failed reads of b (or b-job changed)", func() (bool, error) {
		r := e.Release("b-job")
		return proxy.Failed() >= failedBefore+3 || r == nil || r.Revision != 1, nil
	})
	if r := e.Release("b-job"); r == nil || r.Revision != 1 {
		t.Fatalf("b-job changed while b could not be read: %+v\n%s", r, p.Output()[offset:])
	}
	proxy.FailWith(0)
	// Once b can be read, the confirmed removal goes through.
	e.WaitRelease("b-job", "uninstalled once b can be read", gone)
	if r := e.Release("a-job"); r == nil || r.Revision != 1 {
		t.Errorf("a-job after the LIST errors: %+v", r)
	}
	p.Stop(patience)
}

// TestSelectorValidate: validate checks selectors and release name
// templates without a cluster, naming the YAML path.
func TestSelectorValidate(t *testing.T) {
	e := newEnv(t)
	bad := e.WriteConfig(`
namespaces: [{{.NS}}]
specs:
  empty:
    trigger: {group: apps, version: v1, resource: deployments, selector: {}}
    releaseSpecs:
      job: {chart: {path: {{.Charts}}/hello}}
  both:
    trigger: {group: apps, version: v1, resource: deployments, name: web, namespace: {{.NS}}, selector: {matchLabels: {a: b}}}
    releaseSpecs:
      job: {chart: {path: {{.Charts}}/hello}}
  noname:
    trigger: {group: apps, version: v1, resource: deployments, selector: {matchExpressions: [{key: a, operator: In, values: [b]}]}}
    releaseSpecs:
      job: {chart: {path: {{.Charts}}/hello}, releaseName: "fixed-{{"{{"}}.Namespace{{"}}"}}"}
`)
	p := testenv.StartProcess(t, autox, "validate", "--config", bad)
	code, err := p.Wait(patience)
	if err != nil || code != 1 {
		t.Fatalf("validate: code %d, %v\n%s", code, err, p.Output())
	}
	for _, path := range []string{"specs.empty.trigger.selector", "specs.both.trigger", "specs.noname.releaseSpecs.job.releaseName"} {
		if !strings.Contains(p.Output(), path+":") {
			t.Errorf("validate does not name %s:\n%s", path, p.Output())
		}
	}
	good := e.WriteConfigAs("good.yaml", selectorConfig)
	if p := testenv.StartProcess(t, autox, "validate", "--config", good); func() int { c, _ := p.Wait(patience); return c }() != 0 {
		t.Errorf("validate of a good selector config failed:\n%s", p.Output())
	}
}

var passRequestsRe = regexp.MustCompile(`"apiRequests":(\d+)[^}]*"message":"pass complete"`)

// quietPassRequests is the fewest API requests of the passes p logged
// after offset (a Lease renewal may fall into one pass; not into all).
func quietPassRequests(p *testenv.Process, offset int) int {
	least := -1
	for _, m := range passRequestsRe.FindAllStringSubmatch(p.Output()[offset:], -1) {
		n, _ := strconv.Atoi(m[1])
		if least < 0 || n < least {
			least = n
		}
	}
	return least
}

// TestSelectorQuietPassIsO1: a pass with nothing to do makes the same
// number of API requests for 2 matching objects as for 8, and no Helm write.
func TestSelectorQuietPassIsO1(t *testing.T) {
	e := newEnv(t)
	for _, n := range []string{"q1", "q2"} {
		e.Deployment(n, selected("1"))
	}
	p := e.run(e.WriteConfig(selectorConfig))
	e.WaitRelease("q2-job", "installed", deployedAt(1))
	offset := len(p.Output())
	e.waitPasses(p, offset, 5)
	small := quietPassRequests(p, offset)
	for _, n := range []string{"q3", "q4", "q5", "q6", "q7", "q8"} {
		e.Deployment(n, selected("1"))
	}
	e.WaitRelease("q8-job", "installed", deployedAt(1))
	for _, n := range []string{"q3", "q4", "q5", "q6", "q7"} {
		e.WaitRelease(n+"-job", "installed", deployedAt(1))
	}
	writes := helmWrites(p)
	offset = len(p.Output())
	e.waitPasses(p, offset, 5)
	large := quietPassRequests(p, offset)
	p.Stop(patience)
	t.Logf("quiet pass: %d API requests with 2 objects, %d with 8", small, large)
	if small < 0 || small != large {
		t.Errorf("quiet pass made %d API requests with 2 objects and %d with 8: it must not grow with the objects", small, large)
	}
	if n := helmWrites(p) - writes; n != 0 {
		t.Errorf("%d Helm writes in quiet passes", n)
	}
}
