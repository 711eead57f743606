package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/release/common"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/autox-dev/autox/internal/format"
	"github.com/autox-dev/autox/internal/testenv"
)

// renamed is a config of two specs: spec (triggered by Deployment web) with
// release spec id, release exp-hooked of chart hooked with values; and db
// (Deployment db) with exp-stay and, unless moved to spec, exp-moving.
// Release names are given: a rename keeps them.
func renamed(spec, id, values string, moved bool) string {
	moving := "      moving: {chart: {path: {{.Charts}}/hooked}, releaseName: exp-moving}\n"
	var inSpec, inDB string
	if moved {
		inSpec = moving
	} else {
		inDB = moving
	}
	return fmt.Sprintf(`
namespaces: [{{.NS}}]
specs:
  %s:
    trigger: {group: apps, version: v1, resource: deployments, name: web, namespace: {{.NS}}}
    releaseSpecs:
      %s: {chart: {path: {{.Charts}}/hooked}, releaseName: exp-hooked, values: %s}
%s  db:
    trigger: {group: apps, version: v1, resource: deployments, name: db, namespace: {{.NS}}}
    releaseSpecs:
      stay: {chart: {path: {{.Charts}}/hooked}, releaseName: exp-stay}
%s`, spec, id, values, inSpec, inDB)
}

// hookUID is the uid of the object the hook of chart hooked leaves for a
// release: a new one each time the release's hooks run.
func (e *env) hookUID(rel string) types.UID {
	e.t.Helper()
	cm, err := cluster.Client.CoreV1().ConfigMaps(e.NS).Get(context.Background(), rel+"-hook", metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return cm.UID
}

// owned waits until release rel names spec/releaseSpec.
func (e *env) owned(rel, spec, releaseSpec string) *format.Release {
	e.t.Helper()
	return e.WaitRelease(rel, "owned by "+spec+"/"+releaseSpec, func(r *format.Release) bool {
		return r != nil && r.Spec == spec && r.ReleaseSpec == releaseSpec && r.Status == common.StatusDeployed
	})
}

// undisturbed fails unless r is before as it was: the same revision and first
// deploy, the same last deploy, and no hook run since.
func (e *env) undisturbed(what string, r, before *format.Release, hook types.UID) {
	e.t.Helper()
	if r.Revision != before.Revision || !r.FirstDeployed.Equal(before.FirstDeployed) || !r.Updated.Equal(before.Updated) {
		e.t.Errorf("%s: release %s is revision %d deployed %s (first %s), was revision %d deployed %s (first %s)", what, r.Name,
			r.Revision, r.Updated, r.FirstDeployed, before.Revision, before.Updated, before.FirstDeployed)
	}
	if now := e.hookUID(r.Name); now != hook {
		e.t.Errorf("%s: the hooks of release %s ran", what, r.Name)
	}
}

// planOf maps release name to the action and owner autox plan decides
// for the config text.
func (e *env) planOf(name, text string) map[string]string {
	e.t.Helper()
	out := map[string]string{}
	for _, s := range e.plan(e.WriteConfigAs(name, text)) {
		out[s.Release] = s.Action + " " + s.Spec + "/" + s.ReleaseSpec
	}
	return out
}

// TestRenamesKeepExperimentsRunning: renaming a spec, renaming a release
// spec id and moving a release spec to another spec keep the release name
// and namespace, so the release is adopted by its new owner in place: no
// uninstall, no new revision, the same first deploy, no hook run — as
// plan says beforehand (adopt). Values that change in the same edit (a
// moved release spec's trigger is another object, which its injected
// values name) make one upgrade. list names the new owner. Leader
// election is on; the resync is long, so config changes do it at once.
func TestRenamesKeepExperimentsRunning(t *testing.T) {
	e := newEnv(t)
	e.Deployment("web", version("1.0.0"))
	e.Deployment("db", version("1.0.0"))
	k := testenv.NewKubeletDir(t, "config.yaml", e.render(renamed("web", "hooked", "{k: v}", false)))
	p := e.run(k.Path(), "--config-debounce", "100ms", "--resync", "1h")
	hooked := e.WaitRelease("exp-hooked", "installed", deployedAt(1))
	moving := e.WaitRelease("exp-moving", "installed", deployedAt(1))
	stay := e.WaitRelease("exp-stay", "installed", deployedAt(1))
	hookedUID, movingUID, stayUID := e.hookUID("exp-hooked"), e.hookUID("exp-moving"), e.hookUID("exp-stay")

	step := func(what, text string, plan map[string]string) {
		t.Helper()
		if got := e.planOf(strings.ReplaceAll(what, " ", "-")+".yaml", text); fmt.Sprint(got) != fmt.Sprint(plan) {
			t.Errorf("%s: plan %v, want %v", what, got, plan)
		}
		k.Update(e.render(text))
	}

	step("spec renamed", renamed("web2", "hooked", "{k: v}", false), map[string]string{
		"exp-hooked": "adopt web2/hooked", "exp-moving": "unchanged db/moving", "exp-stay": "unchanged db/stay"})
	e.undisturbed("spec renamed", e.owned("exp-hooked", "web2", "hooked"), hooked, hookedUID)

	step("release spec id renamed", renamed("web2", "renamed", "{k: v}", false), map[string]string{
		"exp-hooked": "adopt web2/renamed", "exp-moving": "unchanged db/moving", "exp-stay": "unchanged db/stay"})
	e.undisturbed("release spec id renamed", e.owned("exp-hooked", "web2", "renamed"), hooked, hookedUID)

	step("release spec moved", renamed("web2", "renamed", "{k: v}", true), map[string]string{
		"exp-hooked": "unchanged web2/renamed", "exp-moving": "upgrade web2/moving", "exp-stay": "unchanged db/stay"})
	movedRel := e.owned("exp-moving", "web2", "moving")
	if movedRel.Revision != 2 || !movedRel.FirstDeployed.Equal(moving.FirstDeployed) {
		t.Errorf("the moved release is revision %d, first deployed %s; want one upgrade of the release first deployed %s",
			movedRel.Revision, movedRel.FirstDeployed, moving.FirstDeployed)
	}
	if trig := movedRel.Values["autox"].(map[string]interface{})["trigger"].(map[string]interface{}); trig["name"] != "web" {
		t.Errorf("the moved release's injected trigger is %v, want Deployment web", trig)
	}
	movingUID = e.hookUID("exp-moving") // an upgrade runs its hooks

	step("spec renamed with new values", renamed("web3", "renamed", "{k: w}", true), map[string]string{
		"exp-hooked": "upgrade web3/renamed", "exp-moving": "adopt web3/moving", "exp-stay": "unchanged db/stay"})
	up := e.WaitRelease("exp-hooked", "upgraded once by its new owner", func(r *format.Release) bool {
		return r != nil && r.Spec == "web3" && r.Status == common.StatusDeployed
	})
	if up.Revision != 2 || up.Values["k"] != "w" || !up.FirstDeployed.Equal(hooked.FirstDeployed) {
		t.Errorf("after a rename with new values: revision %d, values %v, first deployed %s (was %s)", up.Revision, up.Values, up.FirstDeployed, hooked.FirstDeployed)
	}
	e.undisturbed("spec renamed again", e.owned("exp-moving", "web3", "moving"), movedRel, movingUID)
	e.undisturbed("untouched", e.Release("exp-stay"), stay, stayUID)

	var listed []struct{ Release, Spec, ReleaseSpec string }
	out := e.cliStdout(0, "list", "--config", k.Path(), "-o", "json")
	if err := json.Unmarshal([]byte(out), &listed); err != nil {
		t.Fatalf("list -o json: %v\n%s", err, out)
	}
	if fmt.Sprint(listed) != "[{exp-hooked web3 renamed} {exp-moving web3 moving} {exp-stay db stay}]" {
		t.Errorf("list = %v", listed)
	}
	for _, never := range []string{`"message":"release uninstall"`, `"message":"release reinstall"`} {
		if n := strings.Count(p.Output(), never); n > 0 {
			t.Errorf("%d log lines %s", n, never)
		}
	}
	if n := strings.Count(p.Output(), `"message":"release adopt"`); n != 3 {
		t.Errorf("%d adoptions logged, want 3", n)
	}
	p.Stop(patience)
}

// TestRenameWhileDown: a spec renamed while autox is down is adopted by the
// new name when autox starts: start-up cleanup and the first pass leave
// the release alone, and it keeps its revision.
func TestRenameWhileDown(t *testing.T) {
	e := newEnv(t)
	e.Deployment("web", version("1.0.0"))
	e.Deployment("db", version("1.0.0"))
	cfg := e.WriteConfig(renamed("web", "hooked", "{k: v}", false))
	p := e.run(cfg)
	hooked := e.WaitRelease("exp-hooked", "installed", deployedAt(1))
	e.WaitRelease("exp-moving", "installed", deployedAt(1))
	uid := e.hookUID("exp-hooked")
	p.Stop(patience)

	cfg = e.WriteConfig(renamed("web2", "renamed", "{k: v}", false))
	p = e.run(cfg)
	e.undisturbed("renamed while down", e.owned("exp-hooked", "web2", "renamed"), hooked, uid)
	e.waitPasses(p, 0, 2)
	if n := strings.Count(p.Output(), `"message":"release uninstall"`); n > 0 {
		t.Errorf("%d uninstalls after a rename while down", n)
	}
	p.Stop(patience)
}

// TestMovedReleaseWaitsUntilItRenders: a release spec moved to another
// namespace whose chart cannot render there (it reads a ConfigMap of its
// namespace with lookup) keeps its release running in the old namespace
// and installs nothing in the new one; once the chart renders there, the
// release moves.
func TestMovedReleaseWaitsUntilItRenders(t *testing.T) {
	e := newEnv(t)
	other := cluster.Namespace(t)
	e.Deployment("web", version("1.0.0"))
	prerequisite := func(ns string) {
		t.Helper()
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "prerequisite", Namespace: ns}}
		if _, err := cluster.Client.CoreV1().ConfigMaps(ns).Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	prerequisite(e.NS)
	in := func(ns string) string {
		return e.render(fmt.Sprintf(`
namespaces: [{{.NS}}, %s]
specs:
  web:
    trigger: {group: apps, version: v1, resource: deployments, name: web, namespace: {{.NS}}}
    releaseSpecs:
      pre: {chart: {path: {{.Charts}}/prerequisite}, namespace: %s}
`, other, ns))
	}
	k := testenv.NewKubeletDir(t, "config.yaml", in(e.NS))
	p := e.run(k.Path(), "--config-debounce", "100ms")
	before := e.WaitRelease("web-pre", "installed", deployedAt(1))
	moved := e.Releases()
	moved.Namespace = other

	k.Update(in(other))
	refused := fmt.Sprintf("release %s/web-pre is kept, not replaced by %s/web-pre", e.NS, other)
	testenv.Eventually(t, patience, "the move refused twice", func() (bool, error) {
		return strings.Count(p.Output(), refused) >= 2, nil
	})
	if !strings.Contains(p.Output(), "ConfigMap prerequisite is missing in namespace "+other) {
		t.Errorf("the refusal does not say why")
	}
	if r := e.Release("web-pre"); r == nil || r.Revision != 1 || r.Status != common.StatusDeployed || !r.FirstDeployed.Equal(before.FirstDeployed) {
		t.Fatalf("the release in the old namespace did not stay as it was: %+v", r)
	}
	if r := moved.Get("web-pre"); r != nil {
		t.Fatalf("a release was made in the new namespace: %+v", r)
	}

	prerequisite(other) // the next retry renders the chart there
	moved.Wait("web-pre", "installed in the new namespace", deployedAt(1))
	e.WaitRelease("web-pre", "removed from the old namespace", gone)
	p.Stop(patience)
}

// TestNameFreedByARemovalIsTakenAtOnce: one edit gives release spec one
// another release name and release spec two the name one had. one's old
// release is removed (one is still in the config: no adoption), and two
// installs under the freed name in the same reconcile, not at the next pass
// (the resync is an hour).
func TestNameFreedByARemovalIsTakenAtOnce(t *testing.T) {
	e := newEnv(t)
	e.Deployment("web", version("1.0.0"))
	k := testenv.NewKubeletDir(t, "config.yaml", e.render(webSpec(`      one: {chart: {path: {{.Charts}}/hello}, releaseName: exp-a, values: {greeting: one}}
`)))
	p := e.run(k.Path(), "--config-debounce", "100ms", "--resync", "1h")
	e.WaitRelease("exp-a", "installed", deployedAt(1))
	k.Update(e.render(webSpec(`      one: {chart: {path: {{.Charts}}/hello}, releaseName: exp-b, values: {greeting: one}}
      two: {chart: {path: {{.Charts}}/hello}, releaseName: exp-a, values: {greeting: two}}
`)))
	e.owned("exp-b", "web", "one")
	if r := e.owned("exp-a", "web", "two"); r.Values["greeting"] != "two" {
		t.Errorf("exp-a has values %v", r.Values)
	}
	p.Stop(patience)
}

// TestMovedReleaseWaitsForItsObjects: a release moved to a new name whose
// object (of a fixed name, which the new release makes too) is held by a
// finalizer for a while after the old release's uninstall deleted it: the
// new release installs once the object is gone, without a failed install
// (no error line, no failed operation) and without waiting for a retry.
func TestMovedReleaseWaitsForItsObjects(t *testing.T) {
	e := newEnv(t)
	e.Deployment("web", version("1.0.0"))
	held := func(name string) string {
		return e.render(webSpec(`      held: {chart: {path: {{.Charts}}/finalizer}, releaseName: ` + name + `, values: {name: shared}}
`))
	}
	k := testenv.NewKubeletDir(t, "config.yaml", held("exp-old"))
	p := e.run(k.Path(), "--config-debounce", "100ms", "--resync", "1h")
	metric := e.metricsOf(p)
	e.WaitRelease("exp-old", "installed", deployedAt(1))
	ctx := context.Background()
	cms := cluster.Client.CoreV1().ConfigMaps(e.NS)
	release := func(uid types.UID) {
		t.Helper()
		patch := fmt.Sprintf(`{"metadata":{"uid":%q,"finalizers":null}}`, uid)
		if _, err := cms.Patch(ctx, "shared", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatalf("removing the finalizer of ConfigMap shared: %v", err)
		}
	}
	old, err := cms.Get(ctx, "shared", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	k.Update(held("exp-new"))
	testenv.Eventually(t, patience, "the old release's ConfigMap deleted", func() (bool, error) {
		cm, err := cms.Get(ctx, "shared", metav1.GetOptions{})
		return err == nil && cm.UID == old.UID && cm.DeletionTimestamp != nil, err
	})
	// Held a while, as a controller finishing its cleanup would: long
	// enough for an install that does not wait to try and fail. Nothing
	// below depends on how long.
	time.Sleep(3 * time.Second)
	release(old.UID)
	e.WaitRelease("exp-new", "installed under the new name", deployedAt(1))
	e.WaitRelease("exp-old", "removed", gone)
	cm, err := cms.Get(ctx, "shared", metav1.GetOptions{})
	if err != nil || cm.UID == old.UID {
		t.Fatalf("the new release's ConfigMap: %v, %v", cm, err)
	}
	defer release(cm.UID)
	if n := metric(`autox_helm_operations_total{action="install",result="error"}`); n != "" && n != "0" {
		t.Errorf("%s failed installs", n)
	}
	if strings.Contains(p.Output(), `"level":"error"`) {
		t.Errorf("error lines:\n%s", p.Output())
	}
	p.Stop(patience)
}
