package e2e

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/autox-dev/autox/internal/testenv"
)

func (e *env) render(text string) string {
	e.t.Helper()
	return testenv.RenderConfig(e.t, text, e.NS, e.Charts)
}

var oneSpec = webSpec(`      hello: {chart: {path: {{.Charts}}/hello}}
`)

var twoSpecs = oneSpec + `  db:
    trigger: {group: apps, version: v1, resource: deployments, name: db, namespace: {{.NS}}}
    releaseSpecs:
      hello: {chart: {path: {{.Charts}}/hello}}
`

// TestConfigReloadThroughKubeletSwaps runs the binary on a config directory
// laid out as the kubelet lays out a ConfigMap volume and changes it the way
// the kubelet does.
func TestConfigReloadThroughKubeletSwaps(t *testing.T) {
	e := newEnv(t)
	e.Deployment("web", version("1.0.0"))
	e.Deployment("db", version("1.0.0"))
	k := testenv.NewKubeletDir(t, "config.yaml", e.render(oneSpec))
	// The periodic check is off (1h): events alone must carry every change.
	p := e.run(k.Path(), "--config-debounce", "100ms", "--config-check-interval", "1h")
	e.WaitRelease("web-hello", "installed", deployedAt(1))

	k.Update(e.render(twoSpecs))
	e.WaitRelease("db-hello", "installed after the spec was added", deployedAt(1))

	k.Update(e.render(oneSpec))
	e.WaitRelease("db-hello", "uninstalled after the spec was removed", gone)

	// Bad edits change nothing: invalid, half-written, empty.
	before := e.Release("web-hello")
	for i, bad := range []string{
		e.render(oneSpec) + "  broken: {trigger: {}}\n",
		e.render(twoSpecs)[:len(e.render(twoSpecs))/2],
		"",
	} {
		k.Update(bad)
		testenv.Eventually(t, patience, "bad config rejected", func() (bool, error) {
			return strings.Count(p.Output(), "config reload: invalid config") > i, nil
		})
	}
	if r := e.Release("web-hello"); r == nil || r.Revision != before.Revision {
		t.Fatalf("a bad config changed web-hello: %+v", r)
	}
	rejections := strings.Count(p.Output(), "config reload: invalid config")
	if rejections < 3 {
		t.Errorf("%d rejections logged, want 3", rejections)
	}

	// The fix applies again.
	k.Update(e.render(twoSpecs))
	e.WaitRelease("db-hello", "installed after the fix", deployedAt(1))

	// Many swaps later the watch still works.
	for i := 0; i < 25; i++ {
		k.Update(e.render(twoSpecs) + fmt.Sprintf("# swap %d\n", i))
	}
	k.Update(e.render(oneSpec))
	e.WaitRelease("db-hello", "uninstalled after 25 more swaps", gone)
	if r := e.Release("web-hello"); r.Revision != before.Revision {
		t.Errorf("web-hello revision %d after reloads, want %d", r.Revision, before.Revision)
	}
	if code := p.Stop(patience); code != 0 {
		t.Fatalf("exit code %d", code)
	}
}

// TestConfigDeletedKeepsReleases deletes the config file under a running
// autox: nothing may be uninstalled.
func TestConfigDeletedKeepsReleases(t *testing.T) {
	e := newEnv(t)
	e.Deployment("web", version("1.0.0"))
	path := e.WriteConfig(oneSpec)
	p := e.run(path, "--config-debounce", "50ms", "--config-check-interval", "200ms")
	e.WaitRelease("web-hello", "installed", deployedAt(1))
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	// Passes go on with the last valid config: two after the missing file
	// was noticed, so at least one whole pass ran without the file.
	e.waitPasses(p, e.waitLog(p, "config reload: cannot read the file"), 2)
	if r := e.Release("web-hello"); r == nil || r.Revision != 1 {
		t.Fatalf("release changed after the config file was deleted: %+v", r)
	}
	p.Stop(patience)
}
