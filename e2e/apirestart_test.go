package e2e

import (
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/autox-dev/autox/internal/format"
	"github.com/autox-dev/autox/internal/testenv"
)

// lostShardLine is what a replica logs when a shard term ends for a Lease
// it could not renew; the line has the shard's index.
const lostShardLine = "lost a shard Lease"

var lostShard = regexp.MustCompile(`"shard":(\d+)[^\n]*` + lostShardLine + `|` + lostShardLine + `[^\n]*"shard":(\d+)`)

// TestShardsThroughAnAPIServerRestart runs three replicas with --shards 6
// on a control plane of its own and restarts its kube-apiserver — the
// process stopped and started again, not a proxy in between — while two
// triggers change and a spec leaves the config, and leaves it down past the
// Leases' duration: every shard term ends, watches and Lease renewals fail,
// and the restarted server's watch caches start anew from etcd. Once it is
// back the replicas share the shards again and make the changes, and a
// change after the restart is seen too. The releases nobody changed are
// never written, and the audit log shows every write of a release made by
// the holder of its shard's Lease at that moment (checkWritesUnderLeases).
func TestShardsThroughAnAPIServerRestart(t *testing.T) {
	t.Parallel() // a control plane of its own
	c, err := testenv.StartAudited()
	if err != nil {
		t.Fatal(err)
	}
	// Registered first, so run after the replicas' stops.
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("stop the control plane: %v", err)
		}
	})
	e := newEnvOn(t, c)
	cfg := e.shardedScene()
	const shards = 6
	var ps []*testenv.Process
	var ids []string
	for i := 0; i < 3; i++ {
		// An operation cut by the restart leaves its release pending: a
		// lock for --helm-timeout + 30s (design §5); 2s keeps it short.
		p := e.run(cfg, "--shards", strconv.Itoa(shards), "--helm-timeout", "2s")
		ps = append(ps, p)
		ids = append(ids, e.identityOf(p))
	}
	for _, r := range []string{"w0-hello", "w1-hello", "w2-hello", "w3-hello", "s0-job", "s1-job", "s5-job"} {
		e.WaitRelease(r, "deployed", deployedAt(1))
	}
	held := e.waitShardsHeld(shards, ids)
	t.Logf("shard holders: %v", held)
	stable := []string{"w3-hello", "s5-job"}
	before := e.recordVersions()
	offsets := make([]int, len(ps))
	for i, p := range ps {
		offsets[i] = len(p.Output())
	}

	// Two triggers change and the API server goes at once: their
	// operations may be in flight when it stops.
	e.Relabel("w0", version("2.0.0"))
	e.Relabel("s0", selected("2.0.0"))
	restarted, done := make(chan error, 1), make(chan struct{})
	// A test that fails meanwhile stops the control plane only after.
	t.Cleanup(func() { <-done })
	go func() {
		defer close(done)
		restarted <- c.RestartAPIServer(2*time.Second, 6*time.Second)
	}()
	// w2 leaves the config while the API server is down.
	time.Sleep(time.Second)
	e.WriteConfig(shardedConfigWithoutW2)
	if err := <-restarted; err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	upgraded := func(to string) func(*format.Release) bool {
		return func(r *format.Release) bool { return r != nil && r.Status == "deployed" && labelOf(r) == to }
	}
	e.WaitRelease("w0-hello", "upgraded after the restart", upgraded("2.0.0"))
	e.WaitRelease("s0-job", "upgraded after the restart", upgraded("2.0.0"))
	e.WaitRelease("w2-hello", "removed with its spec after the restart", gone)
	t.Logf("after the restart: %v", e.waitShardsHeld(shards, ids))
	// Down past the renew deadline: the term of every shard held before
	// ended by the Lease it could not renew.
	for s, holder := range held {
		i := indexOf(ids, holder)
		lost := false
		for _, m := range lostShard.FindAllStringSubmatch(ps[i].Output()[offsets[i]:], -1) {
			lost = lost || m[1] == strconv.Itoa(s) || m[2] == strconv.Itoa(s)
		}
		if !lost {
			t.Errorf("replica %s kept its term of shard %d through the restart", holder, s)
		}
	}

	// The watches opened on the restarted server carry a change.
	e.Relabel("w1", version("3.0.0"))
	e.WaitRelease("w1-hello", "upgraded after the restart", upgraded("3.0.0"))

	e.checkUnwritten(stable, before)
	e.stopAll(ps)
	since := 0
	for _, w := range e.checkWritesUnderLeases(shards, ids) {
		if w.Received.After(back) {
			since++
		}
	}
	if since == 0 {
		t.Error("no release write after the restart was checked against the shard Leases")
	}
}
