package e2e

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/autox-dev/autox/internal/format"
	"github.com/autox-dev/autox/internal/leader"
	"github.com/autox-dev/autox/internal/shard"
	"github.com/autox-dev/autox/internal/testenv"
)

// TestShardWritesOnlyUnderTheirLease runs three replicas with --shards 6 and
// freezes (SIGSTOP) one that holds shards just after its triggers changed,
// past its Leases' duration, while a spec leaves the config; the others
// take its shards over and converge, and the frozen one is thawed and
// rejoins. Then the API server is out of every replica's reach past the
// Leases' duration while a trigger changes. Judged by the API server's audit log, as an operator could: every
// write of a release (its record, its objects, its trigger's Events) was
// made by the replica that held the release's shard Lease, from the answer
// to its taking the Lease to the Lease's expiry, with no other holder in
// between; any other write of autox (the managed-namespaces and attempts
// records) by a replica holding some shard. Replicas are told apart by the
// identity in their user agent. The releases nobody changed are never
// written.
func TestShardWritesOnlyUnderTheirLease(t *testing.T) {
	e := newEnv(t)
	cfg := e.shardedScene()
	const shards = 6
	proxy, kubeconfig := e.proxied()
	var ps []*testenv.Process
	var ids []string
	for i := 0; i < 3; i++ {
		// An upgrade the frozen replica left pending is a lock for
		// --helm-timeout + 30s (design §5): 2s keeps the wait short.
		p := e.run(cfg, "--shards", strconv.Itoa(shards), "--kubeconfig", kubeconfig, "--helm-timeout", "2s")
		ps = append(ps, p)
		ids = append(ids, e.identityOf(p))
	}
	releases := []string{"w0-hello", "w1-hello", "w2-hello", "w3-hello"}
	for i := 0; i < 6; i++ {
		releases = append(releases, fmt.Sprintf("s%d-job", i))
	}
	for _, r := range releases {
		e.WaitRelease(r, "deployed", deployedAt(1))
	}
	holders := e.waitShardsHeld(shards, ids)
	t.Logf("shard holders: %v", holders)
	stable := []string{"w3-hello", "s5-job"}
	before := e.recordVersions()

	// Freeze the holder of w0's shard right after the triggers changed:
	// operations of its shards may be in flight when it stops.
	n := shard.Count(shards)
	victim := indexOf(ids, holders[n.OfSpec("w0")])
	changed := []string{"w0", "w1", "s0", "s1", "s2", "s3", "s4"}
	for _, d := range changed {
		labels := version("2.0.0")
		if strings.HasPrefix(d, "s") {
			labels = selected("2.0.0")
		}
		e.Relabel(d, labels)
	}
	time.Sleep(50 * time.Millisecond)
	ps[victim].Signal(syscall.SIGSTOP)
	thawed := false
	defer func() {
		if !thawed {
			ps[victim].Signal(syscall.SIGCONT)
		}
	}()
	// w2 leaves the config meanwhile: its release is removed.
	e.WriteConfig(shardedConfigWithoutW2)
	others := append(append([]string{}, ids[:victim]...), ids[victim+1:]...)
	t.Logf("froze %s; after the takeover: %v", ids[victim], e.waitShardsHeld(shards, others))
	upgraded := func(r *format.Release) bool { return r != nil && r.Status == "deployed" && labelOf(r) == "2.0.0" }
	for _, d := range changed {
		e.WaitRelease(releaseOfTrigger(d), "upgraded by the other replicas", upgraded)
	}
	e.WaitRelease("w2-hello", "removed with its spec", gone)

	// Thawed, the replica finds its terms ended and rejoins.
	ps[victim].Signal(syscall.SIGCONT)
	thawed = true
	offset := len(ps[victim].Output())
	t.Logf("after the thaw: %v", e.waitShardsHeld(shards, ids))
	e.waitPasses(ps[victim], offset, 2)
	for _, d := range changed {
		rel := releaseOfTrigger(d)
		if r := e.Release(rel); !upgraded(r) {
			t.Errorf("%s after the thaw: %+v", rel, r)
		}
	}

	// The API server out of reach of every replica past the Leases'
	// duration while a trigger changes: all terms end; once it is back the
	// replicas share the shards again and the change is made.
	proxy.Pause()
	e.Relabel("w1", version("3.0.0"))
	time.Sleep(6 * time.Second)
	if err := proxy.Resume(); err != nil {
		t.Fatal(err)
	}
	e.WaitRelease("w1-hello", "upgraded after the outage", func(r *format.Release) bool {
		return r != nil && r.Status == "deployed" && labelOf(r) == "3.0.0"
	})
	t.Logf("after the outage: %v", e.waitShardsHeld(shards, ids))
	e.checkUnwritten(stable, before)
	e.stopAll(ps)

	e.checkWritesUnderLeases(shards, ids)
}

// checkUnwritten checks that no record of the stable releases changed
// since before (recordVersions).
func (e *env) checkUnwritten(stable []string, before map[string]string) {
	e.t.Helper()
	after := e.recordVersions()
	for _, r := range stable {
		for name, v := range before {
			if strings.HasPrefix(name, "sh.helm.release.v1."+r+".v") && after[name] != v {
				e.t.Errorf("stable release %s written: %s %s → %s", r, name, v, after[name])
			}
		}
	}
}

// stopAll stops every process with SIGTERM; each must exit 0.
func (e *env) stopAll(ps []*testenv.Process) {
	e.t.Helper()
	for _, p := range ps {
		if code := p.Stop(patience); code != 0 {
			e.t.Errorf("stop: exit %d\n%s", code, tail(p.Output()))
		}
	}
}

// checkWritesUnderLeases reads the audit log of the test's namespace and
// checks that every write of a release of shardedConfig (its record, its
// objects, its trigger's Events) was made by the replica (one of ids) that
// held the release's shard Lease from the write's receipt to its answer, and
// any other write of autox by a replica holding some shard Lease then.
func (e *env) checkWritesUnderLeases(shards int, ids []string) (checked []testenv.Write) {
	t := e.t
	t.Helper()
	n := shard.Count(shards)
	writes := e.Cluster.WritesSoFar(t, e.NS)
	leases := leaseHistory(t, writes)
	for _, w := range writes {
		id, ok := autoxIdentity(w.UserAgent)
		if !ok || w.Resource == "leases" {
			continue
		}
		if indexOf(ids, id) < 0 {
			t.Errorf("a write by an unknown identity %q: %+v", id, w)
			continue
		}
		if s, ok := shardOfWrite(n, e.NS, w); ok {
			if why := leases.heldThrough(s, id, w.Received, w.Completed); why != "" {
				t.Errorf("%s %s %s/%s by %s (%s → %s), shard %d: %s", w.Verb, w.Resource, w.Namespace, w.Name, id,
					w.Received.Format(time.StampMicro), w.Completed.Format(time.StampMicro), s, why)
			}
			checked = append(checked, w)
			continue
		}
		held := false
		for s := 0; s < shards && !held; s++ {
			held = leases.heldThrough(s, id, w.Received, w.Completed) == ""
		}
		if !held {
			t.Errorf("%s %s %s/%s by %s, holding no shard Lease", w.Verb, w.Resource, w.Namespace, w.Name, id)
		}
	}
	if len(checked) == 0 {
		t.Fatal("no release write in the audit log carried an autox identity")
	}
	t.Logf("%d release writes checked against the shard Leases", len(checked))
	return checked
}

// releaseOfTrigger is the release shardedConfig makes for Deployment d:
// wN's named spec's hello, sN's object's job.
func releaseOfTrigger(d string) string {
	if strings.HasPrefix(d, "s") {
		return d + "-job"
	}
	return d + "-hello"
}

func indexOf(ids []string, id string) int {
	for i, x := range ids {
		if x == id {
			return i
		}
	}
	return -1
}

var agentIdentity = regexp.MustCompile(`^autox/\S+ \(([^)]+)\)$`)

// autoxIdentity is the identity in an autox run's user agent.
func autoxIdentity(agent string) (string, bool) {
	m := agentIdentity.FindStringSubmatch(agent)
	if m == nil {
		return "", false
	}
	return m[1], true
}

var (
	recordName  = regexp.MustCompile(`^sh\.helm\.release\.v1\.(.+)\.v\d+$`)
	releaseName = regexp.MustCompile(`^([ws]\d)-(hello|job)$`)
	triggerName = regexp.MustCompile(`^[ws]\d$`)
)

// shardOfWrite is the shard of the release (of shardedConfig) a write is
// of: its record, one of its objects (named as the release), or an Event
// of its trigger.
func shardOfWrite(n shard.Count, ns string, w testenv.Write) (int, bool) {
	name := w.Name
	if m := recordName.FindStringSubmatch(name); m != nil && w.Resource == "secrets" {
		name = m[1]
	}
	trigger := ""
	if m := releaseName.FindStringSubmatch(name); m != nil {
		trigger = m[1]
	} else if obj, _, ok := strings.Cut(name, "."); ok && w.Resource == "events" && triggerName.MatchString(obj) {
		trigger = obj
	}
	switch {
	case trigger == "":
		return 0, false
	case trigger[0] == 'w':
		return n.OfSpec(trigger), true
	default:
		return n.OfObject(format.Object{Namespace: ns, Name: trigger}), true
	}
}

// leaseWrite is one answered write of a shard Lease, as its body had it.
type leaseWrite struct {
	at      time.Time // answered
	holder  string
	expires time.Time // renewTime + leaseDurationSeconds
}

// leaseHistories are the writes of each shard Lease, in the order answered.
type leaseHistories map[int][]leaseWrite

func leaseHistory(t *testing.T, writes []testenv.Write) leaseHistories {
	t.Helper()
	h := leaseHistories{}
	for _, w := range writes {
		if w.Resource != "leases" || w.Code/100 != 2 || !strings.HasPrefix(w.Name, "autox-shard-") {
			continue
		}
		i, err := strconv.Atoi(strings.TrimPrefix(w.Name, "autox-shard-"))
		if err != nil || leader.ShardLeaseName("autox", i) != w.Name {
			continue
		}
		var body struct {
			Spec struct {
				Holder   *string    `json:"holderIdentity"`
				Renew    *time.Time `json:"renewTime"`
				Duration *int       `json:"leaseDurationSeconds"`
			} `json:"spec"`
		}
		if err := json.Unmarshal(w.Body, &body); err != nil {
			t.Fatalf("the audit log's body of a write of Lease %s: %v", w.Name, err)
		}
		lw := leaseWrite{at: w.Completed}
		if s := body.Spec; s.Holder != nil && s.Renew != nil && s.Duration != nil {
			lw.holder, lw.expires = *s.Holder, s.Renew.Add(time.Duration(*s.Duration)*time.Second)
		}
		h[i] = append(h[i], lw)
	}
	for i := range h {
		sort.SliceStable(h[i], func(a, b int) bool { return h[i][a].at.Before(h[i][b].at) })
	}
	return h
}

// heldThrough says why id did not hold shard s's Lease from received to
// completed ("" if it did): the last write of the Lease answered before
// received names id and has not expired at completed, and no write answered
// in between names another holder.
func (h leaseHistories) heldThrough(s int, id string, received, completed time.Time) string {
	var last *leaseWrite
	for i := range h[s] {
		lw := &h[s][i]
		if lw.at.After(received) {
			if !lw.at.After(completed) && lw.holder != id {
				return fmt.Sprintf("%q wrote the Lease at %s, during the write", lw.holder, lw.at.Format(time.StampMicro))
			}
			break
		}
		last = lw
	}
	switch {
	case last == nil:
		return "nobody had written the Lease yet"
	case last.holder != id:
		return fmt.Sprintf("the Lease was %q's (written at %s)", last.holder, last.at.Format(time.StampMicro))
	case last.expires.Before(completed):
		return fmt.Sprintf("the Lease expired at %s", last.expires.Format(time.StampMicro))
	}
	return ""
}
