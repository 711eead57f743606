package e2e

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/autox-dev/autox/internal/testenv"
)

var addrRe = regexp.MustCompile(`"addr":"([^"]+)"[^}]*"message":"serving /metrics`)

// httpBase waits until p logged the address it serves /metrics and the
// probes on, and returns its base URL.
func (e *env) httpBase(p *testenv.Process) string {
	e.t.Helper()
	var base string
	testenv.Eventually(e.t, patience, "http address logged", func() (bool, error) {
		m := addrRe.FindStringSubmatch(p.Output())
		if m != nil {
			base = "http://" + m[1]
		}
		return m != nil, nil
	})
	return base
}

func httpGet(url string) (int, string) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// metricValue finds the sample line starting with series and returns the rest.
func metricValue(body, series string) string {
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, series+" ") {
			return strings.TrimPrefix(l, series+" ")
		}
	}
	return ""
}

var observedConfig = webSpec(`      hello: {chart: {path: {{.Charts}}/hello}}
      broken: {chart: {path: {{.Charts}}/broken}}
`)

func TestMetricsProbesAndEvents(t *testing.T) {
	e := newEnv(t)
	e.Deployment("web", version("1.0.0"))
	k := testenv.NewKubeletDir(t, "config.yaml", e.render(observedConfig))
	p := e.run(k.Path(), "--config-debounce", "50ms")
	base := e.httpBase(p)
	testenv.Eventually(t, patience, "/readyz 200", func() (bool, error) {
		code, _ := httpGet(base + "/readyz")
		return code == 200, nil
	})
	if code, body := httpGet(base + "/healthz"); code != 200 {
		t.Errorf("/healthz = %d %s", code, body)
	}
	e.WaitRelease("web-hello", "installed", deployedAt(1))
	e.Relabel("web", version("2.0.0"))
	e.WaitRelease("web-hello", "upgraded", deployedAt(2))
	k.Update("not: [valid")

	testenv.Eventually(t, patience, "metrics", func() (bool, error) {
		_, body := httpGet(base + "/metrics")
		return metricValue(body, `autox_helm_operations_total{action="install",result="success"}`) == "1" &&
			metricValue(body, `autox_helm_operations_total{action="upgrade",result="success"}`) == "1" &&
			metricValue(body, `autox_config_last_reload_successful`) == "0" &&
			metricValue(body, `autox_config_reloads_total{result="error"}`) == "1" &&
			metricValue(body, `autox_reconcile_total{result="error",spec="web"}`) != "" &&
			metricValue(body, `autox_leader`) == "1", nil
	})
	_, body := httpGet(base + "/metrics")
	for _, name := range []string{"autox_reconcile_duration_seconds_count", "autox_workqueue_depth",
		"autox_config_last_reload_success_timestamp_seconds", "autox_helm_operations_total{action=\"install\",result=\"error\"}"} {
		if metricValue(body, name) == "" {
			t.Errorf("metric %s missing", name)
		}
	}
	// A bad config and a bad chart never fail liveness.
	if code, body := httpGet(base + "/healthz"); code != 200 {
		t.Errorf("/healthz after a bad config = %d %s", code, body)
	}
	testenv.Eventually(t, patience, "releases gauge after a periodic pass", func() (bool, error) {
		_, body := httpGet(base + "/metrics")
		return metricValue(body, `autox_releases{status="deployed"}`) == "1" && metricValue(body, "autox_last_pass_timestamp_seconds") != "0", nil
	})

	// Events on the trigger: what autox did for it, never values.
	testenv.Eventually(t, patience, "events on the Deployment", func() (bool, error) {
		list, err := cluster.Client.CoreV1().Events(e.NS).List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.name=web"})
		if err != nil {
			return false, err
		}
		reasons := map[string]bool{}
		for _, ev := range list.Items {
			reasons[ev.Reason] = true
			if ev.InvolvedObject.Kind != "Deployment" {
				t.Errorf("event on %s", ev.InvolvedObject.Kind)
			}
		}
		return reasons["ReleaseInstalled"] && reasons["ReleaseUpgraded"] && reasons["ReleaseFailed"], nil
	})
	if strings.Contains(p.Output(), "greeting") {
		t.Error("chart values appeared in the log")
	}
	p.Stop(patience)
}

var pprofAddrRe = regexp.MustCompile(`"addr":"([^"]+)"[^}]*"message":"serving Go profiles`)

// TestPprofAddr: --pprof-addr serves Go's profiles on an address of its
// own, never on --http-addr, where metrics are scraped.
func TestPprofAddr(t *testing.T) {
	e := newEnv(t)
	cfg := e.WriteConfig(webConfig)
	p := e.run(cfg, "--pprof-addr", "127.0.0.1:0")
	base := e.httpBase(p)
	var pprofBase string
	testenv.Eventually(t, patience, "profile address logged", func() (bool, error) {
		m := pprofAddrRe.FindStringSubmatch(p.Output())
		if m != nil {
			pprofBase = "http://" + m[1]
		}
		return m != nil, nil
	})
	if code, body := httpGet(pprofBase + "/debug/pprof/heap?debug=1"); code != 200 || !strings.Contains(body, "heap profile") {
		t.Errorf("heap profile on --pprof-addr: %d %.200s", code, body)
	}
	if code, body := httpGet(pprofBase + "/debug/pprof/goroutine?debug=1"); code != 200 || !strings.Contains(body, "goroutine profile") {
		t.Errorf("goroutine profile on --pprof-addr: %d %.200s", code, body)
	}
	if code, _ := httpGet(base + "/debug/pprof/"); code != 404 {
		t.Errorf("profiles on --http-addr: %d, want 404", code)
	}
	if code := p.Stop(patience); code != 0 {
		t.Errorf("stop: exit code %d", code)
	}
}
