package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/release/common"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/autox-dev/autox/internal/format"
	"github.com/autox-dev/autox/internal/testenv"
)

// The release policies as a user meets them: the built binary with leader
// election on, its logs, `plan` and `list`.

// policyStep is a step of `plan -o json` with what the policies add.
type policyStep struct {
	Action, Spec, ReleaseSpec, Release, Reason string
	Pending, Suspended                         string
	Policies                                   *struct {
		Wait        bool
		Timeout     string
		Remediation *struct {
			Retries, Failures int
			OnFailure         string
			Exhausted         bool
		}
	}
}

func (e *env) policyPlan(config string) map[string]policyStep {
	e.t.Helper()
	// The records of failed attempts are in autox's own namespace, as the run's.
	out := e.cliStdout(0, "plan", "--config", config, "--leader-election-namespace", e.NS, "-o", "json")
	var steps []policyStep
	if err := json.Unmarshal([]byte(out), &steps); err != nil {
		e.t.Fatalf("plan -o json: %v\n%s", err, out)
	}
	byRelease := map[string]policyStep{}
	for _, s := range steps {
		byRelease[s.Release] = s
	}
	return byRelease
}

// waitLogCount waits until p has logged text n times and returns where the
// n-th ends in p's output.
func (e *env) waitLogCount(p *testenv.Process, text string, n int) int {
	e.t.Helper()
	end := 0
	testenv.Eventually(e.t, patience, fmt.Sprintf("%d log lines %s", n, text), func() (bool, error) {
		out, from, seen := p.Output(), 0, 0
		for seen < n {
			i := strings.Index(out[from:], text)
			if i < 0 {
				return false, nil
			}
			from += i + len(text)
			seen++
		}
		end = from
		return true, nil
	})
	return end
}

const (
	reloadLine  = `"message":"config changes"`
	pendingLine = `"message":"suspended: changes pending, no Helm write"`
)

func suspendedWeb(suspend string) string {
	return `
namespaces: [{{.NS}}]
specs:
  web:
    trigger: {group: apps, version: v1, resource: deployments, name: web, namespace: {{.NS}}}` + suspend + `
    releaseSpecs:
      hello: {chart: {path: {{.Charts}}/hello}POLICIES}
`
}

// TestSuspendedSpec: a policy-only change writes nothing; a suspended spec
// whose trigger is deleted, then comes back with another label value, gets
// no Helm write at all while `plan` and `list` show it suspended with what
// it would do (and an Event says changes are pending); setting suspend back
// reconciles it at once (the pass runs once an hour here: only the config
// change can have done it); removing a suspended spec from the file
// uninstalls its release.
func TestSuspendedSpec(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.Deployment("web", version("1.0.0"))
	config := func(suspend, policies string) string {
		return e.WriteConfig(strings.Replace(suspendedWeb(suspend), "POLICIES", policies, 1))
	}
	cfg := config("", "")
	p := e.run(cfg, "--resync", "1h", "--config-debounce", "100ms")
	e.WaitRelease("web-hello", "installed", deployedAt(1))
	e.waitLog(p, passLine)

	// Policies of the release spec only: the spec is reconciled (a change
	// of it) and found in sync.
	start := len(p.Output())
	config("", ", timeout: 90s, wait: true, maxHistory: 3, remediation: {retries: 1, onFailure: rollback}")
	e.waitLogCount(p, reloadLine, 1)
	config("\n    suspend: true", ", timeout: 90s, wait: true, maxHistory: 3, remediation: {retries: 1, onFailure: rollback}")
	e.waitLogCount(p, reloadLine, 2)
	if s := e.policyPlan(cfg)["web-hello"]; s.Action != "suspended" || s.Suspended != "spec" || s.Pending != "unchanged" ||
		s.Policies == nil || !s.Policies.Wait || s.Policies.Timeout != "90s" || s.Policies.Remediation == nil || s.Policies.Remediation.OnFailure != "rollback" {
		t.Errorf("plan of the suspended spec in sync: %+v", s)
	}

	if err := cluster.Client.AppsV1().Deployments(e.NS).Delete(context.Background(), "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitLogCount(p, pendingLine, 1)
	if s := e.policyPlan(cfg)["web-hello"]; s.Action != "suspended" || s.Pending != "uninstall" || !strings.Contains(s.Reason, "trigger not found") {
		t.Errorf("plan of the suspended spec without its trigger: %+v", s)
	}
	e.Deployment("web", version("2.0.0"))
	e.waitLogCount(p, pendingLine, 2)
	if s := e.policyPlan(cfg)["web-hello"]; s.Action != "suspended" || s.Pending != "upgrade" || !strings.Contains(s.Reason, "values changed") {
		t.Errorf("plan of the suspended spec relabelled: %+v", s)
	}
	e.waitEvent("web", "SuspendedChangesPending")
	var rows []struct{ Release, Suspended string }
	if err := json.Unmarshal([]byte(e.cliStdout(0, "list", "--config", cfg, "-o", "json")), &rows); err != nil || len(rows) != 1 || rows[0].Suspended != "spec" {
		t.Errorf("list of the suspended spec: %+v, %v", rows, err)
	}
	if w := writeLines(p.Output()[start:]); len(w) != 0 {
		t.Fatalf("Helm writes while only policies changed or the spec was suspended:\n%s", strings.Join(w, "\n"))
	}
	metric := e.metricsOf(p)
	if spec, rs := metric(`autox_suspended{level="spec"}`), metric(`autox_suspended{level="release_spec"}`); spec != "1" || rs != "1" {
		t.Errorf("autox_suspended: spec %q, release_spec %q; want 1 and 1", spec, rs)
	}
	if r := e.Release("web-hello"); r == nil || r.Revision != 1 || r.Status != common.StatusDeployed {
		t.Fatalf("the suspended spec's release changed: %+v", r)
	}

	config("", "")
	e.WaitRelease("web-hello", "upgraded once suspend is off", deployedAt(2))
	if n := passesSince(p, 0); n != 1 {
		t.Errorf("%d passes: the resume must not have waited for one", n)
	}

	// Removing a suspended spec from the file is a removal like any other.
	config("\n    suspend: true", "")
	e.waitLogCount(p, reloadLine, 4)
	e.WriteConfig("\nnamespaces: [{{.NS}}]\nspecs: {}\n")
	e.WaitRelease("web-hello", "uninstalled with its suspended spec", gone)
	if code := p.Stop(patience); code != 0 {
		t.Fatalf("SIGTERM: exit code %d", code)
	}
}

const remediationConfig = `
namespaces: [{{.NS}}]
specs:
  web:
    trigger: {group: apps, version: v1, resource: deployments, name: web, namespace: {{.NS}}}
    releaseSpecs:
      app:
        chart: {path: {{.Charts}}/ready}
        values: {deployment: DEPLOYMENT}
        wait: true
        timeout: 2s
        remediation: {retries: 0, onFailure: rollback}
  api:
    trigger: {group: apps, version: v1, resource: deployments, name: api, namespace: {{.NS}}}
    releaseSpecs:
      bad:
        chart: {path: {{.Charts}}/ready}
        values: {deployment: true}
        wait: true
        timeout: 2s
        remediation: {retries: 2, onFailure: uninstall}
`

// TestRemediation: an upgrade whose Deployment never gets ready within
// its timeout fails and is rolled back to the last deployed revision, and
// is not tried again — also after a restart — until the trigger changes;
// an install whose Deployment never gets ready is tried 1 + 2 retries
// times (each a real attempt: a failed revision), then uninstalled (it was
// never deployed), and not installed again. (A chart the API server
// refuses fails its first install for real, and then the dry run of each
// reinstall, which writes nothing: no attempt, no retry used.)
func TestRemediation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.Deployment("web", version("1.0.0"))
	e.Deployment("api", version("1.0.0"))
	write := func(deployment string) string {
		return e.WriteConfig(strings.Replace(remediationConfig, "DEPLOYMENT", deployment, 1))
	}
	cfg := write("false")
	p := e.run(cfg, "--config-debounce", "100ms")
	e.WaitRelease("web-app", "installed, ready at once", deployedAt(1))
	e.waitLogCount(p, `"message":"remediation retries used up"`, 1)
	e.WaitRelease("api-bad", "uninstalled once its retries were used up", gone)
	// The records go before Helm's uninstall returns and autox logs it.
	testenv.Eventually(t, patience, "api-bad's uninstall logged", func() (bool, error) {
		for _, l := range linesWith(p.Output(), `"release":"api-bad"`) {
			if strings.Contains(l, `"message":"release uninstall"`) {
				return true, nil
			}
		}
		return false, nil
	})
	attempts := linesWith(p.Output(), `"release":"api-bad"`)
	var installs, uninstalls int
	for _, l := range writeLines(strings.Join(attempts, "\n")) {
		switch {
		case strings.Contains(l, `"message":"release install"`), strings.Contains(l, `"message":"release reinstall"`):
			installs++
		case strings.Contains(l, `"message":"release uninstall"`):
			uninstalls++
		}
	}
	if installs != 3 || uninstalls != 1 {
		t.Errorf("api-bad: %d attempts and %d uninstalls, want 1 + 2 retries and 1:\n%s", installs, uninstalls, strings.Join(attempts, "\n"))
	}

	// The Deployment never gets ready: revision 2 fails, revision 3 is revision 1 again.
	write("true")
	rolledBack := e.WaitRelease("web-app", "rolled back after the failed upgrade", func(r *format.Release) bool {
		return deployedAt(3)(r) && r.Values["deployment"] == false
	})
	e.waitEvent("web", "RetriesExhausted")
	e.waitPasses(p, len(p.Output()), 3)
	metric := e.metricsOf(p)
	if v := metric(`autox_release_spec_retries_exhausted{release_spec="app",spec="web"}`); v != "1" {
		t.Errorf("autox_release_spec_retries_exhausted of web/app = %q, want 1", v)
	}
	if r := e.Release("web-app"); r.Revision != rolledBack.Revision {
		t.Fatalf("web-app after its retries were used up: revision %d, want %d", r.Revision, rolledBack.Revision)
	}
	if r := e.Release("api-bad"); r != nil {
		t.Fatalf("api-bad installed again after its retries were used up: %+v", r)
	}
	if code := p.Stop(patience); code != 0 {
		t.Fatalf("SIGTERM: exit code %d", code)
	}

	// A restart remembers: no attempt, no write.
	plan := e.policyPlan(cfg)
	if s := plan["web-app"]; s.Action != "exhausted" || s.Pending != "upgrade" || s.Policies.Remediation.Failures != 1 || !s.Policies.Remediation.Exhausted {
		t.Errorf("plan of web-app: %+v %+v", s, s.Policies.Remediation)
	}
	if s := plan["api-bad"]; s.Action != "exhausted" || s.Pending != "install" {
		t.Errorf("plan of api-bad: %+v", s)
	}
	p = e.run(cfg)
	e.waitPasses(p, e.waitLog(p, leadingLine), 3)
	if w := writeLines(p.Output()); len(w) != 0 {
		t.Fatalf("the restarted autox tried again:\n%s", strings.Join(w, "\n"))
	}

	// A new trigger label is a new start: one attempt, then the rollback.
	e.Relabel("web", version("2.0.0"))
	e.WaitRelease("web-app", "rolled back after the new attempt", deployedAt(5))
	if code := p.Stop(patience); code != 0 {
		t.Fatalf("SIGTERM: exit code %d", code)
	}
}

// TestCRDChartUsableByItsDependent: release spec defs installs a chart
// whose templates (not crds/) hold a CustomResourceDefinition, and probe,
// which comes after it (dependsOn), an object of that kind. probe installs
// as soon as defs is deployed: no failed install, no error line, no retry.
func TestCRDChartUsableByItsDependent(t *testing.T) {
	e := newEnv(t)
	t.Cleanup(func() {
		dc, err := dynamic.NewForConfig(cluster.Config)
		if err == nil {
			crds := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
			_ = dc.Resource(crds).Delete(context.Background(), "probes.probe.autox.test", metav1.DeleteOptions{})
		}
	})
	e.Deployment("web", version("1.0.0"))
	p := e.run(e.WriteConfig(webSpec(`      defs: {chart: {path: {{.Charts}}/probe-crd}}
      probe: {chart: {path: {{.Charts}}/probe}, dependsOn: [defs]}
`)), "--resync", "1h")
	metric := e.metricsOf(p)
	e.WaitRelease("web-defs", "installed", deployedAt(1))
	e.WaitRelease("web-probe", "installed after defs", deployedAt(1))
	if n := metric(`autox_helm_operations_total{action="install",result="error"}`); n != "" && n != "0" {
		t.Errorf("%s failed installs", n)
	}
	if strings.Contains(p.Output(), `"level":"error"`) {
		t.Errorf("error lines:\n%s", p.Output())
	}
	p.Stop(patience)
}
