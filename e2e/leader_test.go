package e2e

import (
	"context"
	"k8s.io/client-go/util/retry"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/release/common"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/autox-dev/autox/internal/format"
	"github.com/autox-dev/autox/internal/testenv"
)

// metricsOf returns a function that reads one metric sample of the process
// ("" when absent).
func (e *env) metricsOf(p *testenv.Process) func(series string) string {
	e.t.Helper()
	base := e.httpBase(p)
	return func(series string) string {
		_, body := httpGet(base + "/metrics")
		return metricValue(body, series)
	}
}

func number(s string) float64 {
	f, _ := strconv.ParseFloat(s, 64)
	return f
}

// stealLease makes another identity hold the test's Lease for d, as a
// process that took over would.
func (e *env) stealLease(d time.Duration) {
	e.t.Helper()
	leases := cluster.Client.CoordinationV1().Leases(e.NS)
	// The holder renews every RetryPeriod: an update that met a renewal
	// reads the Lease again, as any client of an optimistic write does.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		l, err := leases.Get(context.Background(), "autox", metav1.GetOptions{})
		if err != nil {
			return err
		}
		thief, seconds, now := "thief", int32(d/time.Second), metav1.NewMicroTime(time.Now())
		l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds, l.Spec.RenewTime, l.Spec.AcquireTime = &thief, &seconds, &now, &now
		_, err = leases.Update(context.Background(), l, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		e.t.Fatal(err)
	}
}

func alive(p *testenv.Process) bool {
	_, err := p.Wait(time.Millisecond)
	return err != nil
}

var slowConfig = webSpec(`      slow: {chart: {path: {{.Charts}}/slow}}
`)

// blockedInstall waits until a Helm operation of the slow (or hookupgrade)
// chart waits on its hook Job, which never completes on a control plane
// without controllers: the Job exists. Helm 4 logs its hook wait through
// log/slog's default logger, which autox leaves alone, so the cluster is
// what tells.
func blockedInstall(t *testing.T, e *env) {
	t.Helper()
	testenv.Eventually(t, patience, "the install waiting on its hook", func() (bool, error) {
		jobs, err := cluster.Client.BatchV1().Jobs(e.NS).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, j := range jobs.Items {
			if strings.HasSuffix(j.Name, "-wait") {
				return true, nil
			}
		}
		return false, nil
	})
}

// TestLostLeaseStopsWritingAtOnce takes the Lease from a leader whose Helm
// install is blocked on a hook. Helm's install goroutine ignores
// cancellation and, when its hook times out, writes the release record as
// failed; that write must be refused, because the term that started it has
// ended. The process stays up as a standby.
func TestLostLeaseStopsWritingAtOnce(t *testing.T) {
	e := newEnv(t)
	e.Deployment("web", version("1.0.0"))
	p := e.run(e.WriteConfig(slowConfig), "--helm-timeout", "10s")
	metric := e.metricsOf(p)
	blockedInstall(t, e)
	if r := e.Release("web-slow"); r == nil || r.Status != common.StatusPendingInstall {
		t.Fatalf("the install is not pending: %+v", r)
	}
	// Recorded for the rule tests of manifests/monitoring/alerts_fence_test.yaml.
	rec := &recorder{t: t, url: e.httpBase(p) + "/metrics"}
	rec.phase("leading, the install blocked", 2, func(s scrape) bool {
		return s.is("autox_leader", 1) && s.is("autox_fenced_writes_total", 0)
	})

	e.stealLease(5 * time.Minute)
	testenv.Eventually(t, patience, "the lost Lease noticed", func() (bool, error) {
		return strings.Contains(p.Output(), "lost the leader Lease"), nil
	})
	// Helm's install goroutine records the failure (of its cancelled context,
	// or of its hook at --helm-timeout): wait for that write to be refused,
	// or to have changed the record.
	var r *format.Release
	testenv.Eventually(t, patience, "Helm's write of the failed install", func() (bool, error) {
		r = e.Release("web-slow")
		return number(metric("autox_fenced_writes_total")) >= 1 || r == nil || r.Status != common.StatusPendingInstall, nil
	})
	if r == nil || r.Status != common.StatusPendingInstall || r.Revision != 1 {
		t.Fatalf("the release record was written after the Lease was lost: %+v", r)
	}
	if metric("autox_leader") != "0" {
		t.Errorf("autox_leader = %s while another process holds the Lease", metric("autox_leader"))
	}
	rec.phase("writes fenced", 3, func(s scrape) bool {
		v, _ := s.get("autox_fenced_writes_total")
		return v >= 1 && s.is("autox_leader", 0)
	})
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	testRules(t, root, buildPromtool(t, root), "alerts_fence_test.yaml", rec)
	if !alive(p) {
		t.Fatalf("autox exited after losing its Lease:\n%s", p.Output())
	}
	if code := p.Stop(patience); code != 0 {
		t.Errorf("a standby's stop: exit code %d", code)
	}
}

// TestRollingUpdateWaitsForLease starts a new process while the old one
// leads (as a Deployment's rolling update does) and stops the old one while
// its install is still running: the new one must not lead until the old one
// has finished, fenced its writes and released the Lease.
func TestRollingUpdateWaitsForLease(t *testing.T) {
	e := newEnv(t)
	e.Deployment("web", version("1.0.0"))
	cfg := e.WriteConfig(slowConfig)
	// The shutdown timeout (8s) is twice the lease duration (4s): a Lease not
	// held through the old process's shutdown would pass to the new one.
	old := e.run(cfg, "--helm-timeout", "1h", "--shutdown-timeout", "8s")
	blockedInstall(t, e)
	next := e.run(cfg)
	testenv.Eventually(t, patience, "the new process standing by", func() (bool, error) {
		return strings.Contains(next.Output(), "standing by: another process leads"), nil
	})
	base := e.httpBase(next)
	testenv.Eventually(t, patience, "the standby ready", func() (bool, error) {
		code, _ := httpGet(base + "/readyz")
		return code == 200, nil
	})

	old.Signal(syscall.SIGTERM)
	testenv.Eventually(t, patience, "the old process stopping", func() (bool, error) {
		return strings.Contains(old.Output(), "stopping: no new reconcile starts"), nil
	})
	// Well past the lease duration, the old process is still finishing.
	time.Sleep(6 * time.Second)
	if strings.Contains(next.Output(), leadingLine) {
		t.Fatalf("the new process led while the old one was still stopping:\n%s", next.Output())
	}
	if c, err := old.Wait(patience); err != nil || c != 0 {
		t.Fatalf("the old process: exit %d, %v", c, err)
	}
	if !strings.Contains(old.Output(), "left the leader election: writes fenced, Lease released") {
		t.Error("the old process did not report releasing its Lease")
	}
	testenv.Eventually(t, patience, "the new process leading", func() (bool, error) {
		return strings.Contains(next.Output(), leadingLine), nil
	})
	next.Stop(patience)
}

// TestStandbyKeepsLastValidConfig: a standby watches and validates the
// config file too. After v2 (a spec added, installed by the leader) and an
// invalid v3, the leader is killed; the standby takes over with v2, so its
// start-up cleanup leaves both specs' releases alone.
func TestStandbyKeepsLastValidConfig(t *testing.T) {
	e := newEnv(t)
	e.Deployment("web", version("1.0.0"))
	e.Deployment("db", version("1.0.0"))
	k := testenv.NewKubeletDir(t, "config.yaml", e.render(oneSpec))
	a := e.run(k.Path(), "--config-debounce", "100ms")
	e.WaitRelease("web-hello", "installed", deployedAt(1))
	b := e.run(k.Path(), "--config-debounce", "100ms")
	leader, standby := a, b
	testenv.Eventually(t, patience, "the standby standing by", func() (bool, error) {
		return strings.Contains(b.Output(), "standing by: another process leads"), nil
	})

	k.Update(e.render(twoSpecs))
	e.WaitRelease("db-hello", "installed after v2", deployedAt(1))
	testenv.Eventually(t, patience, "the standby saw v2", func() (bool, error) {
		return strings.Contains(standby.Output(), "config kept for when this process leads"), nil
	})
	k.Update(e.render(twoSpecs) + "  broken: {trigger: {}}\n")
	for _, p := range []*testenv.Process{leader, standby} {
		testenv.Eventually(t, patience, "v3 rejected", func() (bool, error) {
			return strings.Contains(p.Output(), "config reload: invalid config"), nil
		})
	}
	web, db := e.Release("web-hello"), e.Release("db-hello")

	leader.Kill()
	testenv.Eventually(t, patience, "the standby leading", func() (bool, error) {
		return strings.Contains(standby.Output(), leadingLine), nil
	})
	after := strings.Index(standby.Output(), leadingLine)
	testenv.Eventually(t, patience, "a complete pass of the new leader", func() (bool, error) {
		return strings.Contains(standby.Output()[after:], `"message":"pass complete"`), nil
	})
	for _, want := range []*format.Release{web, db} {
		r := e.Release(want.Name)
		if r == nil || r.Revision != want.Revision || !r.FirstDeployed.Equal(want.FirstDeployed) {
			t.Errorf("%s changed at the takeover: %+v", want.Name, r)
		}
	}
	standby.Stop(patience)
}

// TestHeldWriteOfALostTermNeverLands holds the write that marks a release
// deployed (the PUT of its Helm record, which Helm sends with
// context.Background()) on its way to the API server, as priority and
// fairness queueing or a slow webhook would, while the Lease passes to
// another holder. The ended term cancels the held write: its client gives
// it up, so it never reaches the API server, and the record the new leader
// wrote meanwhile stays as it wrote it (the API server's resourceVersion).
func TestHeldWriteOfALostTermNeverLands(t *testing.T) {
	e := newEnv(t)
	e.Deployment("web", version("1.0.0"))
	proxy, kubeconfig := e.proxied()
	record := "sh.helm.release.v1.web-hello.v1"
	hold := proxy.HoldMatching(func(r *http.Request) bool {
		return r.Method == http.MethodPut && r.URL.Path == "/api/v1/namespaces/"+e.NS+"/secrets/"+record
	})
	defer hold.Release()
	p := e.run(e.WriteConfig(oneSpec), "--kubeconfig", kubeconfig)
	metric := e.metricsOf(p)
	testenv.Eventually(t, patience, "the record update held", func() (bool, error) { return hold.Held() == 1, nil })
	if r := e.Release("web-hello"); r == nil || r.Status != common.StatusPendingInstall {
		t.Fatalf("the install is not pending while its record update is held: %+v", r)
	}

	e.stealLease(5 * time.Minute)
	// A held write its client does not give up is applied by the API server
	// whenever it gets there.
	testenv.Eventually(t, patience, "the held write of the ended term given up by its client", func() (bool, error) {
		return hold.Abandoned() == 1, nil
	})
	// The new leader writes the record.
	secrets := cluster.Client.CoreV1().Secrets(e.NS)
	s, err := secrets.Get(context.Background(), record, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.Labels["autox-test/new-leader"] = "wrote"
	if s, err = secrets.Update(context.Background(), s, metav1.UpdateOptions{FieldManager: "new-leader"}); err != nil {
		t.Fatal(err)
	}
	hold.Release()
	testenv.Eventually(t, patience, "the lost Lease noticed", func() (bool, error) {
		return strings.Contains(p.Output(), "lost the leader Lease"), nil
	})
	if n := hold.Forwarded(); n != 0 {
		t.Errorf("%d held writes of the ended term went on to the API server", n)
	}
	after, err := secrets.Get(context.Background(), record, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if after.ResourceVersion != s.ResourceVersion || after.Labels["status"] != "pending-install" {
		t.Errorf("the new leader's record was written after the Lease passed: resourceVersion %s → %s, status %q, managed fields %+v",
			s.ResourceVersion, after.ResourceVersion, after.Labels["status"], after.ManagedFields)
	}
	if number(metric("autox_fenced_writes_total")) < 1 {
		t.Errorf("autox_fenced_writes_total = %s after a write was aborted", metric("autox_fenced_writes_total"))
	}
	if code := p.Stop(patience); code != 0 {
		t.Errorf("a standby's stop: exit code %d", code)
	}
}

// TestAPIServerGivesUpAWriteOfALostTerm: when autox's cancellation cannot
// reach the API server (the network between them failed), the API server
// gives the write up itself: each write carries the time left in its term
// as its timeout. The record update is held in admission (a slow webhook)
// and the proxy does not pass on autox's cancellation; the Lease passes to
// another holder meanwhile. The API server abandons the held admission at
// the write's deadline and never stores the write, although the webhook's
// failure policy would let it through.
func TestAPIServerGivesUpAWriteOfALostTerm(t *testing.T) {
	e := newEnv(t)
	e.Deployment("web", version("1.0.0"))
	record := "sh.helm.release.v1.web-hello.v1"
	admission := cluster.HoldAdmissions(t, e.NS, func(operation, name string) bool {
		return operation == "UPDATE" && name == record
	})
	proxy, kubeconfig := e.proxied()
	detached := proxy.DetachMatching(func(r *http.Request) bool {
		return r.Method == http.MethodPut && r.URL.Path == "/api/v1/namespaces/"+e.NS+"/secrets/"+record
	})
	p := e.run(e.WriteConfig(oneSpec), "--kubeconfig", kubeconfig)
	testenv.Eventually(t, patience, "the record update held in admission", func() (bool, error) { return admission.Held() == 1, nil })
	e.stealLease(5 * time.Minute)
	testenv.Eventually(t, patience, "the API server's answer to the held write", func() (bool, error) {
		return len(detached.Answers()) == 1, nil
	})
	if got := detached.Answers()[0]; got < 500 {
		t.Errorf("the API server answered the write of the ended term with %d, want a timeout", got)
	} else {
		t.Logf("the API server answered the write of the ended term with %d", got)
	}
	// The webhook sees the API server's call end a moment after the answer
	// went out (under load, later still).
	testenv.Eventually(t, patience, "the API server giving up the held admission", func() (bool, error) {
		return admission.GivenUp() == 1, nil
	})
	admission.Release()
	s, err := cluster.Client.CoreV1().Secrets(e.NS).Get(context.Background(), record, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Labels["status"] != "pending-install" {
		t.Errorf("the record of the ended term's write was stored: status %q, managed fields %+v", s.Labels["status"], s.ManagedFields)
	}
	if code := p.Stop(patience); code != 0 {
		t.Errorf("a standby's stop: exit code %d", code)
	}
}
