package e2e

import (
	"encoding/json"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/autox-dev/autox/internal/testenv"
)

type planStep struct {
	Action, Spec, ReleaseSpec, Release, Namespace, Reason string
}

// cli runs an autox command to its end and returns all it printed.
func (e *env) cli(wantCode int, args ...string) string {
	e.t.Helper()
	return e.cliRun(wantCode, args...).Output()
}

// cliStdout is cli's standard output alone: a JSON document, without the
// warnings a command logs on standard error.
func (e *env) cliStdout(wantCode int, args ...string) string {
	e.t.Helper()
	return e.cliRun(wantCode, args...).Stdout()
}

func (e *env) cliRun(wantCode int, args ...string) *testenv.Process {
	e.t.Helper()
	p := testenv.StartCommand(e.t, autox, append(args, "--kubeconfig", cluster.Kubeconfig)...)
	code, err := p.Wait(patience)
	if err != nil || code != wantCode {
		e.t.Fatalf("autox %s: exit %d (want %d), %v\n%s", strings.Join(args, " "), code, wantCode, err, p.Output())
	}
	return p
}

func (e *env) plan(config string, extra ...string) []planStep {
	e.t.Helper()
	out := e.cliStdout(0, append([]string{"plan", "--config", config, "-o", "json"}, extra...)...)
	var steps []planStep
	if err := json.Unmarshal([]byte(out), &steps); err != nil {
		e.t.Fatalf("plan -o json: %v\n%s", err, out)
	}
	return steps
}

const planBefore = `
namespaces: [{{.NS}}]
specs:
  a:
    trigger: {group: apps, version: v1, resource: deployments, name: web, namespace: {{.NS}}}
    releaseSpecs:
      x: {chart: {path: {{.Charts}}/hello}, values: {tasks: [ready, http]}}
      gone: {chart: {path: {{.Charts}}/hello}}
  b:
    trigger: {group: apps, version: v1, resource: deployments, name: db, namespace: {{.NS}}}
    releaseSpecs:
      yy: {chart: {path: {{.Charts}}/hello}}
`

const planAfter = `
namespaces: [{{.NS}}]
specs:
  a:
    trigger: {group: apps, version: v1, resource: deployments, name: web, namespace: {{.NS}}}
    releaseSpecs:
      x: {chart: {path: {{.Charts}}/hello}, values: {tasks: [ready, grpc]}}
      v2: {chart: {path: {{.Charts}}/hello-v2}}
  c:
    trigger: {group: apps, version: v1, resource: deployments, name: api, namespace: {{.NS}}}
    releaseSpecs:
      z: {chart: {path: {{.Charts}}/hello}}
      taken: {chart: {path: {{.Charts}}/hello}, releaseName: foreign}
  d:
    trigger: {group: apps, version: v1, resource: deployments, name: unlabelled, namespace: {{.NS}}}
    releaseSpecs:
      w: {chart: {path: {{.Charts}}/hello}}
`

// TestPlanMatchesRun proves that plan and run cannot disagree: run performs
// exactly the Helm writes the plan listed, and afterwards the plan is empty.
func TestPlanMatchesRun(t *testing.T) {
	e := newEnv(t)
	for _, n := range []string{"web", "db", "api"} {
		e.Deployment(n, version("1.0.0"))
	}
	e.Deployment("unlabelled", nil)
	cluster.InstallUnlabelled(t, e.NS, "foreign", filepath.Join(e.Charts, "hello"))

	before := e.WriteConfig(planBefore)
	p := e.run(before)
	for _, r := range []string{"a-x", "a-gone", "b-yy"} {
		e.WaitRelease(r, "installed", deployedAt(1))
	}
	p.Stop(patience)

	after := e.WriteConfigAs("after.yaml", planAfter)
	steps := e.plan(after)
	got := map[string]string{}
	for _, s := range steps {
		got[s.Release] = s.Action + ": " + s.Reason
		if s.Namespace != e.NS || s.Spec == "" {
			t.Errorf("incomplete step %+v", s)
		}
	}
	want := map[string]string{
		"a-x":     "upgrade: values changed: .tasks[1]",
		"a-v2":    "install: trigger labelled, release not found",
		"a-gone":  "uninstall: release spec removed from config",
		"b-yy":    "uninstall: spec removed from config",
		"c-z":     "install: trigger labelled, release not found",
		"foreign": "conflict: a release of this name exists without autox labels; remove or rename it",
		"d-w":     "unchanged: release not found",
	}
	for r, w := range want {
		if got[r] != w {
			t.Errorf("plan for %s = %q, want %q", r, got[r], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("plan has %d steps, want %d: %v", len(got), len(want), got)
	}
	e.cli(2, "plan", "--config", after, "--detailed-exitcode")
	table := e.cli(0, "plan", "--config", after)
	if !strings.Contains(table, "ACTION") || !strings.Contains(table, "values changed: .tasks[1]") {
		t.Errorf("plan table:\n%s", table)
	}

	// Run the new config and collect the Helm writes it logs.
	p = e.run(after)
	e.WaitRelease("c-z", "installed", deployedAt(1))
	e.WaitRelease("b-yy", "uninstalled", gone)
	testenv.Eventually(t, patience, "converged", func() (bool, error) {
		return strings.Count(p.Output(), `"message":"pass complete"`) >= 3, nil
	})
	p.Stop(patience)
	var planned, done []string
	for _, s := range steps {
		if s.Action != "unchanged" && s.Action != "conflict" && s.Action != "wait" {
			planned = append(planned, s.Action+" "+s.Release)
		}
	}
	for _, line := range strings.Split(p.Output(), "\n") {
		var l struct{ Message, Action, Release string }
		if json.Unmarshal([]byte(line), &l) == nil && strings.HasPrefix(l.Message, "release ") && l.Action != "conflict" && l.Action != "wait" {
			done = append(done, l.Action+" "+l.Release)
		}
	}
	sort.Strings(planned)
	sort.Strings(done)
	if strings.Join(planned, ",") != strings.Join(done, ",") {
		t.Errorf("run did %v, plan said %v", done, planned)
	}

	// Converged: nothing pending.
	e.cli(0, "plan", "--config", after, "--detailed-exitcode")

	// list and --orphans.
	var rows []struct {
		Release, Spec, ReleaseSpec, Chart, Version, Status string
		Revision                                           int
		Orphan                                             bool
	}
	out := e.cliStdout(0, "list", "--config", after, "-o", "json")
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("list -o json: %v\n%s", err, out)
	}
	if len(rows) != 3 {
		t.Errorf("list: %d rows, want a-x, a-v2, c-z: %s", len(rows), out)
	}
	for _, r := range rows {
		if r.Release == "a-x" && (r.Revision != 2 || r.Chart != "hello" || r.Version != "0.1.0" || r.Status != "deployed" || r.Orphan) {
			t.Errorf("list row %+v", r)
		}
	}
	// Against the old config, the new releases are orphans.
	out = e.cliStdout(0, "list", "--config", before, "--orphans", "-o", "json")
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || !rows[0].Orphan {
		t.Errorf("list --orphans against the old config: %s", out)
	}
	if table := e.cli(0, "list", "--config", after); !strings.Contains(table, "a-v2") || !strings.Contains(table, "0.2.0") {
		t.Errorf("list table:\n%s", table)
	}
}
