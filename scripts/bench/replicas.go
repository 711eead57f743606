package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The replicas run (--replicas R --shards N --kills K): R autox processes
// with --shards N on one control plane, each with its own log (--log-dir)
// and metrics. It measures their cold convergence, requests per release
// and peak RSS per replica; then K times kills (SIGKILL) a replica holding
// shards and times until its shards are held again and until each of them
// has had a complete pass under its new holder (its releases reconciled),
// and restarts it; last a new replica joins. Helm writes are counted on
// the release records and in every replica's log from convergence on.

// replica is one autox process of the run.
type replica struct {
	p        *process
	args     []string
	addr, id string
	// pprof is its --pprof-addr: its heap is read there.
	pprof string
}

// replicaResults are the run's figures.
type replicaResults struct {
	Replicas, Shards int
	Converge         time.Duration
	// Requests, RSS and Held per replica at convergence (RSS the peak);
	// ByKind the requests of all replicas by verb and resource.
	Requests []int64
	ByKind   requestCounts
	RSS      []int64
	// QuietRSS is each replica's peak RSS over two resync periods after
	// convergence; LiveHeap its heap in use right after a collection at
	// their end: what a replica keeps for its held shards, without the
	// installs' working memory (RSS keeps the pages the convergence grew).
	QuietRSS, LiveHeap []int64
	Held               spread
	// Per killed shard: kill → held by a live replica; kill → its first
	// complete pass under the new holder.
	HeldAgain, Reconciled []time.Duration
	// After each restart of a killed replica: time until settled, spread.
	RestartSettle []time.Duration
	RestartSpread []spread
	// The join: spread before and after, time until settled, and the
	// first complete pass of each shard the new replica took.
	JoinBefore, JoinAfter spread
	JoinSettle            time.Duration
	JoinReconciled        []time.Duration
	RecordWrites          recordChanges
	HelmWrites            int
}

func (b *run) replicaRun(ctx context.Context) error {
	o := b.o
	rr := &replicaResults{Replicas: o.replicas, Shards: o.shards}
	b.r.Mode, b.r.Replicas = "replicas", rr
	_, _, base, err := autoxRun(o, b.cluster, b.work, "config.yaml", b.config)
	if err != nil {
		return err
	}
	var all []*replica // every process started, to stop each by its pid
	defer func() {
		for _, x := range all {
			x.p.stop()
		}
	}()
	start := func() (*replica, error) {
		addr, err := freeAddr()
		if err != nil {
			return nil, err
		}
		pprofAddr, err := freeAddr()
		if err != nil {
			return nil, err
		}
		x := &replica{args: append(replicaArgs(base, addr, o.shards), "--pprof-addr", pprofAddr), addr: addr, pprof: pprofAddr}
		if x.p, err = startAutox(ctx, b.autox, x.args); err != nil {
			return nil, err
		}
		all = append(all, x)
		if err := x.p.waitFor(ctx, time.Minute, func(l line) bool {
			x.id = l.Identity
			return l.Identity != ""
		}); err != nil {
			return nil, fmt.Errorf("replica %d: no election identity logged: %w", len(all), err)
		}
		return x, nil
	}

	note("replicas: %d replicas with --shards %d, cold convergence of %d releases", o.replicas, o.shards, b.total)
	t0 := time.Now()
	live := make([]*replica, 0, o.replicas)
	for i := 0; i < o.replicas; i++ {
		x, err := start()
		if err != nil {
			return err
		}
		live = append(live, x)
	}
	if err := poll(ctx, 30*time.Minute, func() (bool, error) {
		n := 0
		for _, x := range live {
			n += x.p.count("release install")
		}
		return n >= b.total, nil
	}); err != nil {
		return fmt.Errorf("replicas: cold convergence: %w", err)
	}
	rr.Converge = time.Since(t0)
	for _, x := range live {
		c, err := scrapeRequests(x.addr)
		if err != nil {
			return err
		}
		rr.Requests = append(rr.Requests, c.total())
		if rr.ByKind == nil {
			rr.ByKind = requestCounts{}
		}
		for k, n := range c {
			rr.ByKind[k] += n
		}
		rr.RSS = append(rr.RSS, x.p.peakRSS())
	}
	if rr.Held, err = b.settle(ctx, live, 3*time.Minute); err != nil {
		return fmt.Errorf("replicas: after convergence: %w", err)
	}
	b.r.Load["cold"] = loadAvg()
	for _, x := range live {
		x.p.resetPeak()
	}
	note("replicas: two quiet --resync periods (%s each)", o.resync)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(2 * o.resync):
	}
	for _, x := range live {
		rr.QuietRSS = append(rr.QuietRSS, x.p.peakRSS())
		h, err := liveHeap(x.pprof)
		if err != nil {
			return fmt.Errorf("replicas: heap of %s: %w", x.id, err)
		}
		rr.LiveHeap = append(rr.LiveHeap, h)
	}
	before, err := readRecords(ctx, b.cluster.Client, "bench")
	if err != nil {
		return err
	}
	converged := time.Now()

	for k := 0; k < o.kills; k++ {
		holders, err := readHolders(ctx, b.cluster.Client, o.shards)
		if err != nil {
			return err
		}
		j := victim(holders, ids(live), k)
		if j < 0 {
			return errors.New("replicas: no replica holds a shard")
		}
		x := live[j]
		var shards []int
		for s, h := range holders {
			if h == x.id {
				shards = append(shards, s)
			}
		}
		note("replicas: kill %d: SIGKILL of replica %s holding shards %v", k+1, x.id, shards)
		killed := time.Now()
		x.p.kill()
		live = append(live[:j:j], live[j+1:]...)
		held, passed, err := b.takeover(ctx, live, shards, killed, 5*time.Minute)
		if err != nil {
			return fmt.Errorf("replicas: kill %d: %w", k+1, err)
		}
		rr.HeldAgain = append(rr.HeldAgain, held...)
		rr.Reconciled = append(rr.Reconciled, passed...)
		note("replicas: kill %d: restart", k+1)
		restarted := time.Now()
		nx, err := start()
		if err != nil {
			return err
		}
		live = append(live, nx)
		sp, err := b.settle(ctx, live, 5*time.Minute)
		if err != nil {
			return fmt.Errorf("replicas: restart %d: %w", k+1, err)
		}
		rr.RestartSettle = append(rr.RestartSettle, time.Since(restarted))
		rr.RestartSpread = append(rr.RestartSpread, sp)
	}
	b.r.Load["kills"] = loadAvg()

	holders, err := readHolders(ctx, b.cluster.Client, o.shards)
	if err != nil {
		return err
	}
	rr.JoinBefore = spreadOf(holders, ids(live))
	note("replicas: a replica joins (spread %s)", rr.JoinBefore)
	joined := time.Now()
	nx, err := start()
	if err != nil {
		return err
	}
	live = append(live, nx)
	if fairShare(o.shards, len(live)) < fairShare(o.shards, len(live)-1) {
		if err := poll(ctx, 5*time.Minute, func() (bool, error) {
			h, err := readHolders(ctx, b.cluster.Client, o.shards)
			sp := spreadOf(h, ids(live))
			return err == nil && sp.settled() && sp.Held[len(live)-1] > 0, err
		}); err != nil {
			return fmt.Errorf("replicas: join: %w", err)
		}
	} else {
		note("replicas: the fair share stays %d: nothing to hand over", fairShare(o.shards, len(live)))
	}
	rr.JoinSettle = time.Since(joined)
	if holders, err = readHolders(ctx, b.cluster.Client, o.shards); err != nil {
		return err
	}
	rr.JoinAfter = spreadOf(holders, ids(live))
	for s, h := range holders {
		if h != nx.id {
			continue
		}
		at, err := firstPass(ctx, nx.p, s, joined, 5*time.Minute)
		if err != nil {
			return fmt.Errorf("replicas: join: shard %d: %w", s, err)
		}
		rr.JoinReconciled = append(rr.JoinReconciled, at.Sub(joined))
	}
	b.r.Load["join"] = loadAvg()

	after, err := readRecords(ctx, b.cluster.Client, "bench")
	if err != nil {
		return err
	}
	rr.RecordWrites = changedRecords(before, after)
	for _, x := range all {
		rr.HelmWrites += x.p.writesSince(converged)
	}
	fmt.Print(b.r.replicaTable(o))
	return b.r.save(o.out)
}

// replicaArgs are base's arguments for a replica: leader election on,
// --shards, the Leases in leaseNamespace, its own metrics address.
func replicaArgs(base []string, addr string, shards int) []string {
	out := make([]string, 0, len(base)+6)
	for i := 0; i < len(base); i++ {
		switch {
		case base[i] == "--leader-elect=false":
			continue
		case base[i] == "--http-addr" && i+1 < len(base):
			out = append(out, "--http-addr", addr)
			i++
			continue
		}
		out = append(out, base[i])
	}
	return append(out, "--shards", strconv.Itoa(shards), "--leader-election-namespace", leaseNamespace)
}

func ids(rs []*replica) []string {
	out := make([]string, len(rs))
	for i, x := range rs {
		out[i] = x.id
	}
	return out
}

// victim picks the replica to kill the k-th time: the live replicas that
// hold shards in turn; -1 if none does.
func victim(holders, live []string, k int) int {
	sp := spreadOf(holders, live)
	var holding []int
	for j, n := range sp.Held {
		if n > 0 {
			holding = append(holding, j)
		}
	}
	if len(holding) == 0 {
		return -1
	}
	return holding[k%len(holding)]
}

// settle waits until the live replicas hold every shard and none more than
// its fair share, and returns that spread.
func (b *run) settle(ctx context.Context, live []*replica, timeout time.Duration) (spread, error) {
	var sp spread
	err := poll(ctx, timeout, func() (bool, error) {
		h, err := readHolders(ctx, b.cluster.Client, b.o.shards)
		if err != nil {
			return false, err
		}
		sp = spreadOf(h, ids(live))
		return sp.settled(), nil
	})
	if err != nil {
		err = fmt.Errorf("shards not settled (%s): %w", sp, err)
	}
	return sp, err
}

// takeover waits until every one of shards is held by a live replica and
// has had a complete pass there, and returns the times from killed.
func (b *run) takeover(ctx context.Context, live []*replica, shards []int, killed time.Time, timeout time.Duration) (held, passed []time.Duration, err error) {
	heldAt := map[int]time.Time{}
	passAt := map[int]time.Time{}
	err = poll(ctx, timeout, func() (bool, error) {
		h, err := readHolders(ctx, b.cluster.Client, b.o.shards)
		if err != nil {
			return false, err
		}
		for _, s := range shards {
			j := indexOf(ids(live), h[s])
			if j < 0 {
				continue
			}
			if heldAt[s].IsZero() {
				heldAt[s] = time.Now()
			}
			if at := live[j].p.passOf(s, killed); passAt[s].IsZero() && !at.IsZero() {
				passAt[s] = at
			}
		}
		return len(passAt) == len(shards), nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("shards %v not taken over (held: %d, passed: %d): %w", shards, len(heldAt), len(passAt), err)
	}
	for _, s := range shards {
		// A pass seen before the Lease poll saw the holder bounds the
		// holding time too.
		held = append(held, minTime(heldAt[s], passAt[s]).Sub(killed))
		passed = append(passed, passAt[s].Sub(killed))
	}
	return held, passed, nil
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// firstPass waits for p's first complete pass of shard s after t.
func firstPass(ctx context.Context, p *process, s int, t time.Time, timeout time.Duration) (time.Time, error) {
	var at time.Time
	err := poll(ctx, timeout, func() (bool, error) {
		at = p.passOf(s, t)
		return !at.IsZero(), nil
	})
	return at, err
}

// passOf is when p logged the first complete pass of shard s after t, or
// the zero time.
func (p *process) passOf(s int, t time.Time) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, l := range p.lines {
		if l.Message == "pass complete" && l.Shard != nil && *l.Shard == s && l.at.After(t) {
			return l.at
		}
	}
	return time.Time{}
}

// poll calls cond every 100ms until it holds, fails, or timeout passes.
func poll(ctx context.Context, timeout time.Duration, cond func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, err := cond()
		if err != nil || ok {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %s", timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// replicaTable is the replicas run's markdown table.
func (r results) replicaTable(o options) string {
	rr := r.Replicas
	var b strings.Builder
	fmt.Fprintf(&b, "\n### %d replicas × --shards %d: %d triggers × %d releases (%d releases) of chart %s, %d kills\n\n",
		rr.Replicas, rr.Shards, r.Triggers, releasesPerTrigger, r.Releases, o.chart, o.kills)
	b.WriteString(machine(r.Date))
	b.WriteString("| measure | value | goal |\n|---|---|---|\n")
	var reqs int64
	for _, n := range rr.Requests {
		reqs += n
	}
	fmt.Fprintf(&b, "| cold convergence, nothing → all deployed (replicas started together) | %s | |\n", secs(rr.Converge))
	fmt.Fprintf(&b, "| API requests per release installed, all replicas | %.2f | |\n", float64(reqs)/float64(r.Releases))
	for _, k := range rr.ByKind.sorted() {
		fmt.Fprintf(&b, "| … %s %s | %.2f | |\n", k.verb, k.resource, float64(rr.ByKind[k])/float64(r.Releases))
	}
	fmt.Fprintf(&b, "| API requests per replica at convergence | %s | |\n", joinInts(rr.Requests, func(n int64) string { return strconv.FormatInt(n, 10) }))
	fmt.Fprintf(&b, "| peak RSS per replica, cold convergence | %s | |\n", joinInts(rr.RSS, mib))
	fmt.Fprintf(&b, "| peak RSS per replica, two quiet --resync periods after convergence | %s | |\n", joinInts(rr.QuietRSS, mib))
	fmt.Fprintf(&b, "| heap in use per replica right after a collection, then | %s | falls with replicas |\n", joinInts(rr.LiveHeap, mib))
	fmt.Fprintf(&b, "| shards per replica after convergence | %s | ⌈%d / %d⌉ = %d at most |\n", rr.Held, rr.Shards, rr.Replicas, fairShare(rr.Shards, rr.Replicas))
	if len(rr.HeldAgain) > 0 {
		fmt.Fprintf(&b, "| kill -9 → a killed replica's shard held again: p50 / p99 (%d shards over %d kills) | %s / %s | within the Lease duration (+ retry period) |\n",
			len(rr.HeldAgain), o.kills, secs(percentile(rr.HeldAgain, 0.5)), secs(percentile(rr.HeldAgain, 0.99)))
		fmt.Fprintf(&b, "| kill -9 → the shard's first complete pass under its new holder (its releases reconciled): p50 / p99 | %s / %s | |\n",
			secs(percentile(rr.Reconciled, 0.5)), secs(percentile(rr.Reconciled, 0.99)))
		var settle, spreads []string
		for i := range rr.RestartSettle {
			settle = append(settle, secs(rr.RestartSettle[i]))
			spreads = append(spreads, rr.RestartSpread[i].String())
		}
		fmt.Fprintf(&b, "| restart of the killed replica → shards spread again: time; spread | %s; %s | |\n", strings.Join(settle, ", "), strings.Join(spreads, ", "))
	}
	fmt.Fprintf(&b, "| a replica joins: spread before → after; time until settled | %s → %s; %s | |\n", rr.JoinBefore, rr.JoinAfter, secs(rr.JoinSettle))
	if len(rr.JoinReconciled) > 0 {
		fmt.Fprintf(&b, "| join → first complete pass of each shard the new replica took: p50 / max | %s / %s | |\n",
			secs(percentile(rr.JoinReconciled, 0.5)), secs(percentile(rr.JoinReconciled, 1)))
	}
	fmt.Fprintf(&b, "| release record writes / Helm operations logged, convergence → end (kills, restarts, join) | %s / %d | 0 |\n", rr.RecordWrites, rr.HelmWrites)
	fmt.Fprintf(&b, "| load average (1 min) at the end of: %s | %s | |\n", strings.Join(phaseOrder(r.Load), " / "), r.loads())
	return b.String()
}

func joinInts(v []int64, f func(int64) string) string {
	parts := make([]string, len(v))
	for i, n := range v {
		parts[i] = f(n)
	}
	return strings.Join(parts, " / ")
}

// liveHeap is the heap in use of the autox serving profiles at addr right
// after a collection it is asked to run (the heap profile's gc=1), from
// the runtime's statistics at the end of the profile's text form.
func liveHeap(addr string) (int64, error) {
	resp, err := http.Get("http://" + addr + "/debug/pprof/heap?gc=1&debug=1")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, "# HeapAlloc = "); ok {
			return strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	}
	return 0, errors.New("no HeapAlloc in the heap profile")
}
