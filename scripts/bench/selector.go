package main

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/autox-dev/autox/internal/testenv"
)

// benchSelector measures one selector spec serving n matching Deployments
// with one release each (issue 13): cold convergence, the no-op pass's API
// requests, a restart, peak RSS. Half as many Deployments again exist that
// the selector does not match: an informer watching with the selector must
// not pay for them.
func benchSelector(ctx context.Context, o options, cluster *testenv.Cluster, autox, work, chart string) error {
	cs := cluster.Client
	note("creating %d matching and %d other Deployments", o.triggers, o.triggers/2)
	if err := createLabelled(ctx, cs, "s", o.triggers, map[string]string{"bench.autox/selected": "on", "app.kubernetes.io/version": "1.0.0"}); err != nil {
		return err
	}
	if err := createLabelled(ctx, cs, "u", o.triggers/2, map[string]string{"app.kubernetes.io/version": "1.0.0"}); err != nil {
		return err
	}
	cfg := fmt.Sprintf(`namespaces: [bench]
specs:
  sel:
    trigger:
      group: apps
      version: v1
      resource: deployments
      selector: {matchLabels: {bench.autox/selected: "on"}}
      maxObjects: %d
    releaseSpecs:
      job: {chart: {path: %s}}
`, o.triggers, chart)
	_, httpAddr, args, err := autoxRun(o, cluster, work, "selector.yaml", cfg)
	if err != nil {
		return err
	}

	note("autox: cold convergence of %d selector objects", o.triggers)
	p, err := startAutox(ctx, autox, args)
	if err != nil {
		return err
	}
	defer p.kill()
	if err := p.waitFor(ctx, 30*time.Minute, func(line) bool { return p.count("release install") >= o.triggers }); err != nil {
		return fmt.Errorf("cold convergence: %w", err)
	}
	cold, coldRSS, coldCPU := time.Since(p.started), p.peakRSS(), p.cpuTime()
	coldByKind, err := scrapeRequests(httpAddr)
	if err != nil {
		return err
	}

	// The second pass that starts after convergence has nothing to do.
	p.resetPeak()
	convergedAt := time.Now()
	var pass line
	passes := 0
	if err := p.waitFor(ctx, 3*o.resync+time.Minute, func(l line) bool {
		started := l.at.Add(-time.Duration(l.DurationMS * float64(time.Millisecond)))
		if l.Message == "pass complete" && started.After(convergedAt) {
			passes++
			pass = l
		}
		return passes >= 2
	}); err != nil {
		return fmt.Errorf("no-op pass: %w", err)
	}
	noopWrites, noopRSS := p.writesSince(convergedAt), p.peakRSS()

	if p, err = restartAutox(ctx, p, autox, args); err != nil {
		return err
	}
	defer p.kill()
	restart, restartWrites, restartRSS, restartRequests := time.Since(p.started), p.writesSince(p.started), p.peakRSS(), p.lastRequests()
	p.stop()

	var b strings.Builder
	fmt.Fprintf(&b, "\n### selector trigger: %d matching objects × 1 release (and %d Deployments it does not match) of chart %s\n\n", o.triggers, o.triggers/2, o.chart)
	fmt.Fprintf(&b, "Machine: %s, %d cores, %s; %s.\n\n", cpuModel(), runtime.NumCPU(), memTotal(), time.Now().UTC().Format("2006-01-02"))
	b.WriteString("| measure | autox |\n|---|---|\n")
	fmt.Fprintf(&b, "| cold convergence, nothing → all deployed | %s |\n", secs(cold))
	fmt.Fprintf(&b, "| API requests per release installed, cold (all / writes) | %.2f / %.2f |\n",
		float64(coldByKind.total())/float64(o.triggers), float64(coldByKind.writes())/float64(o.triggers))
	fmt.Fprintf(&b, "| CPU time of autox during cold convergence | %s |\n", secs(coldCPU))
	fmt.Fprintf(&b, "| no-op periodic pass: time | %s |\n", secs(time.Duration(pass.DurationMS*float64(time.Millisecond))))
	fmt.Fprintf(&b, "| no-op periodic pass: API requests | %d |\n", pass.APIRequests)
	fmt.Fprintf(&b, "| no-op passes: Helm writes | %d |\n", noopWrites)
	fmt.Fprintf(&b, "| restart → first complete pass: time, API requests | %s, %d |\n", secs(restart), restartRequests)
	fmt.Fprintf(&b, "| restart: Helm writes | %d |\n", restartWrites)
	fmt.Fprintf(&b, "| peak RSS: cold convergence / no-op passes / restart | %s / %s / %s |\n", mib(coldRSS), mib(noopRSS), mib(restartRSS))
	fmt.Print(b.String())
	return nil
}

// createLabelled creates n Deployments prefix0000… with these labels, 16 at a time.
func createLabelled(ctx context.Context, cs kubernetes.Interface, prefix string, n int, labels map[string]string) error {
	var (
		wg   sync.WaitGroup
		next atomic.Int64
		errs = make([]error, 16)
	)
	for w := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1)) - 1; i < n && errs[w] == nil; i = int(next.Add(1)) - 1 {
				d := testenv.DeploymentObject("bench", fmt.Sprintf("%s%04d", prefix, i), labels)
				_, errs[w] = cs.AppsV1().Deployments("bench").Create(ctx, d, metav1.CreateOptions{})
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
