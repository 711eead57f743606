package e2e

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/autox-dev/autox/internal/testenv"
)

// recorded returns the namespaces instance has recorded in the test's
// namespace (where the Lease is), sorted; nil when there is no record.
func (e *env) recorded(instance string) []string {
	e.t.Helper()
	cm, err := cluster.Client.CoreV1().ConfigMaps(e.NS).Get(context.Background(), "autox-namespaces-"+instance, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		e.t.Fatal(err)
	}
	out := strings.Fields(cm.Data["namespaces"])
	slices.Sort(out)
	return out
}

func (e *env) waitRecorded(instance string, want ...string) {
	e.t.Helper()
	slices.Sort(want)
	testenv.Eventually(e.t, patience, "instance "+instance+" records "+strings.Join(want, ", "), func() (bool, error) {
		return slices.Equal(e.recorded(instance), want), nil
	})
}

// TestNamespaceDroppedWhileDown: autox runs with specs in namespaces A and
// B; it is stopped, and the config drops B and B's spec at once (a
// kustomize rollout whose old pod is gone). The next start uninstalls B's
// release, leaves A's alone, and B leaves the record of managed namespaces;
// plan and list, in between, show the orphan. Another instance, with a
// release in B (and leader election off), keeps its release and its own
// record.
func TestNamespaceDroppedWhileDown(t *testing.T) {
	e := newEnv(t)
	b := cluster.Namespace(t)
	e.Deployment("web", version("1.0.0"))
	cluster.CreateDeployment(t, b, "api", version("1.0.0"))
	// oneSpec (web in A) with B and a spec api there.
	both := e.WriteConfig(strings.ReplaceAll(strings.Replace(oneSpec, "namespaces: [{{.NS}}]", "namespaces: [{{.NS}}, B]", 1)+`  api:
    trigger: {group: apps, version: v1, resource: deployments, name: api, namespace: B}
    releaseSpecs:
      hello: {chart: {path: {{.Charts}}/hello}}
`, "B", b))
	other := e.WriteConfigAs("other.yaml", strings.ReplaceAll(`
namespaces: [B]
specs:
  mine:
    trigger: {group: apps, version: v1, resource: deployments, name: api, namespace: B}
    releaseSpecs:
      hello: {chart: {path: {{.Charts}}/hello}, releaseName: other-hello}
`, "B", b))
	inB := e.Releases()
	inB.Namespace = b

	p := e.run(both)
	web := e.WaitRelease("web-hello", "installed in A", deployedAt(1))
	inB.Wait("api-hello", "installed in B", deployedAt(1))
	// Without leader election, the one term keeps the record the same way.
	q := e.run(other, "--instance", "team-b", "--leader-elect=false")
	mine := inB.Wait("other-hello", "installed in B by the other instance", deployedAt(1))
	e.waitRecorded("autox", e.NS, b)
	e.waitRecorded("team-b", b)
	p.Stop(patience)

	dropped := e.WriteConfig(oneSpec)
	list := e.cli(0, "list", "--config", dropped, "--leader-election-namespace", e.NS, "--orphans", "-o", "json")
	if !strings.Contains(list, `"api-hello"`) || strings.Contains(list, `"web-hello"`) || strings.Contains(list, `"other-hello"`) {
		t.Errorf("list --orphans does not show the release left in the dropped namespace:\n%s", list)
	}
	if strings.Contains(list, "no record of the namespaces") {
		t.Errorf("list warns of a missing record that exists:\n%s", list)
	}
	// Run from a laptop, without the flag, the record is looked for in
	// "default": an instance with no record there gets told which flag to set.
	if out := e.cli(0, "list", "--config", dropped, "--instance", "nobody"); !strings.Contains(out, "no record of the namespaces") ||
		!strings.Contains(out, "--leader-election-namespace") {
		t.Errorf("list does not warn that the record is not in the namespace it read:\n%s", out)
	}
	uninstall := false
	for _, s := range e.plan(dropped, "--leader-election-namespace", e.NS) {
		if s.Release == "api-hello" && s.Namespace == b {
			uninstall = s.Action == "uninstall"
		}
	}
	if !uninstall {
		t.Error("plan does not uninstall the release left in the dropped namespace")
	}

	p = e.run(dropped)
	inB.Wait("api-hello", "uninstalled at start with its namespace dropped", gone)
	e.waitRecorded("autox", e.NS)
	e.waitPasses(p, 0, 2)
	if r := e.Release("web-hello"); r == nil || r.Revision != 1 || !r.FirstDeployed.Equal(web.FirstDeployed) {
		t.Errorf("web-hello in A was touched: %+v", r)
	}
	if r := inB.Get("other-hello"); r == nil || r.Revision != 1 || !r.FirstDeployed.Equal(mine.FirstDeployed) {
		t.Errorf("the other instance's release in B was touched: %+v", r)
	}
	if got := e.recorded("team-b"); !slices.Equal(got, []string{b}) {
		t.Errorf("the other instance's record is %v, want [%s]", got, b)
	}
	p.Stop(patience)
	q.Stop(patience)
}

// TestPlanShowsInstallsHeldForTheRecord: an install waits until its
// namespace is in the record of managed namespaces, and plan says so where
// run would hold it: with a record it cannot read (here a ConfigMap of its
// name that autox did not write), the install is a wait that names the
// namespace and the record, and the plan is incomplete.
func TestPlanShowsInstallsHeldForTheRecord(t *testing.T) {
	e := newEnv(t)
	e.Deployment("web", version("1.0.0"))
	if _, err := cluster.Client.CoreV1().ConfigMaps(e.NS).Create(context.Background(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "autox-namespaces-autox"}, Data: map[string]string{"namespaces": e.NS + "\n"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	out := e.cliStdout(1, "plan", "--config", e.WriteConfig(oneSpec), "--leader-election-namespace", e.NS, "-o", "json")
	var steps []struct{ Action, Pending, Release, Reason string }
	if err := json.Unmarshal([]byte(out), &steps); err != nil {
		t.Fatalf("plan -o json: %v\n%s", err, out)
	}
	if len(steps) != 1 || steps[0].Action != "wait" || steps[0].Pending != "install" ||
		!strings.Contains(steps[0].Reason, "namespace "+e.NS+" is not recorded in ConfigMap "+e.NS+"/autox-namespaces-autox") ||
		!strings.Contains(steps[0].Reason, "is not the record of autox instance") {
		t.Errorf("plan with an unreadable record: %s", out)
	}
}
