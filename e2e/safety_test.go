package e2e

import (
	"context"
	"fmt"
	"math/rand"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/autox-dev/autox/internal/format"
	"github.com/autox-dev/autox/internal/testenv"
	"helm.sh/helm/v4/pkg/release/common"
)

// manySpecs is a config with n specs, each a Deployment t<i> and one release.
func manySpecs(n int) string {
	var b strings.Builder
	b.WriteString("namespaces: [{{.NS}}]\nspecs:\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "  t%02d:\n    trigger: {group: apps, version: v1, resource: deployments, name: t%02d, namespace: {{.NS}}}\n", i, i)
		fmt.Fprintf(&b, "    releaseSpecs:\n      hello: {chart: {path: {{.Charts}}/hello}, values: {index: %d}}\n", i)
	}
	return b.String()
}

// manyTriggers creates n trigger Deployments t<i> at version 1.0.0 and
// writes manySpecs(n) as the config, whose path it returns.
func (e *env) manyTriggers(n int) string {
	e.t.Helper()
	for i := 0; i < n; i++ {
		e.Deployment(fmt.Sprintf("t%02d", i), version("1.0.0"))
	}
	return e.WriteConfig(manySpecs(n))
}

// proxied starts a proxy to the API server, closed with the test, and
// returns it with a kubeconfig that goes through it.
func (e *env) proxied() (*testenv.Proxy, string) {
	e.t.Helper()
	proxy, err := cluster.NewProxy()
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(proxy.Close)
	kubeconfig, err := cluster.ProxyKubeconfig(proxy)
	if err != nil {
		e.t.Fatal(err)
	}
	return proxy, kubeconfig
}

// labelOf returns the version label a release was made for.
func labelOf(r *format.Release) string {
	a, _ := r.Values["autox"].(map[string]interface{})
	t, _ := a["trigger"].(map[string]interface{})
	l, _ := t["labels"].(map[string]interface{})
	s, _ := l["app.kubernetes.io/version"].(string)
	return s
}

// TestKillNineWhileConverging kills autox with SIGKILL at random moments
// while it converges 30 triggers, relabelling some between kills, then starts
// it cleanly: every release must end deployed with the right values, none
// pending, and no release seen deployed may ever have been uninstalled.
// Leader election is on: each process waits for the killed one's Lease to
// expire, and is killed at a random moment after it started to lead.
//
// The kill moments and relabels come from a random seed, logged at the
// start; AUTOX_TEST_SEED=<seed> runs them again. That repeats the schedule,
// not autox's progress within it (machine speed varies), so a failure may
// need a few reruns with its seed.
func TestKillNineWhileConverging(t *testing.T) {
	const triggers, kills = 30, 12
	e := newEnv(t)
	want := map[string]string{}
	for i := 0; i < triggers; i++ {
		name := fmt.Sprintf("t%02d", i)
		e.Deployment(name, version("1.0.0"))
		want[name] = "1.0.0"
	}
	cfg := e.WriteConfig(manySpecs(triggers))
	firstDeployed := map[string]time.Time{} // release -> first deployed time, once seen deployed
	observe := func() {
		for name := range want {
			r := e.Release(name + "-hello")
			if r == nil {
				if _, seen := firstDeployed[name]; seen {
					t.Fatalf("release %s-hello was uninstalled although its trigger stayed labelled", name)
				}
				continue
			}
			if prev, seen := firstDeployed[name]; seen && !r.FirstDeployed.Equal(prev) {
				t.Fatalf("release %s-hello was reinstalled: first deployed %v, was %v", name, r.FirstDeployed, prev)
			}
			if r.Status == common.StatusDeployed || r.DeployedBefore {
				firstDeployed[name] = r.FirstDeployed
			}
		}
	}

	seed := time.Now().UnixNano()
	if s := os.Getenv("AUTOX_TEST_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseInt(s, 10, 64); err != nil {
			t.Fatalf("AUTOX_TEST_SEED=%q: %v", s, err)
		}
	}
	t.Logf("seed %d (rerun with AUTOX_TEST_SEED=%d)", seed, seed)
	rng := rand.New(rand.NewSource(seed))
	for k := 0; k < kills; k++ {
		p := e.run(cfg, "--workers", "4")
		e.waitLog(p, leadingLine)
		// The kill moment is the test's input, not a wait for anything.
		time.Sleep(time.Duration(200+rng.Intn(2300)) * time.Millisecond)
		p.Kill()
		observe()
		// New versions for a few triggers: upgrades will be in flight at the next kill.
		for j := 0; j < 4; j++ {
			name := fmt.Sprintf("t%02d", rng.Intn(triggers))
			want[name] = fmt.Sprintf("1.%d.%d", k+1, j)
			e.Relabel(name, version(want[name]))
		}
	}
	pending := 0
	for name := range want {
		if r := e.Release(name + "-hello"); r != nil && r.Status.IsPending() {
			pending++
		}
	}
	t.Logf("%d kills survived; %d of %d releases had been deployed; %d left pending by the kills", kills, len(firstDeployed), triggers, pending)

	// A clean start. Releases left pending by a kill are unlocked once older
	// than --helm-timeout plus 30s.
	p := e.run(cfg, "--helm-timeout", "2s")
	testenv.Eventually(t, 3*patience, "every release deployed with its trigger's version", func() (bool, error) {
		for name, v := range want {
			r, err := e.Helm.Lookup(context.Background(), e.NS, name+"-hello")
			if err != nil || r == nil || r.Status != common.StatusDeployed || labelOf(r) != v {
				return false, err
			}
		}
		return true, nil
	})
	observe()
	for name := range want {
		r := e.Release(name + "-hello")
		if r.Values["index"] != float64(name[1]-'0')*10+float64(name[2]-'0') {
			t.Errorf("%s: values %v", name, r.Values)
		}
	}
	if code := p.Stop(patience); code != 0 {
		t.Errorf("clean stop: exit code %d", code)
	}
	t.Logf("checked %d releases after the clean start", len(want))
}

// TestTwoProcessesOneWriter runs two autox processes with leader election:
// only one writes, no release gets an extra revision, and the standby takes
// over when the leader is killed.
func TestTwoProcessesOneWriter(t *testing.T) {
	const n = 10
	e := newEnv(t)
	cfg := e.manyTriggers(n)
	a, b := e.run(cfg), e.run(cfg)
	for i := 0; i < n; i++ {
		e.WaitRelease(fmt.Sprintf("t%02d-hello", i), "installed", deployedAt(1))
	}
	var leader, standby *testenv.Process
	testenv.Eventually(t, patience, "one leader and one standby", func() (bool, error) {
		for _, pair := range [][2]*testenv.Process{{a, b}, {b, a}} {
			if strings.Contains(pair[0].Output(), leadingLine) && strings.Contains(pair[1].Output(), "standing by: another process leads") {
				leader, standby = pair[0], pair[1]
				return true, nil
			}
		}
		return false, nil
	})
	// Two more passes of the leader: at least one whole pass after the
	// installs, while the standby ran too.
	e.waitPasses(leader, len(leader.Output()), 2)
	for i := 0; i < n; i++ {
		if r := e.Release(fmt.Sprintf("t%02d-hello", i)); r.Revision != 1 {
			t.Errorf("t%02d-hello has revision %d with two processes", i, r.Revision)
		}
	}
	if strings.Contains(standby.Output(), leadingLine) || strings.Contains(standby.Output(), `"message":"release `) {
		t.Fatalf("both processes wrote:\n%s", standby.Output())
	}
	// A standby is ready: it holds a valid config and takes over on its own.
	if code, body := httpGet(e.httpBase(standby) + "/readyz"); code != 200 {
		t.Errorf("the standby's /readyz = %d %s", code, body)
	}

	leader.Kill()
	e.Relabel("t03", version("2.0.0"))
	e.WaitRelease("t03-hello", "upgraded by the standby", deployedAt(2))
	if !strings.Contains(standby.Output(), "leading: this process writes") {
		t.Error("the standby did not log that it took over")
	}
	for i := 0; i < n; i++ {
		if r := e.Release(fmt.Sprintf("t%02d-hello", i)); i != 3 && r.Revision != 1 {
			t.Errorf("t%02d-hello revision %d after the takeover", i, r.Revision)
		}
	}
	if code := standby.Stop(patience); code != 0 {
		t.Errorf("standby stop: exit code %d", code)
	}
	if !strings.Contains(standby.Output(), "autox stopped") {
		t.Error("no clean stop logged")
	}
}

// TestUpgradeOfAutoxMakesNoWrites restarts with a second build of the binary
// (an "upgrade" of autox): no Helm write, every revision unchanged.
func TestUpgradeOfAutoxMakesNoWrites(t *testing.T) {
	const n = 5
	e := newEnv(t)
	cfg := e.manyTriggers(n)
	p := e.run(cfg)
	for i := 0; i < n; i++ {
		e.WaitRelease(fmt.Sprintf("t%02d-hello", i), "installed", deployedAt(1))
	}
	p.Stop(patience)

	dir := t.TempDir()
	v2, err := testenv.BuildAutox(dir, "e2e-v2", testenv.RaceDetector)
	if err != nil {
		t.Fatal(err)
	}
	p2 := testenv.StartProcess(t, v2, e.runArgs(cfg, "--resync", "1s")...)
	e.waitPasses(p2, 0, 3)
	if code := p2.Stop(patience); code != 0 {
		t.Errorf("exit code %d", code)
	}
	if !strings.Contains(p2.Output(), `"version":"e2e-v2"`) {
		t.Error("the second build did not run")
	}
	if strings.Contains(p2.Output(), `"message":"release `) {
		t.Errorf("the upgraded autox made Helm writes:\n%s", p2.Output())
	}
	for i := 0; i < n; i++ {
		if r := e.Release(fmt.Sprintf("t%02d-hello", i)); r.Revision != 1 {
			t.Errorf("t%02d-hello revision %d", i, r.Revision)
		}
	}
	_ = os.Remove(v2)
}

// The API server faults (TestAPIServerOutage, TestAPIServerAnswers5xx) go
// the same way: n triggers' releases installed; during the fault a trigger
// loses its label and another gets a new version; nothing changes until the
// fault ends, then exactly those two releases change.

// installedMany waits until t00-hello ... are installed and returns their
// first-deployed times.
func (e *env) installedMany(n int) map[string]time.Time {
	e.t.Helper()
	before := map[string]time.Time{}
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("t%02d-hello", i)
		before[name] = e.WaitRelease(name, "installed", deployedAt(1)).FirstDeployed
	}
	return before
}

// changeTriggers changes t01 and t02 through the direct connection.
func (e *env) changeTriggers() {
	e.t.Helper()
	e.Relabel("t01", nil)
	e.Relabel("t02", version("2.0.0"))
}

// unchanged fails the test when a release is not as before.
func (e *env) unchanged(before map[string]time.Time, during string) {
	e.t.Helper()
	for name, fd := range before {
		if r := e.Release(name); r == nil || !r.FirstDeployed.Equal(fd) || r.Revision != 1 {
			e.t.Fatalf("%s changed %s: %+v", name, during, r)
		}
	}
}

// converged waits for the changes made during the fault and checks that
// the other releases were not disturbed.
func (e *env) converged(before map[string]time.Time, after string) {
	e.t.Helper()
	e.WaitRelease("t01-hello", "uninstalled "+after, gone)
	e.WaitRelease("t02-hello", "upgraded "+after, deployedAt(2))
	for _, name := range []string{"t00-hello", "t03-hello", "t04-hello"} {
		if r := e.Release(name); r.Revision != 1 || !r.FirstDeployed.Equal(before[name]) {
			e.t.Errorf("%s disturbed (checked %s): %+v", name, after, r)
		}
	}
}

// TestAPIServerOutage makes the API server unreachable for 40s mid-run,
// under autox with every leader election default (a 15s Lease): the outage
// outlasts the Lease. autox loses it, fences its writes and campaigns again
// in the same process; it never exits, changes nothing during the outage,
// leads again when the server is back and applies what changed meanwhile,
// and a config change made after the outage.
func TestAPIServerOutage(t *testing.T) {
	const n = 5
	e := newEnv(t)
	cfg := e.manyTriggers(n)
	e.Deployment(fmt.Sprintf("t%02d", n), version("1.0.0"))
	proxy, kubeconfig := e.proxied()
	p := testenv.StartProcess(t, autox, append(baseRunArgs(cfg), "--kubeconfig", kubeconfig, "--leader-election-namespace", e.NS)...)
	before := e.installedMany(n)

	proxy.Pause()
	// While autox cannot reach the server, the triggers change.
	e.changeTriggers()
	e.waitLog(p, "lost the leader Lease")
	time.Sleep(40 * time.Second) // far past the lease duration
	if _, err := p.Wait(time.Millisecond); err == nil {
		t.Fatalf("autox exited during the outage:\n%s", p.Output())
	}
	e.unchanged(before, "during the outage")
	leads := strings.Count(p.Output(), leadingLine)
	if err := proxy.Resume(); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, patience, "leading again after the outage", func() (bool, error) {
		return strings.Count(p.Output(), leadingLine) > leads, nil
	})
	e.converged(before, "after the outage")
	// A config change made after the outage: one more spec.
	e.WriteConfig(manySpecs(n + 1))
	e.WaitRelease(fmt.Sprintf("t%02d-hello", n), "installed by a config change after the outage", deployedAt(1))
	if code := p.Stop(patience); code != 0 {
		t.Errorf("exit code %d", code)
	}
}

// TestAPIServerAnswers5xx makes the API server answer every request with
// 503 for a while (it is up, but failing: etcd gone, overloaded), where
// TestAPIServerOutage makes it unreachable: autox stays up and live, changes
// nothing, and converges when the server answers again.
func TestAPIServerAnswers5xx(t *testing.T) {
	const n = 5
	e := newEnv(t)
	cfg := e.manyTriggers(n)
	proxy, kubeconfig := e.proxied()
	// With leader election on, 20s of failing renewals cost the Lease: the
	// writes are fenced and autox campaigns again in the same process.
	p := testenv.StartProcess(t, autox, e.runArgs(cfg, "--kubeconfig", kubeconfig)...)
	base := e.httpBase(p)
	before := e.installedMany(n)

	proxy.FailWith(http.StatusServiceUnavailable)
	failingFrom := len(p.Output())
	e.changeTriggers()
	// 20s of 503s: ten resync periods and five lease durations, long enough
	// for a process that gives up on a failing server to have done so. The
	// failing renewals must have cost the leadership meanwhile (the process
	// felt the 503s); the term's work stops, the process stays.
	window := time.After(20 * time.Second)
	testenv.Eventually(t, patience, "20s of 503s and the Lease lost to them", func() (bool, error) {
		if p.Exited() {
			t.Fatal("autox exited while the API server answered 503")
		}
		select {
		case <-window:
			return strings.Contains(p.Output()[failingFrom:], "lost the leader Lease"), nil
		default:
			return false, nil
		}
	})
	if code, body := httpGet(base + "/healthz"); code != 200 {
		t.Errorf("/healthz = %d %s while the API server answered 503: a failing server is no reason to restart autox", code, body)
	}
	e.unchanged(before, "while the API server answered 503")
	t.Logf("the proxy answered %d requests with 503", proxy.Failed())

	proxy.FailWith(0)
	e.converged(before, "after the 503s")
	if code := p.Stop(patience); code != 0 {
		t.Errorf("exit code %d", code)
	}
}

// TestGracefulStop stops autox with SIGTERM, leader election on:
//   - in the middle of converging, running operations finish (nothing is
//     left pending), the Lease is released and the exit code is 0;
//   - while a Helm install cannot finish (the slow chart's pre-install hook
//     Job never completes: this control plane runs no controllers) and
//     --shutdown-timeout is 1h, the first SIGTERM waits for it, so only a
//     second one ends autox, at once, with exit code 1;
//   - the same with --shutdown-timeout 2s: the install is cancelled, the
//     cancellation reported, the Lease released and the exit code is 0;
//   - while an install waits for its chart from an OCI registry that
//     accepts connections and never answers (--helm-timeout, which bounds a
//     download, at its default of 5m): the stop is bounded by
//     --shutdown-timeout all the same, and the Lease released.
func TestGracefulStop(t *testing.T) {
	t.Run("converging", func(t *testing.T) {
		const n = 20
		e := newEnv(t)
		p := e.run(e.manyTriggers(n))
		e.waitLog(p, `"message":"release install"`)
		if code := p.Stop(patience); code != 0 {
			t.Fatalf("SIGTERM: exit code %d", code)
		}
		installed := 0
		for i := 0; i < n; i++ {
			if r := e.Release(fmt.Sprintf("t%02d-hello", i)); r != nil {
				installed++
				if r.Status != common.StatusDeployed {
					t.Errorf("t%02d-hello left %s by a graceful stop", i, r.Status)
				}
			}
		}
		if h := e.leaseHolder(); h != "" {
			t.Errorf("the Lease is still held by %q after a clean stop", h)
		}
		t.Logf("stopped after %d of %d installs, none left pending", installed, n)
	})

	slowConfig := webSpec("      slow: {chart: {path: {{.Charts}}/slow}}\n")
	// blocked starts autox and waits until its install waits on the hook.
	blocked := func(t *testing.T, e *env, extra ...string) *testenv.Process {
		e.Deployment("web", version("1.0.0"))
		p := e.run(e.WriteConfig(slowConfig), append([]string{"--helm-timeout", "1h"}, extra...)...)
		blockedInstall(t, e)
		return p
	}

	t.Run("second signal", func(t *testing.T) {
		e := newEnv(t)
		p := blocked(t, e, "--shutdown-timeout", "1h")
		p.Signal(syscall.SIGTERM)
		e.waitLog(p, "stopping: no new reconcile starts, waiting for running ones")
		// Once running operations end, a stop takes milliseconds: still
		// running 3s later, autox waits for the install, which cannot end.
		if _, err := p.Wait(3 * time.Second); err == nil {
			t.Fatalf("autox exited while an install was running and --shutdown-timeout was 1h:\n%s", p.Output())
		}
		p.Signal(syscall.SIGTERM)
		code, err := p.Wait(patience)
		if err != nil || code != 1 {
			t.Fatalf("a second SIGTERM: exit code %d, %v; want 1", code, err)
		}
	})

	t.Run("shutdown timeout", func(t *testing.T) {
		e := newEnv(t)
		p := blocked(t, e, "--shutdown-timeout", "2s")
		p.Signal(syscall.SIGTERM)
		code, err := p.Wait(patience)
		if err != nil || code != 0 {
			t.Fatalf("SIGTERM with --shutdown-timeout 2s: exit code %d, %v", code, err)
		}
		if !strings.Contains(p.Output(), "still running at the shutdown timeout") {
			t.Error("the cancelled operation was not reported")
		}
		if h := e.leaseHolder(); h != "" {
			t.Errorf("the Lease is still held by %q after a stop", h)
		}
	})

	t.Run("registry never answers", func(t *testing.T) {
		e := newEnv(t)
		ca, err := testenv.NewCA(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		registry, err := testenv.NewSilentServer(ca)
		if err != nil {
			t.Fatal(err)
		}
		defer registry.Close()
		e.Deployment("web", version("1.0.0"))
		cfg := e.WriteConfig(webSpec(`      oci: {chart: {repo: oci://` + registry.Addr + `/charts, name: hello, version: "0.1.0"}}
`))
		p := testenv.StartProcessEnv(t, []string{"SSL_CERT_FILE=" + ca.File}, autox,
			e.runArgs(cfg, "--shutdown-timeout", "3s", "--cache-dir", filepath.Join(t.TempDir(), "cache"))...)
		testenv.Eventually(t, patience, "the install waiting on the registry", func() (bool, error) {
			return registry.Requests() >= 1 && strings.Contains(p.Output(), leadingLine), nil
		})
		p.Signal(syscall.SIGTERM)
		// A safety bound, well above the 3s the stop may wait, far below
		// the 5m a download may take.
		code, err := p.Wait(20 * time.Second)
		if err != nil {
			t.Fatalf("a stop with --shutdown-timeout 3s still runs 20s later, held by a registry that never answers:\n%s", p.Output())
		}
		if code != 0 {
			t.Errorf("SIGTERM: exit code %d", code)
		}
		if h := e.leaseHolder(); h != "" {
			t.Errorf("the Lease is still held by %q after a stop", h)
		}
	})
}
