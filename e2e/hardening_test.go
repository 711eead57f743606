package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/autox-dev/autox/internal/testenv"
	"helm.sh/helm/v4/pkg/release/common"
)

// TestFailingReleaseRespectsBackoff: a release the API server rejects, with
// a short --resync, is retried with capped exponential backoff, not at every
// pass: each retry is a Helm operation that leaves a failed revision and runs
// hooks again.
func TestFailingReleaseRespectsBackoff(t *testing.T) {
	e := newEnv(t)
	e.Deployment("web", version("1.0.0"))
	p := e.run(e.WriteConfig(webSpec(`      rejected: {chart: {path: {{.Charts}}/rejected}}
      hello: {chart: {path: {{.Charts}}/hello}}
`)), "--resync", "3s")
	metric := e.metricsOf(p)
	e.WaitRelease("web-hello", "installed beside the failing release", deployedAt(1))
	failed := func() float64 {
		var n float64
		for _, a := range []string{"install", "upgrade", "reinstall"} {
			n += number(metric(`autox_helm_operations_total{action="` + a + `",result="error"}`))
		}
		return n
	}
	testenv.Eventually(t, patience, "a first failure", func() (bool, error) { return failed() >= 1, nil })
	start := time.Now()
	passes := strings.Count(p.Output(), `"message":"pass complete"`)
	// 60s is twenty passes at --resync 3s; a backoff of 1s doubling allows
	// about six attempts.
	time.Sleep(60 * time.Second)
	got := failed()
	t.Logf("%.0f failed Helm operations and %d passes in %s", got, strings.Count(p.Output(), `"message":"pass complete"`)-passes, time.Since(start).Round(time.Second))
	if got > 10 {
		t.Errorf("%.0f failed Helm operations in 60s at --resync 3s: the pass does not respect the backoff", got)
	}
	if got < 3 {
		t.Errorf("only %.0f failed operations: the failing release is not retried", got)
	}
	if r := e.Release("web-rejected"); r != nil && r.Status == common.StatusDeployed {
		t.Errorf("the rejected chart deployed: %+v", r)
	}
	if r := e.Release("web-hello"); r.Revision != 1 {
		t.Errorf("web-hello revision %d: the sibling's retries disturbed it", r.Revision)
	}
	p.Stop(patience)
}

// TestDroppedNamespaceIsCollected removes, in one live config change, a
// spec's release spec and the namespace its release lives in: the release is
// uninstalled like any other removed release, not leaked.
func TestDroppedNamespaceIsCollected(t *testing.T) {
	e := newEnv(t)
	other := cluster.Namespace(t)
	e.Deployment("web", version("1.0.0"))
	v1 := strings.ReplaceAll(`
namespaces: [{{.NS}}, OTHER]
specs:
  web:
    trigger: {group: apps, version: v1, resource: deployments, name: web, namespace: {{.NS}}}
    releaseSpecs:
      hello: {chart: {path: {{.Charts}}/hello}}
      away: {chart: {path: {{.Charts}}/hello}, namespace: OTHER}
`, "OTHER", other)
	k := testenv.NewKubeletDir(t, "config.yaml", e.render(v1))
	p := e.run(k.Path(), "--config-debounce", "100ms")
	e.WaitRelease("web-hello", "installed", deployedAt(1))
	away := e.Releases()
	away.Namespace = other
	away.Wait("web-away", "installed in the other namespace", deployedAt(1))

	k.Update(e.render(oneSpec))
	away.Wait("web-away", "uninstalled with its namespace dropped from the config", gone)
	if r := e.Release("web-hello"); r.Revision != 1 {
		t.Errorf("web-hello revision %d", r.Revision)
	}
	p.Stop(patience)
}
