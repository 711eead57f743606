package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/release/common"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/autox-dev/autox/internal/format"
	"github.com/autox-dev/autox/internal/testenv"
)

// events returns the reasons and messages of the Events on one object.
func (e *env) events(object string) (map[string]bool, string) {
	e.t.Helper()
	list, err := cluster.Client.CoreV1().Events(e.NS).List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + object})
	if err != nil {
		e.t.Fatal(err)
	}
	reasons := map[string]bool{}
	var text strings.Builder
	for _, ev := range list.Items {
		reasons[ev.Reason] = true
		fmt.Fprintf(&text, "%s: %s\n", ev.Reason, ev.Message)
	}
	return reasons, text.String()
}

// waitEvent waits for an Event of that reason on the object.
func (e *env) waitEvent(object, reason string) {
	e.t.Helper()
	testenv.Eventually(e.t, patience, "a "+reason+" Event on "+object, func() (bool, error) {
		reasons, _ := e.events(object)
		return reasons[reason], nil
	})
}

// TestEventsOnTheTrigger: what autox does for a trigger shows in
// `kubectl describe` of it — conflict, reinstall, uninstall.
func TestEventsOnTheTrigger(t *testing.T) {
	e := newEnv(t)
	cluster.InstallUnlabelled(t, e.NS, "web-hello", e.Charts+"/hello")
	e.Deployment("web", version("1.0.0"))
	k := testenv.NewKubeletDir(t, "config.yaml", e.render(webConfig))
	p := e.run(k.Path(), "--config-debounce", "100ms")
	e.WaitRelease("web-job", "installed", deployedAt(1))
	e.waitEvent("web", "ReleaseConflict")
	e.waitEvent("web", "ReleaseInstalled")

	e.Relabel("web", version("2.0.0"))
	e.waitEvent("web", "ReleaseReinstalled")

	// The job release spec leaves the config while the trigger stays.
	k.Update(strings.Replace(e.render(webConfig), "      job:\n", "      gone:\n", 1))
	e.WaitRelease("web-job", "uninstalled with its release spec", gone)
	e.waitEvent("web", "ReleaseUninstalled")
	p.Stop(patience)
}

// TestUnlockAfterHelmTimeoutPlusGrace kills autox while an upgrade waits on
// its hook, which leaves the release pending-upgrade. A new autox with
// --helm-timeout 2s leaves it alone while the record is younger than 2s +
// 30s (another process may still be working on it), then rolls it back to
// its deployed revision, and says so in an Event.
func TestUnlockAfterHelmTimeoutPlusGrace(t *testing.T) {
	e := newEnv(t)
	e.Deployment("web", version("1.0.0"))
	cfg := e.WriteConfig(webSpec(`      up: {chart: {path: {{.Charts}}/hookupgrade}}
`))
	first := e.run(cfg, "--helm-timeout", "1h")
	e.WaitRelease("web-up", "installed", deployedAt(1))
	e.Relabel("web", version("2.0.0"))
	blockedInstall(t, e) // the pre-upgrade hook
	pending := e.WaitRelease("web-up", "pending-upgrade", func(r *format.Release) bool {
		return r != nil && r.Status == common.StatusPendingUpgrade && r.Revision == 2
	})
	first.Kill()
	// Back to the deployed revision's label, so that after the rollback the
	// release is in sync and nothing upgrades it again.
	e.Relabel("web", version("1.0.0"))

	p := e.run(cfg, "--helm-timeout", "2s")
	testenv.Eventually(t, patience, "the young pending release left alone", func() (bool, error) {
		return strings.Contains(p.Output(), "waiting: release is pending-upgrade since"), nil
	})
	if r := e.Release("web-up"); r.Status != common.StatusPendingUpgrade || r.Revision != 2 {
		t.Fatalf("the pending release was touched before it was stale: %+v", r)
	}
	rolledBack := e.Releases()
	rolledBack.Patience = 2 * patience // the stale age alone is 32s
	r := rolledBack.Wait("web-up", "rolled back to revision 1's content", deployedAt(3))
	if labelOf(r) != "1.0.0" {
		t.Errorf("rolled back to a release made for %q", labelOf(r))
	}
	// Not before the stale age: the rollback's time against the pending
	// record's last write (the API server's clock, whole seconds).
	if age := r.Updated.Sub(pending.Modified); age < 32*time.Second-time.Second {
		t.Errorf("unlocked %s after the pending record was written, before --helm-timeout + 30s", age)
	}
	e.waitEvent("web", "ReleaseRolledBack")
	p.Stop(patience)
}

// TestNotReadyWhileAnInformerCannotList: a trigger resource the API server
// does not serve keeps /readyz failing, with a reason, while other specs
// are served; /healthz passes (a bad config is no reason to restart).
func TestNotReadyWhileAnInformerCannotList(t *testing.T) {
	e := newEnv(t)
	e.Deployment("web", version("1.0.0"))
	p := e.run(e.WriteConfig(oneSpec + `  widget:
    trigger: {group: example.com, version: v1, resource: widgets, name: w, namespace: {{.NS}}}
    releaseSpecs:
      hello: {chart: {path: {{.Charts}}/hello}}
`))
	base := e.httpBase(p)
	e.WaitRelease("web-hello", "installed beside the unreadable trigger", deployedAt(1))
	e.waitPasses(p, 0, 2)
	code, body := httpGet(base + "/readyz")
	if code != 503 || !strings.Contains(body, "informers have not synced") {
		t.Errorf("/readyz with an informer that cannot list = %d %q, want 503 with the reason", code, body)
	}
	if code, body := httpGet(base + "/healthz"); code != 200 {
		t.Errorf("/healthz = %d %q", code, body)
	}
	p.Stop(patience)
}

// TestValuesNeverShown gives a release real values, one of which the API
// server quotes in its error (an invalid label value), and another release a
// secret that deploys fine: neither value may appear in autox's log, in any
// Event, or in `autox plan`.
func TestValuesNeverShown(t *testing.T) {
	const secret, quoted = "hunter2-s3cret-token", "Not A Label Value!"
	e := newEnv(t)
	e.Deployment("web", version("1.0.0"))
	cfg := e.WriteConfig(webSpec(`      hello: {chart: {path: {{.Charts}}/hello}, values: {greeting: "`) + secret + `"}}
      label: {chart: {path: {{.Charts}}/label}, values: {label: "` + quoted + `", token: "` + secret + `"}}
`)
	p := e.run(cfg)
	if r := e.WaitRelease("web-hello", "installed", deployedAt(1)); r.Values["greeting"] != secret {
		t.Fatalf("the test's value is not in the release: %v", r.Values)
	}
	testenv.Eventually(t, patience, "the rejected release logged", func() (bool, error) {
		return strings.Contains(p.Output(), "Invalid value"), nil
	})
	e.waitEvent("web", "ReleaseFailed")
	plan := e.cli(0, "plan", "--config", cfg, "-o", "json", "--log-level", "debug")
	p.Stop(patience)
	_, events := e.events("web")
	for where, text := range map[string]string{"log": p.Output(), "Events": events, "plan": plan} {
		for _, v := range []string{secret, quoted} {
			if strings.Contains(text, v) {
				t.Errorf("the value %q appears in the %s", v, where)
			}
		}
	}
	if !strings.Contains(p.Output(), "***") || !strings.Contains(events, "***") {
		t.Errorf("the log or the failure Event does not show the redacted error:\n%s", events)
	}
}

// TestTwoInstancesShareANamespace runs two autox installations (two teams)
// on one namespace: each owns only its own releases, a release of a wanted
// name owned by the other is a conflict, and neither's start-up cleanup,
// list or plan touches or shows the other's.
func TestTwoInstancesShareANamespace(t *testing.T) {
	e := newEnv(t)
	e.Deployment("web", version("1.0.0"))
	e.Deployment("api", version("1.0.0"))
	teamA := e.WriteConfigAs("a.yaml", `
namespaces: [{{.NS}}]
specs:
  web:
    trigger: {group: apps, version: v1, resource: deployments, name: web, namespace: {{.NS}}}
    releaseSpecs:
      hello: {chart: {path: {{.Charts}}/hello}}
  api:
    trigger: {group: apps, version: v1, resource: deployments, name: api, namespace: {{.NS}}}
    releaseSpecs:
      hello: {chart: {path: {{.Charts}}/hello}}
`)
	// Team B wants web-hello too, and has no spec api.
	teamB := e.WriteConfigAs("b.yaml", webSpec(`      hello: {chart: {path: {{.Charts}}/hello}}
      mine: {chart: {path: {{.Charts}}/hello}, releaseName: b-mine}
`))
	a := e.run(teamA, "--instance", "team-a")
	webA := e.WaitRelease("web-hello", "installed by team a", deployedAt(1))
	apiA := e.WaitRelease("api-hello", "installed by team a", deployedAt(1))
	if webA.Instance != "team-a" {
		t.Fatalf("web-hello instance %q", webA.Instance)
	}
	b := e.run(teamB, "--instance", "team-b")
	if r := e.WaitRelease("b-mine", "installed by team b", deployedAt(1)); r.Instance != "team-b" {
		t.Errorf("b-mine instance %q", r.Instance)
	}
	testenv.Eventually(t, patience, "team b reports the conflict", func() (bool, error) {
		return strings.Contains(b.Output(), `belongs to autox instance \"team-a\"`), nil
	})
	e.waitPasses(b, 0, 3)
	for _, want := range []*format.Release{webA, apiA} {
		if r := e.Release(want.Name); r == nil || r.Revision != 1 || r.Instance != "team-a" || !r.FirstDeployed.Equal(want.FirstDeployed) {
			t.Errorf("team b touched team a's %s: %+v", want.Name, r)
		}
	}
	list := e.cli(0, "list", "--config", teamB, "--instance", "team-b", "-o", "json")
	if !strings.Contains(list, `"b-mine"`) || strings.Contains(list, `"web-hello"`) || strings.Contains(list, `"api-hello"`) {
		t.Errorf("team b's list shows another instance's releases:\n%s", list)
	}
	plan := e.cli(0, "plan", "--config", teamB, "--instance", "team-b", "-o", "json")
	if !strings.Contains(plan, `"action": "conflict"`) || strings.Contains(plan, `"uninstall"`) {
		t.Errorf("team b's plan:\n%s", plan)
	}
	b.Stop(patience)
	a.Stop(patience)
}

// TestSpecsWithNoValue: `specs:` with nothing after it is what a file cut
// short looks like; it is an error, never "no releases".
func TestSpecsWithNoValue(t *testing.T) {
	e := newEnv(t)
	e.Deployment("web", version("1.0.0"))
	cut := e.WriteConfigAs("cut.yaml", "namespaces: [{{.NS}}]\nspecs:\n")
	v := testenv.StartProcess(t, autox, "validate", "--config", cut)
	if code, err := v.Wait(patience); err != nil || code != 1 || !strings.Contains(v.Output(), "specs: has no value") || !strings.Contains(v.Output(), "specs: {}") {
		t.Errorf("validate of `specs:` with no value: exit %d, %v:\n%s", code, err, v.Output())
	}
	if code, err := e.run(cut).Wait(patience); err != nil || code != 1 {
		t.Fatalf("run with `specs:` and no value: exit %d, %v", code, err)
	}

	k := testenv.NewKubeletDir(t, "config.yaml", e.render(oneSpec))
	p := e.run(k.Path(), "--config-debounce", "100ms", "--config-check-interval", "200ms")
	e.WaitRelease("web-hello", "installed", deployedAt(1))
	k.Update(e.render("namespaces: [{{.NS}}]\nspecs:\n"))
	testenv.Eventually(t, patience, "the cut file rejected", func() (bool, error) {
		return strings.Contains(p.Output(), "specs: has no value"), nil
	})
	e.waitPasses(p, strings.Index(p.Output(), "specs: has no value"), 3)
	if r := e.Release("web-hello"); r == nil || r.Revision != 1 {
		t.Fatalf("a config cut after `specs:` changed the release: %+v", r)
	}
	p.Stop(patience)
}

// TestReinstallKeepsWhatItCannotReplace: under onChange: reinstall, new
// values the chart cannot render leave the running release as it is.
func TestReinstallKeepsWhatItCannotReplace(t *testing.T) {
	e := newEnv(t)
	e.Deployment("web", version("1.0.0"))
	spec := func(values string) string {
		return e.render(webSpec(`      once: {chart: {path: {{.Charts}}/broken}, onChange: reinstall, values: `) + values + `}
`)
	}
	k := testenv.NewKubeletDir(t, "config.yaml", spec("{needed: yes-please}"))
	p := e.run(k.Path(), "--config-debounce", "100ms")
	before := e.WaitRelease("web-once", "installed", deployedAt(1))
	k.Update(spec("{other: value}")) // `needed` gone: the chart cannot render
	testenv.Eventually(t, patience, "the reinstall refused", func() (bool, error) {
		return strings.Contains(p.Output(), "the running release is kept"), nil
	})
	e.waitPasses(p, strings.Index(p.Output(), "the running release is kept"), 2)
	if r := e.Release("web-once"); r == nil || r.Status != common.StatusDeployed || r.Revision != 1 || !r.FirstDeployed.Equal(before.FirstDeployed) {
		t.Fatalf("a reinstall that could not render removed or changed the release: %+v", r)
	}
	p.Stop(patience)
}

// TestConfigMetricsFollowLoads: one bad commit is counted once however many
// checks see it; the success timestamp moves only when a config is loaded;
// a spec that leaves the config takes its series with it.
func TestConfigMetricsFollowLoads(t *testing.T) {
	e := newEnv(t)
	e.Deployment("web", version("1.0.0"))
	e.Deployment("db", version("1.0.0"))
	k := testenv.NewKubeletDir(t, "config.yaml", e.render(twoSpecs))
	p := e.run(k.Path(), "--config-debounce", "100ms", "--config-check-interval", "200ms")
	metric := e.metricsOf(p)
	e.WaitRelease("db-hello", "installed", deployedAt(1))
	testenv.Eventually(t, patience, "db reconciled", func() (bool, error) {
		return metric(`autox_reconcile_total{result="success",spec="db"}`) != "", nil
	})
	loadedAt := metric("autox_config_last_reload_success_timestamp_seconds")

	k.Update("not: [valid")
	testenv.Eventually(t, patience, "the bad commit counted", func() (bool, error) {
		return metric(`autox_config_reloads_total{result="error"}`) == "1", nil
	})
	// Many periodic checks (200ms) over the same bad content.
	e.waitPasses(p, len(p.Output()), 3)
	if got := metric(`autox_config_reloads_total{result="error"}`); got != "1" {
		t.Errorf("one bad commit counted %s times", got)
	}
	if metric("autox_config_last_reload_successful") != "0" {
		t.Error("autox_config_last_reload_successful is not 0 while the file is rejected")
	}
	// Back to the config in force: nothing is loaded.
	k.Update(e.render(twoSpecs))
	testenv.Eventually(t, patience, "the revert seen", func() (bool, error) {
		return metric("autox_config_last_reload_successful") == "1", nil
	})
	if got := metric("autox_config_last_reload_success_timestamp_seconds"); got != loadedAt {
		t.Errorf("the success timestamp moved from %s to %s without a config being loaded", loadedAt, got)
	}

	k.Update(e.render(oneSpec))
	e.WaitRelease("db-hello", "uninstalled with its spec", gone)
	testenv.Eventually(t, patience, "the removed spec's series gone", func() (bool, error) {
		return metric(`autox_reconcile_total{result="success",spec="db"}`) == "", nil
	})
	if metric(`autox_config_reloads_total{result="success"}`) != "1" {
		t.Errorf("config loads counted: %s, want 1", metric(`autox_config_reloads_total{result="success"}`))
	}
	p.Stop(patience)
}
