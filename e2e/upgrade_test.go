package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/autox-dev/autox/internal/format"
	"github.com/autox-dev/autox/internal/releasetest"
	"github.com/autox-dev/autox/internal/testenv"
)

// breakingRule is what a failure of the upgrade tests means.
const breakingRule = `what autox writes on releases and compares — the injected "autox" values, ` +
	`the autox.dev/* labels, the digest and its inputs — is release format v1: a change to it is breaking ` +
	`(DESIGN §5, "breaking vs non-breaking") and needs a new format version the config names, ` +
	`with a migration that makes no Helm write`

// fleetConfig is a config valid for every version in testdata/upgrade/versions.txt
// (the first has no selector, no valuesFrom, no instance): named triggers of
// two kinds in two namespaces, a release in another namespace than its
// trigger, a custom release name and trigger labels, an onChange: reinstall
// release spec, values with nested lists and maps, and a spec whose trigger
// is not labelled. {{.NS2}} is the second namespace, colour the value a
// config change changes.
func fleetConfig(ns2, colour string) string {
	return strings.NewReplacer("{{.NS2}}", ns2, "{{.Colour}}", colour).Replace(`
namespaces: [{{.NS}}, {{.NS2}}]
specs:
  web:
    trigger: {group: apps, version: v1, resource: deployments, name: web, namespace: {{.NS}}}
    releaseSpecs:
      hello:
        chart: {path: {{.Charts}}/hello}
        values:
          greeting: hi
          colour: {{.Colour}}
          tasks: [ready, {name: http, args: [--rate, "10"], ratio: 0.5}]
          limits: {cpu: 100m, memory: {request: 64Mi, max: 128Mi}, replicas: 3}
          empty: {list: [], map: {}}
      job:
        chart: {path: {{.Charts}}/job}
        onChange: reinstall
        values: {message: run the experiment}
  api:
    trigger: {version: v1, resource: configmaps, name: api, namespace: {{.NS}}, labels: []}
    releaseSpecs:
      hello:
        chart: {path: {{.Charts}}/hello}
        namespace: {{.NS2}}
        values:
          endpoints: [{host: a.example, port: 80}, {host: b.example, port: 443, tls: true}]
  worker:
    trigger:
      group: apps
      version: v1
      resource: deployments
      name: worker
      namespace: {{.NS2}}
      labels: [example.com/track, app.kubernetes.io/version]
    releaseSpecs:
      canary:
        chart: {path: {{.Charts}}/hello}
        releaseName: worker-canary-exp
        values: {weights: {stable: 90, canary: 10}, matrix: [[1, 2], [3, 4]]}
  idle:
    trigger: {group: apps, version: v1, resource: deployments, name: idle, namespace: {{.NS2}}}
    releaseSpecs:
      hello: {chart: {path: {{.Charts}}/hello}}
`)
}

// TestUpgradeAcrossLandedVersions runs, for every commit listed in
// testdata/upgrade/versions.txt, autox as it was then against today's build:
// the old build converges a fleet; today's build on the same config makes no
// Helm write over several passes and proves every release in sync from its
// records; a config change is applied once; the old build, started again on
// the changed config (a downgrade), makes no Helm write either, and applies
// the next change once. The build of the last Helm 3 SDK (ad478b6) makes
// this v3-autox -> v4-autox -> v3-autox over the same fleet.
//
// Old builds are cached by commit outside the repository (see
// testenv.BuildAutoxAt): only a new commit in the file costs a build.
func TestUpgradeAcrossLandedVersions(t *testing.T) {
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	versions, err := testenv.ReadLandedVersions(filepath.Join(root, "testdata", "upgrade", "versions.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range versions {
		t.Run(v.Commit, func(t *testing.T) {
			t.Parallel() // each in namespaces and a Lease of its own
			old, full, err := testenv.BuildAutoxAt(v.Commit)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s (%s): %s", v.Commit, v.Note, old)
			upgradeAndDowngrade(t, old, full)
		})
	}
}

func upgradeAndDowngrade(t *testing.T, old, oldVersion string) {
	e := newEnv(t)
	ns2 := cluster.Namespace(t)
	namespaces := []string{e.NS, ns2}
	e.Deployment("web", version("1.0.0"))
	e.putConfigMap("api", nil)
	cluster.CreateDeployment(t, ns2, "worker", map[string]string{"example.com/track": "canary", "app.kubernetes.io/version": "0.9.0"})
	cluster.CreateDeployment(t, ns2, "idle", nil)
	cfg := e.WriteConfig(fleetConfig(ns2, "blue"))
	ns2Releases := releasetest.Releases{T: t, Helm: e.Helm, Namespace: ns2, Patience: patience}

	// The old build converges the fleet and stops cleanly.
	p := testenv.StartProcess(t, old, e.runArgsFor(old, cfg)...)
	e.WaitRelease("web-hello", "installed by "+oldVersion, deployedAt(1))
	e.WaitRelease("web-job", "installed by "+oldVersion, deployedAt(1))
	ns2Releases.Wait("api-hello", "installed by "+oldVersion, deployedAt(1))
	ns2Releases.Wait("worker-canary-exp", "installed by "+oldVersion, deployedAt(1))
	e.waitPasses(p, e.waitLog(p, leadingLine), 2)
	if code := p.Stop(patience); code != 0 {
		t.Fatalf("the old build %s: SIGTERM: exit code %d, want 0", oldVersion, code)
	}
	if !strings.Contains(p.Output(), `"version":"`+oldVersion+`"`) {
		t.Fatalf("the process did not run the build of %s:\n%s", oldVersion, p.Output())
	}
	if r := ns2Releases.Get("idle-hello"); r != nil {
		t.Fatalf("the old build installed a release for an unlabelled trigger: %+v", r)
	}
	converged := helmRecords(t, namespaces...)

	// Today's build: the same config is valid and changes nothing.
	v := testenv.StartProcess(t, autox, "validate", "--config", cfg)
	if code, err := v.Wait(patience); err != nil || code != 0 {
		t.Fatalf("today's build rejects a config that %s accepted (exit %d, %v): config format v1 must stay valid "+
			"(DESIGN §5, \"breaking vs non-breaking\"); a breaking change needs a new format version the config names:\n%s", oldVersion, code, err, v.Output())
	}
	e.planUnchanged(autox, cfg, "today's build (on the releases "+oldVersion+" made)")
	p = e.run(cfg)
	quiet := e.quietPasses(p, fmt.Sprintf("today's build (upgraded from %s, same config)", oldVersion), true)
	sameRecords(t, converged, helmRecords(t, namespaces...), "today's build (upgraded from "+oldVersion+", same config)")

	// Today's build: the release policies added to every kind of release
	// spec (and suspend to specs) are a config change, and no Helm write.
	quiet = e.policiesOnly(p, fleetPolicies(t, ns2, fleetConfig(ns2, "blue")), quiet)
	sameRecords(t, converged, helmRecords(t, namespaces...), "today's build (the release policies added to the config)")

	// A config change is applied once: one new revision of one release
	// (the policies going with it are none).
	e.WriteConfig(fleetConfig(ns2, "green"))
	e.WaitRelease("web-hello", "upgraded by the config change", func(r *format.Release) bool {
		return deployedAt(2)(r) && r.Values["colour"] == "green"
	})
	e.waitPasses(p, e.waitLog(p, `"message":"release upgrade"`), 3)
	if code := p.Stop(patience); code != 0 {
		t.Fatalf("today's build: SIGTERM: exit code %d, want 0", code)
	}
	if w := writeLines(p.Output()[quiet:]); len(w) != 1 || !strings.Contains(w[0], `"message":"release upgrade"`) || !strings.Contains(w[0], `"release":"web-hello"`) {
		t.Errorf("one value of web-hello changed: Helm writes %q, want one upgrade of web-hello", w)
	}
	changed := helmRecords(t, namespaces...)
	added, removed, rewritten := recordChanges(converged, changed)
	v1, v2 := e.NS+"/sh.helm.release.v1.web-hello.v1", e.NS+"/sh.helm.release.v1.web-hello.v2"
	if fmt.Sprint(added) != fmt.Sprint([]string{v2}) || len(removed) != 0 || fmt.Sprint(rewritten) != fmt.Sprint([]string{v1}) {
		t.Errorf("a change of one value of web-hello: records added %v, removed %v, rewritten %v; want %s added and %s superseded, nothing else",
			added, removed, rewritten, v2, v1)
	}

	// The downgrade: the old build on the changed config changes nothing.
	// Its passes trust the records' digest labels today's build wrote;
	// its plan compares the decoded releases.
	e.planUnchanged(old, cfg, "the old build "+oldVersion+" (on the releases today's build made)")
	p = testenv.StartProcess(t, old, e.runArgsFor(old, cfg)...)
	e.quietPasses(p, fmt.Sprintf("the old build %s (downgraded to from today's build, same config)", oldVersion), false)
	sameRecords(t, changed, helmRecords(t, namespaces...), "the old build "+oldVersion+" (downgraded to from today's build, same config)")

	// A config change after the downgrade is applied once too, on the
	// record today's build wrote (for the build of the last Helm 3 SDK:
	// a record Helm 4 wrote, read by Helm 3).
	e.WriteConfig(fleetConfig(ns2, "red"))
	e.WaitRelease("web-hello", "upgraded by the old build "+oldVersion, func(r *format.Release) bool {
		return deployedAt(3)(r) && r.Values["colour"] == "red"
	})
	e.waitPasses(p, len(p.Output()), 2)
	if code := p.Stop(patience); code != 0 {
		t.Fatalf("the old build %s: SIGTERM: exit code %d, want 0", oldVersion, code)
	}
	v3 := e.NS + "/sh.helm.release.v1.web-hello.v3"
	added, removed, rewritten = recordChanges(changed, helmRecords(t, namespaces...))
	if fmt.Sprint(added) != fmt.Sprint([]string{v3}) || len(removed) != 0 || fmt.Sprint(rewritten) != fmt.Sprint([]string{v2}) {
		t.Errorf("the old build %s, one value of web-hello changed: records added %v, removed %v, rewritten %v; want %s added and %s superseded, nothing else",
			oldVersion, added, removed, rewritten, v3, v2)
	}
}

// fleetPolicies adds release policies to fleetConfig: each release spec
// sets some (web/hello a timeout, maxHistory and no retries; web/job comes
// after web/hello, skips CRDs and hooks; api/hello waits for its objects
// and Jobs with one rollback retry; worker/canary is suspended), and so
// does spec idle. None of them is part of the release format.
func fleetPolicies(t *testing.T, ns2, config string) string {
	t.Helper()
	for _, r := range [][2]string{
		{"      hello:\n        chart: {path: {{.Charts}}/hello}\n        values:\n          greeting: hi",
			"      hello:\n        chart: {path: {{.Charts}}/hello}\n        timeout: 4m\n        maxHistory: 2\n        remediation: {retries: 0}\n        values:\n          greeting: hi"},
		{"        values: {message: run the experiment}",
			"        values: {message: run the experiment}\n        dependsOn: [hello]\n        crds: Skip\n        disableHooks: true"},
		{"        namespace: " + ns2 + "\n",
			"        namespace: " + ns2 + "\n        wait: true\n        waitForJobs: true\n        timeout: 3m\n        remediation: {retries: 1, onFailure: rollback}\n"},
		{"        releaseName: worker-canary-exp", "        releaseName: worker-canary-exp\n        suspend: true"},
		{"name: idle, namespace: " + ns2 + "}", "name: idle, namespace: " + ns2 + "}\n    suspend: true"},
	} {
		if strings.Count(config, r[0]) != 1 {
			t.Fatalf("fleetPolicies: %q is not once in fleetConfig", r[0])
		}
		config = strings.Replace(config, r[0], r[1], 1)
	}
	return config
}

// policiesOnly writes config, which differs from the one p runs on in
// release policies only, and fails the test unless p reloads it, makes no
// Helm write and then finds every spec in sync from the release records at
// each of 3 passes, and `plan` finds nothing to do. since is where p's
// output was checked up to; it returns where the passes end.
func (e *env) policiesOnly(p *testenv.Process, config string, since int) int {
	e.t.Helper()
	cfg := e.WriteConfig(config)
	var reloaded int
	testenv.Eventually(e.t, patience, "the config with policies reloaded", func() (bool, error) {
		i := strings.Index(p.Output()[since:], `"message":"config changes"`)
		reloaded = since + i
		return i >= 0, nil
	})
	e.waitPasses(p, reloaded, 3)
	out := p.Output()
	if w := writeLines(out[since:]); len(w) != 0 {
		e.t.Fatalf("a change of release policies only made %d Helm writes (%s); policies are not part of the release format "+
			"(DESIGN §5): they change how the next operation runs, never cause one", len(w), strings.Join(w, "\n"))
	}
	for i, line := range passLines(out[reloaded:]) {
		if !strings.Contains(line, `"queued":0`) {
			e.t.Errorf("pass %d after the policy change did not find every spec in sync from the release records (%s)", i+1, line)
		}
	}
	e.planUnchanged(autox, cfg, "today's build (release policies added)")
	return len(out)
}

// quietPasses waits for 3 passes of p after it started to lead and fails
// the test when p made a Helm write; it returns where the passes end in p's
// output. With inSync (today's build), every pass after the first must also
// have found every spec in sync from the release records' labels, the digest
// included: a release whose records do not prove it (a digest computed
// another way) is reconciled in full at every pass.
func (e *env) quietPasses(p *testenv.Process, who string, inSync bool) int {
	e.t.Helper()
	since := e.waitLog(p, leadingLine)
	e.waitPasses(p, since, 3)
	out := p.Output()
	if w := writeLines(out); len(w) != 0 {
		e.t.Fatalf("%s made %d Helm writes (%s); %s", who, len(w), strings.Join(w, "\n"), breakingRule)
	}
	if !inSync {
		return len(out)
	}
	passes := passLines(out[since:])
	for i, line := range passes[1:] {
		if !strings.Contains(line, `"queued":0`) {
			e.t.Errorf("%s: pass %d of %d did not find every spec in sync from the release records (%s); %s",
				who, i+2, len(passes), line, breakingRule)
		}
	}
	return len(out)
}

// planUnchanged fails the test unless `bin plan` finds nothing to do: it
// compares every release, decoded, with what that build wants, where a
// quiet pass trusts the records' digest labels.
func (e *env) planUnchanged(bin, config, who string) {
	e.t.Helper()
	p := testenv.StartProcess(e.t, bin, "plan", "--config", config, "--kubeconfig", cluster.Kubeconfig, "--detailed-exitcode")
	switch code, err := p.Wait(patience); {
	case err != nil || code == 1:
		e.t.Fatalf("%s: plan failed (exit %d, %v):\n%s", who, code, err, p.Output())
	case code != 0:
		e.t.Fatalf("%s: plan would change releases; %s:\n%s", who, breakingRule, p.Output())
	}
}

// passLines returns the "pass complete" log lines of out.
func passLines(out string) []string { return linesWith(out, passLine) }

// writeLines returns the log lines of Helm writes in out (see helmWrites).
func writeLines(out string) []string { return linesWith(out, `"message":"release `) }

func linesWith(out, text string) []string {
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, text) {
			lines = append(lines, l)
		}
	}
	return lines
}

// runArgsFor are e.runArgs for a build of another version, which may not
// have every flag today's harness passes: a flag autox works without (log
// level, leader election timings: the defaults are slower) is left out when
// the build lacks it; one the test cannot do without fails the test, naming
// the version to give its arguments here.
func (e *env) runArgsFor(bin, config string) []string {
	e.t.Helper()
	known, err := testenv.RunFlags(bin)
	if err != nil {
		e.t.Fatal(err)
	}
	optional := map[string]bool{"log-level": true, "leader-election-lease-duration": true,
		"leader-election-renew-deadline": true, "leader-election-retry-period": true}
	want := e.runArgs(config)
	args := want[:1] // run
	for i := 1; i+1 < len(want); i += 2 {
		name := strings.TrimPrefix(want[i], "--")
		switch {
		case known[name]:
			args = append(args, want[i], want[i+1])
		case optional[name]:
			e.t.Logf("%s has no flag --%s: left out", bin, name)
		default:
			e.t.Fatalf("%s has no flag --%s, which the upgrade test needs: give this version its own arguments in runArgsFor", bin, name)
		}
	}
	return args
}

// helmRecords returns every Helm release record (a Secret labelled
// owner=helm) of the namespaces: namespace/name -> resourceVersion, which
// changes with every write of the record.
func helmRecords(t *testing.T, namespaces ...string) map[string]string {
	t.Helper()
	recs := map[string]string{}
	for _, ns := range namespaces {
		list, err := cluster.Client.CoreV1().Secrets(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "owner=helm"})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range list.Items {
			recs[ns+"/"+s.Name] = s.ResourceVersion
		}
	}
	return recs
}

// recordChanges compares two helmRecords: the records added, removed and
// rewritten (another resourceVersion), each sorted.
func recordChanges(before, after map[string]string) (added, removed, rewritten []string) {
	for k, rv := range after {
		switch old, ok := before[k]; {
		case !ok:
			added = append(added, k)
		case old != rv:
			rewritten = append(rewritten, k)
		}
	}
	for k := range before {
		if _, ok := after[k]; !ok {
			removed = append(removed, k)
		}
	}
	sort.Strings(added)
	sort.Strings(removed)
	sort.Strings(rewritten)
	return added, removed, rewritten
}

// sameRecords fails the test when a Helm release record was written.
func sameRecords(t *testing.T, before, after map[string]string, who string) {
	t.Helper()
	if added, removed, rewritten := recordChanges(before, after); len(added)+len(removed)+len(rewritten) != 0 {
		t.Fatalf("%s wrote Helm release records: added %v, removed %v, rewritten %v; %s", who, added, removed, rewritten, breakingRule)
	}
}
