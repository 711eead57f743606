// Command bench measures autox against the `helm upgrade --install` baseline
// on the local control plane and prints one markdown table. Run it with
// scripts/bench.sh; see BENCHMARKS.md for results and what each row means.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/internal/testenv"
)

type options struct {
	triggers, relabels, workers, baselineSample int
	floorWorkers                                int
	seed, selector                              bool
	chart                                       string
	resync                                      time.Duration
}

func main() {
	var o options
	flag.IntVar(&o.triggers, "triggers", 200, "trigger Deployments (each with 2 releases)")
	flag.IntVar(&o.relabels, "relabels", 50, "relabels for the reaction latency")
	flag.IntVar(&o.workers, "workers", 0, "autox --workers (0: autox's default)")
	flag.IntVar(&o.floorWorkers, "floor-workers", 16, "releases the floor client installs in parallel")
	flag.StringVar(&o.chart, "chart", "one", "chart of testdata/charts every release installs")
	flag.BoolVar(&o.seed, "seed", false, "instead of timing autox's cold convergence, write the releases autox would install (the floor's way, with autox's labels) and start autox on them: for fleets too big to converge within a run")
	flag.BoolVar(&o.selector, "selector", false, "instead: one selector spec serving --triggers matching Deployments with one release each (cold convergence, no-op pass, restart, RSS)")
	flag.IntVar(&o.baselineSample, "baseline-sample", 0, "run the helm baseline for only this many releases and extrapolate (0: all)")
	flag.DurationVar(&o.resync, "resync", 20*time.Second, "autox --resync (the no-op pass is the first periodic pass after convergence)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := bench(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "bench failed:", err)
		os.Exit(1)
	}
}

func note(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "bench: "+format+"\n", args...)
}

const releasesPerTrigger = 2

func bench(ctx context.Context, o options) error {
	root, err := testenv.ModuleRoot()
	if err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "autox-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)

	note("building autox and the helm CLI %s", helmVersion(root))
	autox, err := testenv.BuildAutox(work, "bench", testenv.Plain)
	if err != nil {
		return err
	}
	helm := filepath.Join(work, "helm")
	build := exec.CommandContext(ctx, "go", "build", "-o", helm, "helm.sh/helm/v3/cmd/helm")
	build.Dir = filepath.Join(root, "scripts", "helmcli")
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("build helm: %w\n%s", err, out)
	}

	note("starting kube-apiserver and etcd")
	cluster, err := testenv.Start()
	if err != nil {
		return err
	}
	defer func() {
		if err := cluster.Stop(); err != nil {
			note("stop control plane: %v", err)
		}
	}()
	cs := cluster.Client
	for _, ns := range []string{"bench", "baseline", "floor"} {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	chart := filepath.Join(root, "testdata", "charts", o.chart)
	if o.selector {
		return benchSelector(ctx, o, cluster, autox, work, chart)
	}
	note("creating %d trigger Deployments", o.triggers)
	if err := createTriggers(ctx, cs, o.triggers); err != nil {
		return err
	}
	r := results{Triggers: o.triggers, Releases: o.triggers * releasesPerTrigger}

	// Baseline: the helm CLI, one `helm upgrade --install` after another.
	total := o.triggers * releasesPerTrigger
	n := total
	if o.baselineSample > 0 && o.baselineSample < total {
		n = o.baselineSample
	}
	note("baseline: helm upgrade --install for %d releases", n)
	start := time.Now()
	for i := 0; i < n; i++ {
		cmd := exec.CommandContext(ctx, helm, "upgrade", "--install", fmt.Sprintf("t%04d-r%d", i/2, i%2), chart,
			"--namespace", "baseline", "--kubeconfig", cluster.Kubeconfig, "--set", fmt.Sprintf("index=%d", i))
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("helm upgrade --install: %w\n%s", err, out)
		}
	}
	r.Baseline = time.Since(start) * time.Duration(total) / time.Duration(n)
	r.BaselineSampled = n < total

	// The floor: the same releases' writes, made directly (see floor.go).
	note("floor: the writes of %d releases with %d workers", total, o.floorWorkers)
	serverBefore := serverCPU()
	fl, err := runFloor(ctx, cluster.Config, "floor", chart, floorPlans(total), o.floorWorkers)
	if err != nil {
		return err
	}
	r.FloorServerCPU = serverCPU() - serverBefore
	r.Floor, r.FloorWrites = fl.took, fl.writes

	// autox: cold convergence from nothing.
	cfgPath, httpAddr, args, err := autoxRun(o, cluster, work, "config.yaml", configYAML(o.triggers, chart))
	if err != nil {
		return err
	}
	if o.seed {
		cfg, err := config.Load(cfgPath)
		if err != nil {
			return err
		}
		plans, err := seedPlans(cfg, map[string]string{"app.kubernetes.io/version": "1.0.0"})
		if err != nil {
			return err
		}
		note("seeding the %d releases autox would install", len(plans))
		if _, err := runFloor(ctx, cluster.Config, "bench", chart, plans, o.floorWorkers); err != nil {
			return fmt.Errorf("seed: %w", err)
		}
		r.Seeded = true
	}
	note("autox: cold convergence of %d releases", total)
	serverBefore = serverCPU()
	p, err := startAutox(ctx, autox, args)
	if err != nil {
		return err
	}
	defer p.kill()
	converged := func(l line) bool { return p.count("release install") >= total }
	if o.seed {
		converged = func(l line) bool { return l.Message == "pass complete" }
	}
	if err := p.waitFor(ctx, 30*time.Minute, converged); err != nil {
		return fmt.Errorf("cold convergence: %w", err)
	}
	r.Cold = time.Since(p.started)
	if !o.seed {
		note("autox: first install logged %s after exec; the last %s", p.firstAt("release install").Sub(p.started).Round(time.Millisecond), r.Cold.Round(time.Millisecond))
	}
	r.ColdCPU = p.cpuTime()
	r.ColdServerCPU = serverCPU() - serverBefore
	r.InstallMean = p.meanDuration("release install")
	r.ColdRSS = p.peakRSS()
	r.ColdRequests = p.lastRequests()
	if r.ColdByKind, err = scrapeRequests(httpAddr); err != nil {
		return fmt.Errorf("cold convergence: %w", err)
	}

	// No-op pass: the first periodic pass that starts after convergence
	// may still finish specs that passes during convergence queued again;
	// the pass after it has nothing at all to do.
	p.resetPeak()
	convergedAt := time.Now()
	note("autox: waiting for a periodic pass with nothing to do (--resync %s)", o.resync)
	var pass line
	if err := p.waitFor(ctx, 2*o.resync+time.Minute, func(l line) bool {
		started := l.at.Add(-time.Duration(l.DurationMS * float64(time.Millisecond)))
		if l.Message == "pass complete" && started.After(convergedAt) {
			pass = l
			return true
		}
		return false
	}); err != nil {
		return fmt.Errorf("no-op pass: %w", err)
	}
	r.NoopWrites = p.writesSince(convergedAt)
	// A whole quiet period, from the end of that pass to the end of the
	// next: every request autox makes while nothing changes (the Events of
	// convergence, sent in the background, are out by then).
	afterPass, err := scrapeRequests(httpAddr)
	if err != nil {
		return fmt.Errorf("no-op pass: %w", err)
	}
	firstEnd := time.Now()
	if err := p.waitFor(ctx, 2*o.resync+time.Minute, func(l line) bool {
		if l.Message == "pass complete" && l.at.After(firstEnd) {
			pass = l
			return true
		}
		return false
	}); err != nil {
		return fmt.Errorf("second no-op pass: %w", err)
	}
	r.NoopPass = time.Duration(pass.DurationMS * float64(time.Millisecond))
	r.NoopRequests = pass.APIRequests
	afterNext, err := scrapeRequests(httpAddr)
	if err != nil {
		return fmt.Errorf("second no-op pass: %w", err)
	}
	r.QuietByKind = afterNext.minus(afterPass)
	r.NoopWrites += p.writesSince(firstEnd)
	r.NoopRSS = p.peakRSS()

	// Restart: a new process with the same config, until its first complete pass.
	if p, err = restartAutox(ctx, p, autox, args); err != nil {
		return err
	}
	defer p.kill()
	r.Restart = time.Since(p.started)
	r.RestartWrites = p.writesSince(p.started)
	r.RestartRSS = p.peakRSS()
	r.RestartRequests = p.lastRequests()

	// Reaction: relabel a trigger, until both its releases are upgraded.
	note("autox: %d relabels", o.relabels)
	p.resetPeak()
	for i := 0; i < o.relabels; i++ {
		idx := (i * 7919) % o.triggers
		before := p.countSpec("release upgrade", idx)
		t0, err := relabel(ctx, cs, idx, fmt.Sprintf("2.0.%d", i))
		if err != nil {
			return err
		}
		if err := p.waitFor(ctx, time.Minute, func(l line) bool { return p.countSpec("release upgrade", idx) >= before+releasesPerTrigger }); err != nil {
			return fmt.Errorf("relabel %d: %w", i, err)
		}
		d := p.lastAt().Sub(t0)
		r.Reactions = append(r.Reactions, d)
		if d > time.Second {
			note("slow reaction %d (t%04d): %s; log around it:\n%s", i, idx, d, p.tail(12))
		}
	}
	r.ReactionRSS = p.peakRSS()
	p.stop()

	fmt.Print(r.table(o))
	return nil
}

// restartAutox stops p and starts autox again with the same arguments,
// until its first complete pass.
func restartAutox(ctx context.Context, p *process, autox string, args []string) (*process, error) {
	note("autox: restart")
	p.stop()
	p, err := startAutox(ctx, autox, args)
	if err != nil {
		return nil, err
	}
	if err := p.waitFor(ctx, 10*time.Minute, func(l line) bool { return l.Message == "pass complete" }); err != nil {
		p.kill()
		return nil, fmt.Errorf("restart: %w", err)
	}
	return p, nil
}

// createTriggers creates the n trigger Deployments, 16 at a time.
func createTriggers(ctx context.Context, cs kubernetes.Interface, n int) error {
	return createLabelled(ctx, cs, "t", n, map[string]string{"app.kubernetes.io/version": "1.0.0"})
}

// autoxRun writes a config file into work and returns it, the address of
// autox's http server and the arguments of `autox run` at default flags
// (--workers when set) on it.
func autoxRun(o options, cluster *testenv.Cluster, work, file, config string) (cfgPath, httpAddr string, args []string, err error) {
	cfgPath = filepath.Join(work, file)
	if err := os.WriteFile(cfgPath, []byte(config), 0o600); err != nil {
		return "", "", nil, err
	}
	if httpAddr, err = freeAddr(); err != nil {
		return "", "", nil, err
	}
	args = []string{"run", "--config", cfgPath, "--kubeconfig", cluster.Kubeconfig, "--leader-elect=false",
		"--http-addr", httpAddr, "--resync", o.resync.String()}
	if o.workers > 0 {
		args = append(args, "--workers", strconv.Itoa(o.workers))
	}
	return cfgPath, httpAddr, args, nil
}

func helmVersion(root string) string {
	data, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		return "?"
	}
	for _, l := range strings.Split(string(data), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "helm.sh/helm/v3" {
			return f[1]
		}
	}
	return "?"
}

func deployment(i int, version string) *appsv1.Deployment {
	return testenv.DeploymentObject("bench", fmt.Sprintf("t%04d", i), map[string]string{"app.kubernetes.io/version": version})
}

func relabel(ctx context.Context, cs kubernetes.Interface, i int, version string) (time.Time, error) {
	d, err := cs.AppsV1().Deployments("bench").Get(ctx, fmt.Sprintf("t%04d", i), metav1.GetOptions{})
	if err != nil {
		return time.Time{}, err
	}
	d.Labels["app.kubernetes.io/version"] = version
	t0 := time.Now()
	_, err = cs.AppsV1().Deployments("bench").Update(ctx, d, metav1.UpdateOptions{})
	return t0, err
}

func configYAML(n int, chart string) string {
	var b strings.Builder
	b.WriteString("namespaces: [bench]\nspecs:\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "  t%04d:\n    trigger: {group: apps, version: v1, resource: deployments, name: t%04d, namespace: bench}\n    releaseSpecs:\n", i, i)
		for j := 0; j < releasesPerTrigger; j++ {
			fmt.Fprintf(&b, "      r%d: {chart: {path: %s}, values: {index: %d}}\n", j, chart, i*releasesPerTrigger+j)
		}
	}
	return b.String()
}

// ---- the autox process and its log ----

type line struct {
	Message     string  `json:"message"`
	Spec        string  `json:"spec"`
	Action      string  `json:"action"`
	DurationMS  float64 `json:"duration"`
	APIRequests int64   `json:"apiRequests"`
	Error       string  `json:"error"`
	at          time.Time
}

type process struct {
	cmd     *exec.Cmd
	started time.Time
	done    chan struct{}

	mu     sync.Mutex
	lines  []line
	counts map[string]int
	wake   chan struct{}
}

func startAutox(ctx context.Context, bin string, args []string) (*process, error) {
	p := &process{cmd: exec.Command(bin, args...), done: make(chan struct{}), counts: map[string]int{}, wake: make(chan struct{}, 1)}
	out, err := p.cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	p.cmd.Stdout = io.Discard
	p.started = time.Now()
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 1<<24)
		for sc.Scan() {
			var l line
			if json.Unmarshal(sc.Bytes(), &l) != nil {
				continue
			}
			l.at = time.Now()
			p.mu.Lock()
			p.lines = append(p.lines, l)
			if l.Error != "" {
				l.Message += " failed" // counted apart: only successes converge
			}
			p.counts[l.Message]++
			p.counts[l.Message+"|"+l.Spec]++
			p.mu.Unlock()
			select {
			case p.wake <- struct{}{}:
			default:
			}
		}
		_ = p.cmd.Wait()
	}()
	return p, nil
}

func (p *process) count(msg string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.counts[msg]
}

func (p *process) countSpec(msg string, i int) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.counts[msg+"|"+fmt.Sprintf("t%04d", i)]
}

func (p *process) lastAt() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lines[len(p.lines)-1].at
}

// firstAt is when the first line with that message was read.
func (p *process) firstAt(msg string) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, l := range p.lines {
		if l.Message == msg {
			return l.at
		}
	}
	return time.Time{}
}

// lastRequests is the apiRequests of the latest pass line, or 0.
func (p *process) lastRequests() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := len(p.lines) - 1; i >= 0; i-- {
		if p.lines[i].Message == "pass complete" {
			return p.lines[i].APIRequests
		}
	}
	return 0
}

// tail describes the last n log lines.
func (p *process) tail(n int) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var b strings.Builder
	for _, l := range p.lines[max(0, len(p.lines)-n):] {
		fmt.Fprintf(&b, "  %s %s spec=%s action=%s duration=%.0fms requests=%d\n", l.at.Format("15:04:05.000"), l.Message, l.Spec, l.Action, l.DurationMS, l.APIRequests)
	}
	return b.String()
}

// cpuTime is the user+system CPU time the process used so far.
func (p *process) cpuTime() time.Duration { return cpuTimeOf(p.cmd.Process.Pid) }

// serverCPU is the CPU time the control plane this process started
// (kube-apiserver and etcd, its children) used so far.
func serverCPU() time.Duration {
	var sum time.Duration
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		s := string(data)
		name := s[strings.Index(s, "(")+1 : strings.LastIndex(s, ")")]
		f := strings.Fields(s[strings.LastIndex(s, ")")+2:])
		if len(f) > 1 && f[1] == strconv.Itoa(os.Getpid()) && (name == "kube-apiserver" || name == "etcd") {
			sum += cpuTimeOf(pid)
		}
	}
	return sum
}

func cpuTimeOf(pid int) time.Duration {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command name (which is in parentheses): utime is the
	// 14th field of the line, stime the 15th, in clock ticks (100 per second).
	s := string(data)
	f := strings.Fields(s[strings.LastIndex(s, ")")+2:])
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+st) * 10 * time.Millisecond
}

// meanDuration is the mean logged duration of lines with that message.
func (p *process) meanDuration(msg string) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	var sum float64
	n := 0
	for _, l := range p.lines {
		if l.Message == msg {
			sum += l.DurationMS
			n++
		}
	}
	if n == 0 {
		return 0
	}
	return time.Duration(sum / float64(n) * float64(time.Millisecond))
}

// writesSince counts Helm writes logged after t.
func (p *process) writesSince(t time.Time) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, l := range p.lines {
		if l.at.After(t) && strings.HasPrefix(l.Message, "release ") {
			n++
		}
	}
	return n
}

// waitFor waits until cond holds for the latest line (it sees every line).
func (p *process) waitFor(ctx context.Context, timeout time.Duration, cond func(line) bool) error {
	deadline := time.After(timeout)
	seen := 0
	for {
		p.mu.Lock()
		lines := p.lines[seen:]
		seen = len(p.lines)
		p.mu.Unlock()
		for _, l := range lines {
			if cond(l) {
				return nil
			}
		}
		select {
		case <-p.wake:
		case <-p.done:
			return errors.New("autox exited")
		case <-deadline:
			return fmt.Errorf("timed out after %s; last log lines:\n%s", timeout, p.tail(20))
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// peakRSS is the process's peak resident set since start or resetPeak.
func (p *process) peakRSS() int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(data), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmHWM:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb * 1024
		}
	}
	return 0
}

// resetPeak starts a new peak RSS measurement (Linux clear_refs 5).
func (p *process) resetPeak() {
	_ = os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", p.cmd.Process.Pid), []byte("5"), 0o200)
}

func (p *process) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(2 * time.Minute):
		p.kill()
	}
}

func (p *process) kill() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Kill()
	<-p.done
}

// ---- the table ----

type results struct {
	Triggers, Releases                          int
	Baseline, Cold, NoopPass, Restart           time.Duration
	Floor                                       time.Duration
	FloorWrites                                 int64
	FloorServerCPU, ColdServerCPU               time.Duration
	ColdByKind, QuietByKind                     requestCounts
	BaselineSampled, Seeded                     bool
	ColdRSS, NoopRSS, RestartRSS, ReactionRSS   int64
	ColdRequests, NoopRequests, RestartRequests int64
	NoopWrites, RestartWrites                   int
	InstallMean                                 time.Duration
	ColdCPU                                     time.Duration
	Reactions                                   []time.Duration
}

func percentile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(q*float64(len(s)-1) + 0.5)
	return s[i]
}

func mib(b int64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }

func secs(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }

func (r results) table(o options) string {
	var b strings.Builder
	workers := "default"
	if o.workers > 0 {
		workers = strconv.Itoa(o.workers)
	}
	fmt.Fprintf(&b, "\n### %d triggers × %d releases (%d releases) of chart %s, --workers %s\n\n", r.Triggers, releasesPerTrigger, r.Releases, o.chart, workers)
	fmt.Fprintf(&b, "Machine: %s, %d cores, %s, %s/%s, %s; %s.\n\n", cpuModel(), runtime.NumCPU(), memTotal(), runtime.GOOS, runtime.GOARCH, runtime.Version(), time.Now().UTC().Format("2006-01-02"))
	b.WriteString("| measure | autox | baseline / target |\n|---|---|---|\n")
	baseline := secs(r.Baseline) + " (`helm upgrade --install`, one after another"
	if r.BaselineSampled {
		baseline += fmt.Sprintf(", extrapolated from %d releases", o.baselineSample)
	}
	baseline += ")"
	if r.Seeded {
		fmt.Fprintf(&b, "| cold convergence | not measured: releases seeded | %s |\n", baseline)
		fmt.Fprintf(&b, "| start on the seeded releases → first complete pass | %s | |\n", secs(r.Cold))
	} else {
		fmt.Fprintf(&b, "| cold convergence, nothing → all deployed | %s | %s |\n", secs(r.Cold), baseline)
	}
	fmt.Fprintf(&b, "| floor: the same releases' writes (%.0f per release) made directly, %d workers, no rate limit | %s | |\n",
		float64(r.FloorWrites)/float64(r.Releases), o.floorWorkers, secs(r.Floor))
	if !r.Seeded {
		fmt.Fprintf(&b, "| autox's speed as a share of the floor's | %.0f %% | target ≥ 50 %% |\n", 100*r.Floor.Seconds()/r.Cold.Seconds())
		fmt.Fprintf(&b, "| API requests per release installed, cold (all / writes) | %.2f / %.2f | floor: %.2f / %.2f |\n",
			float64(r.ColdByKind.total())/float64(r.Releases), float64(r.ColdByKind.writes())/float64(r.Releases),
			float64(r.FloorWrites)/float64(r.Releases), float64(r.FloorWrites)/float64(r.Releases))
		for _, k := range r.ColdByKind.sorted() {
			fmt.Fprintf(&b, "| … %s %s | %.2f | |\n", k.verb, k.resource, float64(r.ColdByKind[k])/float64(r.Releases))
		}
		fmt.Fprintf(&b, "| mean time of one Helm install inside autox | %s | |\n", secs(r.InstallMean))
		fmt.Fprintf(&b, "| CPU time of autox during cold convergence | %s | |\n", secs(r.ColdCPU))
		fmt.Fprintf(&b, "| CPU time of kube-apiserver and etcd during cold convergence | %s | floor: %s |\n", secs(r.ColdServerCPU), secs(r.FloorServerCPU))
		fmt.Fprintf(&b, "| speed-up over the baseline | %.1f× | target ≥ 5× |\n", r.Baseline.Seconds()/r.Cold.Seconds())
	}
	fmt.Fprintf(&b, "| no-op periodic pass: time | %s | target < 2 s |\n", secs(r.NoopPass))
	fmt.Fprintf(&b, "| no-op periodic pass: API requests | %d | must not grow with triggers |\n", r.NoopRequests)
	fmt.Fprintf(&b, "| no-op periodic pass: Helm writes | %d | must be 0 |\n", r.NoopWrites)
	fmt.Fprintf(&b, "| one quiet --resync period (end of a no-op pass → end of the next): API requests (writes) | %d (%d): %s | writes must be 0 |\n", r.QuietByKind.total(), r.QuietByKind.writes(), r.QuietByKind)
	fmt.Fprintf(&b, "| restart → first complete pass: time | %s | |\n", secs(r.Restart))
	fmt.Fprintf(&b, "| restart → first complete pass: API requests (first pass) | %d | |\n", r.RestartRequests)
	fmt.Fprintf(&b, "| restart: Helm writes | %d | must be 0 |\n", r.RestartWrites)
	fmt.Fprintf(&b, "| reaction, relabel → both releases upgraded: p50 | %s | |\n", secs(percentile(r.Reactions, 0.5)))
	fmt.Fprintf(&b, "| reaction: p99 (%d relabels) | %s | target < 1 s |\n", len(r.Reactions), secs(percentile(r.Reactions, 0.99)))
	fmt.Fprintf(&b, "| peak RSS: cold convergence | %s | target < 150 MiB |\n", mib(r.ColdRSS))
	fmt.Fprintf(&b, "| peak RSS: no-op pass | %s | |\n", mib(r.NoopRSS))
	fmt.Fprintf(&b, "| peak RSS: restart | %s | |\n", mib(r.RestartRSS))
	fmt.Fprintf(&b, "| peak RSS: relabels | %s | |\n", mib(r.ReactionRSS))
	return b.String()
}

func cpuModel() string {
	data, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	for _, l := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(l, "model name") {
			if i := strings.Index(l, ":"); i >= 0 {
				return strings.TrimSpace(l[i+1:])
			}
		}
	}
	return runtime.GOARCH
}

func memTotal() string {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return "? memory"
	}
	for _, l := range strings.Split(string(data), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "MemTotal:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return fmt.Sprintf("%.0f GiB", float64(kb)/(1<<20))
		}
	}
	return "? memory"
}

// ---- autox's API requests, from its /metrics ----

type requestKind struct{ verb, resource string }

// requestCounts are the values of autox_kube_api_requests_total.
type requestCounts map[requestKind]int64

func (c requestCounts) total() int64 {
	var n int64
	for _, v := range c {
		n += v
	}
	return n
}

func (c requestCounts) writes() int64 {
	var n int64
	for k, v := range c {
		switch k.verb {
		case "get", "list", "watch":
		default:
			n += v
		}
	}
	return n
}

func (c requestCounts) minus(o requestCounts) requestCounts {
	out := requestCounts{}
	for k, v := range c {
		if d := v - o[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

// sorted returns the kinds, most requests first.
func (c requestCounts) sorted() []requestKind {
	ks := make([]requestKind, 0, len(c))
	for k := range c {
		ks = append(ks, k)
	}
	sort.Slice(ks, func(i, j int) bool {
		if c[ks[i]] != c[ks[j]] {
			return c[ks[i]] > c[ks[j]]
		}
		return ks[i].verb+ks[i].resource < ks[j].verb+ks[j].resource
	})
	return ks
}

func (c requestCounts) String() string {
	var parts []string
	for _, k := range c.sorted() {
		parts = append(parts, fmt.Sprintf("%s %s %d", k.verb, k.resource, c[k]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// scrapeRequests reads autox_kube_api_requests_total from autox's /metrics.
func scrapeRequests(addr string) (requestCounts, error) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil, fmt.Errorf("cannot read autox's metrics: %w", err)
	}
	defer resp.Body.Close()
	out := requestCounts{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if !strings.HasPrefix(l, "autox_kube_api_requests_total{") {
			continue
		}
		labels, value, ok := strings.Cut(strings.TrimPrefix(l, "autox_kube_api_requests_total{"), "} ")
		if !ok {
			continue
		}
		var k requestKind
		for _, kv := range strings.Split(labels, ",") {
			name, v, _ := strings.Cut(kv, "=")
			v = strings.Trim(v, `"`)
			switch name {
			case "verb":
				k.verb = v
			case "resource":
				k.resource = v
			}
		}
		f, err := strconv.ParseFloat(value, 64)
		if err != nil {
			continue
		}
		out[k] = int64(f)
	}
	return out, sc.Err()
}

// freeAddr returns a local address nothing listens on, for autox's --http-addr.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}
