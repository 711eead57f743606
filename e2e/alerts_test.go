package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/autox-dev/autox/internal/testenv"
)

// alertsConfig is the config of TestAlertsOnRecordedMetrics: spec web with
// release spec hello (which works) and more, and a selector spec that
// selects nothing, so that its series are there, at zero.
func alertsConfig(more string) string {
	return webSpec("      hello: {chart: {path: {{.Charts}}/hello}}\n"+more) + `
  experiments:
    trigger:
      group: apps
      version: v1
      resource: deployments
      namespace: {{.NS}}
      selector: {matchLabels: {autox.dev/experiment: enabled}}
    releaseSpecs:
      hello: {chart: {path: {{.Charts}}/hello}}
`
}

// brokenAndSecret fail: a chart that does not render, a Secret missing.
const brokenAndSecret = `      broken: {chart: {path: {{.Charts}}/broken}}
      secret:
        chart: {path: {{.Charts}}/hello}
        valuesFrom: [{kind: Secret, name: not-there}]
`

// The labels Prometheus adds to every series it scrapes from autox through
// the monitoring component's ServiceMonitor, as the rule tests expect them.
var scrapeTarget = map[string]string{"namespace": "autox", "job": "autox-metrics", "pod": "autox-0"}

// TestAlertsOnRecordedMetrics runs autox through the states the alerts are
// for — a standby while another process holds the Lease, a release spec that
// fails, a values source that is missing, a config file rejected, the config
// directory gone — records its /metrics in each, and runs the rule tests of
// manifests/monitoring/alerts_test.yaml on the recording with promtool. Then
// every metric and label that a rule or the dashboard reads is looked up in
// the live autox's /metrics.
func TestAlertsOnRecordedMetrics(t *testing.T) {
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	promtool := buildPromtool(t, root)
	e := newEnv(t)
	e.Deployment("web", version("1.0.0"))
	leases := cluster.Client.CoordinationV1().Leases(e.NS)
	holder, seconds, now := "another-replica", int32(3600), metav1.NewMicroTime(time.Now())
	if _, err := leases.Create(context.Background(), &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "autox"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &seconds, RenewTime: &now, AcquireTime: &now}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	confDir := filepath.Join(e.Dir, "conf")
	writeFile := func(text string) {
		t.Helper()
		if err := os.MkdirAll(confDir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(confDir, "config.yaml"), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(e.render(alertsConfig(brokenAndSecret)))
	p := e.run(filepath.Join(confDir, "config.yaml"), "--config-debounce", "50ms", "--config-check-interval", "200ms")
	rec := &recorder{t: t, url: e.httpBase(p) + "/metrics"}

	const (
		broken = `{spec="web",release_spec="broken"}`
		secret = `{spec="web",release_spec="secret"}`
		hello  = `{spec="web",release_spec="hello"}`
	)
	rec.phase("standby", 4, func(s scrape) bool {
		return s.is("autox_leader", 0) && s.is("autox_config_last_reload_successful", 1)
	})
	if err := leases.Delete(context.Background(), "autox", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	failing := func(s scrape) bool {
		return s.is("autox_leader", 1) && s.is("autox_release_spec_failing"+broken, 1) && s.is("autox_values_source_failing"+broken, 0) &&
			s.is("autox_release_spec_failing"+secret, 1) && s.is("autox_values_source_failing"+secret, 1) &&
			s.is("autox_release_spec_failing"+hello, 0)
	}
	rec.phase("leading, broken and secret failing", 12, func(s scrape) bool {
		return failing(s) && s.is("autox_config_last_reload_successful", 1)
	})
	writeFile("specs: [not valid")
	rec.phase("config rejected", 7, func(s scrape) bool {
		return failing(s) && s.is("autox_config_last_reload_successful", 0) && s.is("autox_config_watch_fallback", 0)
	})
	if err := os.RemoveAll(confDir); err != nil {
		t.Fatal(err)
	}
	rec.phase("config directory gone", 12, func(s scrape) bool {
		return failing(s) && s.is("autox_config_last_reload_successful", 0) && s.is("autox_config_watch_fallback", 1)
	})
	writeFile(e.render(alertsConfig("")))
	rec.phase("fixed", 3, func(s scrape) bool {
		_, kept := s.get("autox_release_spec_failing" + broken)
		return !kept && s.is("autox_release_spec_failing"+hello, 0) && s.is("autox_config_last_reload_successful", 1) &&
			s.is("autox_config_watch_fallback", 0)
	})

	testRules(t, root, promtool, "alerts_test.yaml", rec)

	live, err := scrapeMetrics(rec.url)
	if err != nil {
		t.Fatal(err)
	}
	checkExported(t, live, ruleExprs(t, root), dashboardExprs(t, root))
	p.Stop(patience)
}

// testRules checks the rules with promtool and runs the rule tests of
// manifests/monitoring/<file> on rec's scrapes.
func testRules(t *testing.T, root, promtool, file string, rec *recorder) {
	t.Helper()
	dir := t.TempDir()
	rules := writeRuleFile(t, root, dir)
	if out, err := exec.Command(promtool, "check", "rules", rules).CombinedOutput(); err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	tests := writeRuleTests(t, root, dir, file, rules, rec.inputSeries("autox_", scrapeTarget))
	if out, err := exec.Command(promtool, "test", "rules", tests).CombinedOutput(); err != nil {
		t.Fatalf("promtool test rules of %s on the recorded series (%s): %v\n%s", file, tests, err, out)
	}
}

// buildPromtool builds promtool once (scripts/promtool.sh caches it).
func buildPromtool(t *testing.T, root string) string {
	t.Helper()
	cmd := exec.Command("bash", filepath.Join(root, "scripts", "promtool.sh"))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("scripts/promtool.sh: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// ruleGroups reads the PrometheusRule's groups: a Prometheus rule file's.
func ruleGroups(t *testing.T, root string) []interface{} {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "manifests", "monitoring", "prometheusrule.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var pr struct {
		Spec struct {
			Groups []interface{} `json:"groups"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(data, &pr); err != nil || len(pr.Spec.Groups) == 0 {
		t.Fatalf("prometheusrule.yaml has no rule groups: %v", err)
	}
	return pr.Spec.Groups
}

func writeRuleFile(t *testing.T, root, dir string) string {
	t.Helper()
	data, err := yaml.Marshal(map[string]interface{}{"groups": ruleGroups(t, root)})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "rules.yaml")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// writeRuleTests fills the rule tests of file in with the rule file and the series.
func writeRuleTests(t *testing.T, root, dir, file, rules string, series []map[string]string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "manifests", "monitoring", file))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]interface{}
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	doc["rule_files"] = []string{rules}
	for _, tc := range doc["tests"].([]interface{}) {
		tc.(map[string]interface{})["input_series"] = series
	}
	if data, err = yaml.Marshal(doc); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, file)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func ruleExprs(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, g := range ruleGroups(t, root) {
		for _, r := range g.(map[string]interface{})["rules"].([]interface{}) {
			rule := r.(map[string]interface{})
			out["alert "+rule["alert"].(string)] = rule["expr"].(string)
		}
	}
	return out
}

func dashboardExprs(t *testing.T, root string) map[string]string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "manifests", "monitoring", "dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var board struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
		Templating struct {
			List []struct {
				Name  string
				Query interface{}
			}
		}
	}
	if err := json.Unmarshal(data, &board); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, p := range board.Panels {
		for i, target := range p.Targets {
			out["panel "+p.Title+" #"+string(rune('A'+i))] = target.Expr
		}
	}
	for _, v := range board.Templating.List {
		if q, ok := v.Query.(map[string]interface{}); ok {
			out["variable "+v.Name] = q["query"].(string)
		}
	}
	if len(out) < 10 {
		t.Fatalf("the dashboard has %d queries", len(out))
	}
	return out
}

// targetLabels are added by Prometheus (the ServiceMonitor), not by autox.
var targetLabels = map[string]bool{"namespace": true, "job": true, "pod": true, "instance": true, "service": true, "endpoint": true, "container": true}

// checkExported fails for every metric, or label of a matcher or a
// grouping, that an expression reads and autox's /metrics does not have.
func checkExported(t *testing.T, live scrape, exprs ...map[string]string) {
	t.Helper()
	names := live.names()
	for _, set := range exprs {
		for where, expr := range set {
			refs := parsePromQL(expr)
			if len(refs.metrics) == 0 {
				t.Errorf("%s reads no metric: %s", where, expr)
			}
			have := map[string]bool{}
			for metric, matched := range refs.metrics {
				series, ok := names[metric]
				if !ok {
					t.Errorf("%s reads %s, which autox does not export", where, metric)
					continue
				}
				for _, labels := range series {
					for l := range labels {
						have[l] = true
					}
				}
				for _, l := range matched {
					if !targetLabels[l] && !hasLabel(series, l) {
						t.Errorf("%s matches label %s of %s, which autox does not give it", where, l, metric)
					}
				}
			}
			for _, l := range refs.groupBy {
				if !targetLabels[l] && !have[l] {
					t.Errorf("%s groups by %s, a label of none of its metrics", where, l)
				}
			}
		}
	}
}

func hasLabel(series []map[string]string, label string) bool {
	for _, labels := range series {
		if _, ok := labels[label]; ok {
			return true
		}
	}
	return false
}
