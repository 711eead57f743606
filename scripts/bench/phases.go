package main

import (
	"context"
	"fmt"
	"os/exec"
	"time"

	"github.com/autox-dev/autox/config"
)

// The phases of a run, in order: the helm CLI baseline, the floor, autox's
// cold convergence, its quiet passes, a restart, and relabels. Each fills in
// its part of b.r.

// baseline is the helm CLI, one `helm upgrade --install` after another.
func (b *run) baseline(ctx context.Context) error {
	n := b.total
	if b.o.baselineSample > 0 && b.o.baselineSample < b.total {
		n = b.o.baselineSample
	}
	note("baseline: helm upgrade --install for %d releases", n)
	start := time.Now()
	for i := 0; i < n; i++ {
		cmd := exec.CommandContext(ctx, b.helm, "upgrade", "--install", fmt.Sprintf("t%04d-r%d", i/2, i%2), b.chart,
			"--namespace", "baseline", "--kubeconfig", b.cluster.Kubeconfig, "--set", fmt.Sprintf("index=%d", i))
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("helm upgrade --install: %w\n%s", err, out)
		}
	}
	b.r.Baseline = time.Since(start) * time.Duration(b.total) / time.Duration(n)
	b.r.BaselineSampled = n < b.total
	b.r.Load["baseline"] = loadAvg()
	return nil
}

// floor is the same releases' writes, made directly (see floor.go).
func (b *run) floor(ctx context.Context) error {
	note("floor: the writes of %d releases with %d workers", b.total, b.o.floorWorkers)
	serverBefore := serverCPU()
	resetServerPeak()
	profiled := func() {}
	defer func() { profiled() }()
	fl, err := runFloor(ctx, b.cluster.Config, "floor", b.chart, floorPlans(b.total), b.o.floorWorkers,
		func() { profiled = b.serverProfile(ctx, "floor") })
	if err != nil {
		return err
	}
	b.r.FloorServerCPU = serverCPU() - serverBefore
	b.r.Floor, b.r.FloorWrites = fl.took, fl.writes
	b.r.ServerPeak["floor"], b.r.Load["floor"] = serverPeak(), loadAvg()
	return nil
}

// cold is autox's convergence from nothing (or, with --seed, from the
// releases it would have installed): the process, its arguments and its
// metrics address.
func (b *run) cold(ctx context.Context) (*process, []string, string, error) {
	cfgPath, httpAddr, args, err := autoxRun(b.o, b.cluster, b.work, "config.yaml", b.config)
	if err != nil {
		return nil, nil, "", err
	}
	if b.o.seed {
		cfg, err := config.Load(cfgPath)
		if err != nil {
			return nil, nil, "", err
		}
		plans, err := seedPlans(cfg, map[string]string{"app.kubernetes.io/version": "1.0.0"})
		if err != nil {
			return nil, nil, "", err
		}
		note("seeding the %d releases autox would install", len(plans))
		if _, err := runFloor(ctx, b.cluster.Config, "bench", b.chart, plans, b.o.floorWorkers, nil); err != nil {
			return nil, nil, "", fmt.Errorf("seed: %w", err)
		}
		b.r.Seeded = true
	}
	note("autox: cold convergence of %d releases", b.total)
	serverBefore := serverCPU()
	resetServerPeak()
	profiled := b.serverProfile(ctx, "cold")
	defer profiled()
	p, err := startAutox(ctx, b.autox, args)
	if err != nil {
		return nil, nil, "", err
	}
	converged := func(l line) bool { return p.count("release install") >= b.total }
	if b.o.seed {
		converged = func(l line) bool { return l.Message == "pass complete" }
	}
	if err := p.waitFor(ctx, 30*time.Minute, converged); err != nil {
		p.kill()
		return nil, nil, "", fmt.Errorf("cold convergence: %w", err)
	}
	r := &b.r
	r.Cold = time.Since(p.started)
	if !b.o.seed {
		note("autox: first install logged %s after exec; the last %s", p.firstAt("release install").Sub(p.started).Round(time.Millisecond), r.Cold.Round(time.Millisecond))
	}
	r.ColdCPU = p.cpuTime()
	r.ColdServerCPU = serverCPU() - serverBefore
	r.InstallMean = p.meanDuration("release install")
	r.ColdRSS = p.peakRSS()
	r.ServerPeak["cold"], r.Load["cold"] = serverPeak(), loadAvg()
	r.ColdRequests = p.lastRequests()
	if r.ColdByKind, err = scrapeRequests(httpAddr); err != nil {
		p.kill()
		return nil, nil, "", fmt.Errorf("cold convergence: %w", err)
	}
	return p, args, httpAddr, nil
}

// quiet waits for the passes with nothing to do. The first periodic pass
// that starts after convergence may still finish specs that passes during
// convergence queued again; the pass after it has nothing at all to do.
func (b *run) quiet(ctx context.Context, p *process, httpAddr string) error {
	r := &b.r
	p.resetPeak()
	resetServerPeak()
	convergedAt := time.Now()
	note("autox: waiting for a periodic pass with nothing to do (--resync %s)", b.o.resync)
	trailing := func() (int64, time.Duration) { return 0, 0 }
	if !b.o.seed {
		trailing = trailingEvents(ctx, httpAddr, r.ColdByKind[eventCreates], convergedAt, 10*time.Second)
	}
	var pass line
	if err := p.waitFor(ctx, 2*b.o.resync+time.Minute, func(l line) bool {
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
	r.TrailingEvents, r.LastTrailingEvent = trailing()
	// A whole quiet period, from the end of that pass to the end of the
	// next: every request autox makes while nothing changes (the Events of
	// convergence, sent in the background, are out by then).
	afterPass, err := scrapeRequests(httpAddr)
	if err != nil {
		return fmt.Errorf("no-op pass: %w", err)
	}
	firstEnd := time.Now()
	if err := p.waitFor(ctx, 2*b.o.resync+time.Minute, func(l line) bool {
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
	r.ServerPeak["quiet"], r.Load["quiet"] = serverPeak(), loadAvg()
	return nil
}

// restart starts a new process with the same config, until its first
// complete pass, and returns it.
func (b *run) restart(ctx context.Context, p *process, args []string) (*process, error) {
	resetServerPeak()
	p, err := restartAutox(ctx, p, b.autox, args)
	if err != nil {
		return nil, err
	}
	b.r.Restart = time.Since(p.started)
	b.r.RestartWrites = p.writesSince(p.started)
	b.r.RestartRSS = p.peakRSS()
	b.r.RestartRequests = p.lastRequests()
	b.r.ServerPeak["restart"], b.r.Load["restart"] = serverPeak(), loadAvg()
	return p, nil
}

// relabels are the reaction: relabel a trigger, until both its releases are
// upgraded.
func (b *run) relabels(ctx context.Context, p *process) error {
	note("autox: %d relabels", b.o.relabels)
	p.resetPeak()
	for i := 0; i < b.o.relabels; i++ {
		idx := (i * 7919) % b.o.triggers
		before := p.countSpec("release upgrade", idx)
		t0, err := relabel(ctx, b.cluster.Client, idx, fmt.Sprintf("2.0.%d", i))
		if err != nil {
			return err
		}
		if err := p.waitFor(ctx, time.Minute, func(l line) bool { return p.countSpec("release upgrade", idx) >= before+releasesPerTrigger }); err != nil {
			return fmt.Errorf("relabel %d: %w", i, err)
		}
		d := p.lastAt().Sub(t0)
		b.r.Reactions = append(b.r.Reactions, d)
		if d > time.Second {
			note("slow reaction %d (t%04d): %s; log around it:\n%s", i, idx, d, p.tail(12))
		}
	}
	b.r.ReactionRSS = p.peakRSS()
	b.r.Load["relabels"] = loadAvg()
	return nil
}
