package e2e

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/autox-dev/autox/internal/leader"
	"github.com/autox-dev/autox/internal/testenv"
)

// shardedConfig has four named specs, w0..w3, and one selector spec, exp,
// over the Deployments labelled autox.dev/experiment=enabled: the named
// specs and the selector's objects spread over the shards.
const shardedConfig = `
namespaces: [{{.NS}}]
specs:
  w0:
    trigger: {group: apps, version: v1, resource: deployments, name: w0, namespace: {{.NS}}}
    releaseSpecs: {hello: {chart: {path: {{.Charts}}/hello}}}
  w1:
    trigger: {group: apps, version: v1, resource: deployments, name: w1, namespace: {{.NS}}}
    releaseSpecs: {hello: {chart: {path: {{.Charts}}/hello}}}
  w2:
    trigger: {group: apps, version: v1, resource: deployments, name: w2, namespace: {{.NS}}}
    releaseSpecs: {hello: {chart: {path: {{.Charts}}/hello}}}
  w3:
    trigger: {group: apps, version: v1, resource: deployments, name: w3, namespace: {{.NS}}}
    releaseSpecs: {hello: {chart: {path: {{.Charts}}/hello}}}
  exp:
    trigger:
      group: apps
      version: v1
      resource: deployments
      selector: {matchLabels: {autox.dev/experiment: enabled}}
    releaseSpecs:
      job: {chart: {path: {{.Charts}}/hello}}
`

// shardedConfigWithoutW2 is shardedConfig after spec w2 left it.
var shardedConfigWithoutW2 = strings.Replace(shardedConfig, `  w2:
    trigger: {group: apps, version: v1, resource: deployments, name: w2, namespace: {{.NS}}}
    releaseSpecs: {hello: {chart: {path: {{.Charts}}/hello}}}
`, "", 1)

var identityField = regexp.MustCompile(`"identity":"([^"]+)"`)

// identityOf is the leader identity p logs.
func (e *env) identityOf(p *testenv.Process) string {
	e.t.Helper()
	var id string
	testenv.Eventually(e.t, patience, "the identity logged", func() (bool, error) {
		m := identityField.FindStringSubmatch(p.Output())
		if m != nil {
			id = m[1]
		}
		return m != nil, nil
	})
	return id
}

// shardHolders reads who holds each shard Lease ("" for nobody or not yet).
func (e *env) shardHolders(n int) []string {
	e.t.Helper()
	out := make([]string, n)
	for i := range out {
		l, err := e.Cluster.Client.CoordinationV1().Leases(e.NS).Get(context.Background(), leader.ShardLeaseName("autox", i), metav1.GetOptions{})
		if err != nil {
			continue
		}
		if h := l.Spec.HolderIdentity; h != nil {
			out[i] = *h
		}
	}
	return out
}

// recordVersions are the resourceVersions of every Helm release record of
// the namespace: any Helm write changes them (a new revision, or an older
// revision marked superseded).
func (e *env) recordVersions() map[string]string {
	e.t.Helper()
	list, err := e.Cluster.Client.CoreV1().Secrets(e.NS).List(context.Background(), metav1.ListOptions{LabelSelector: "owner=helm"})
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[string]string{}
	for _, s := range list.Items {
		out[s.Name] = s.ResourceVersion
	}
	return out
}

// waitShardsHeld waits until every shard is held by one of ids, none holds
// more than its fair share, and returns the holders.
func (e *env) waitShardsHeld(n int, ids []string) []string {
	e.t.Helper()
	var holders []string
	fair := (n + len(ids) - 1) / len(ids)
	testenv.Eventually(e.t, patience, fmt.Sprintf("%d shards held by %d replicas", n, len(ids)), func() (bool, error) {
		holders = e.shardHolders(n)
		count := map[string]int{}
		for _, h := range holders {
			count[h]++
		}
		for _, h := range holders {
			known := false
			for _, id := range ids {
				known = known || h == id
			}
			if !known || count[h] > fair {
				return false, nil
			}
		}
		return true, nil
	})
	return holders
}

// shardedScene creates the Deployments of shardedConfig (w0..w3, and
// s0..s5 selected), all at version 1.0.0, and writes the config.
func (e *env) shardedScene() string {
	e.t.Helper()
	for i := 0; i < 4; i++ {
		e.Deployment(fmt.Sprintf("w%d", i), version("1.0.0"))
	}
	for i := 0; i < 6; i++ {
		e.Deployment(fmt.Sprintf("s%d", i), selected("1.0.0"))
	}
	return e.WriteConfig(shardedConfig)
}

// TestShardsSpreadAndFailOver runs three replicas with --shards 4: every
// release converges, each shard is held by exactly one live replica and
// none holds more than ⌈4/3⌉; a replica killed with SIGKILL has its shards
// taken over by the others with no Helm write; and a restart with another
// --shards moves releases to their new shards with no Helm write either.
func TestShardsSpreadAndFailOver(t *testing.T) {
	e := newEnv(t)
	cfg := e.shardedScene()
	var ps []*testenv.Process
	var ids []string
	for i := 0; i < 3; i++ {
		p := e.run(cfg, "--shards", "4")
		ps = append(ps, p)
		ids = append(ids, e.identityOf(p))
	}
	var releases []string
	for i := 0; i < 4; i++ {
		releases = append(releases, fmt.Sprintf("w%d-hello", i))
	}
	for i := 0; i < 6; i++ {
		releases = append(releases, fmt.Sprintf("s%d-job", i))
	}
	for _, r := range releases {
		e.WaitRelease(r, "deployed", deployedAt(1))
	}
	holders := e.waitShardsHeld(4, ids)
	t.Logf("shard holders: %v", holders)

	// Settled: the releases are stable, each at revision 1.
	before := e.recordVersions()
	if len(before) != len(releases) {
		t.Fatalf("%d release records, want %d (one revision each): %v", len(before), len(releases), before)
	}

	// kill -9 a replica holding a shard: the others take its shards over.
	victim := -1
	for i, id := range ids {
		if id == holders[0] {
			victim = i
		}
	}
	ps[victim].Kill()
	alive := append(append([]string{}, ids[:victim]...), ids[victim+1:]...)
	survivors := append(append([]*testenv.Process{}, ps[:victim]...), ps[victim+1:]...)
	offsets := make([]int, len(survivors))
	for i, p := range survivors {
		offsets[i] = len(p.Output())
	}
	holders = e.waitShardsHeld(4, alive)
	t.Logf("after the kill of %s: %v", ids[victim], holders)
	// The taken-over shards' controllers have passed over their releases.
	for i, p := range survivors {
		e.waitPasses(p, offsets[i], 4)
	}
	if after := e.recordVersions(); !equalVersions(before, after) {
		t.Errorf("the takeover wrote release records:\nbefore %v\nafter  %v", before, after)
	}

	// Another shard count: the releases move to their new shards, untouched.
	for _, p := range survivors {
		if code := p.Stop(patience); code != 0 {
			t.Fatalf("stop: exit %d\n%s", code, tail(p.Output()))
		}
	}
	var ids3 []string
	var ps3 []*testenv.Process
	for i := 0; i < 2; i++ {
		p := e.run(cfg, "--shards", "3")
		ps3 = append(ps3, p)
		ids3 = append(ids3, e.identityOf(p))
	}
	e.waitShardsHeld(3, ids3)
	for _, p := range ps3 {
		e.waitPasses(p, 0, 6)
	}
	if after := e.recordVersions(); !equalVersions(before, after) {
		t.Errorf("the change of --shards wrote release records:\nbefore %v\nafter  %v", before, after)
	}
	for _, p := range ps3 {
		if code := p.Stop(patience); code != 0 {
			t.Errorf("stop: exit %d", code)
		}
		if out := p.Output(); strings.Contains(out, "write refused") {
			t.Errorf("a fenced write:\n%s", tail(out))
		}
	}
}

func equalVersions(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// tail is the end of a process's output, for a failure message.
func tail(s string) string {
	if len(s) > 4000 {
		return s[len(s)-4000:]
	}
	return s
}
