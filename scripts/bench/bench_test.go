package main

import (
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 100; i++ {
		d = append(d, time.Duration(101-i)*time.Millisecond) // unsorted
	}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 51 * time.Millisecond}, {0.99, 99 * time.Millisecond}, {1, 100 * time.Millisecond}, {0, time.Millisecond}} {
		if got := percentile(d, c.q); got != c.want {
			t.Errorf("percentile(1..100ms, %v) = %v, want %v", c.q, got, c.want)
		}
	}
	if got := percentile(nil, 0.5); got != 0 {
		t.Errorf("percentile(nil) = %v", got)
	}
	if d[0] != 100*time.Millisecond {
		t.Error("percentile sorted its input in place")
	}
}

func TestSpread(t *testing.T) {
	live := []string{"a", "b", "c"}
	for _, c := range []struct {
		name    string
		holders []string
		want    string
		settled bool
	}{
		{"even", []string{"a", "b", "c", "a", "b", "c"}, "2/2/2", true},
		{"uneven within the fair share", []string{"a", "b", "c", "a", "b"}, "2/2/1", true},
		{"one over its fair share", []string{"a", "a", "a", "b", "b", "c"}, "3/2/1", false},
		{"a dead holder", []string{"a", "b", "dead", "a", "b", "c"}, "2/2/1 (1 unheld)", false},
		{"not held", []string{"a", "", "c", "a", "b", "c"}, "2/1/2 (1 unheld)", false},
		{"a replica without shards", []string{"a", "a", "b", "b", "b", "a"}, "3/3/0", false},
	} {
		s := spreadOf(c.holders, live)
		if s.String() != c.want || s.settled() != c.settled {
			t.Errorf("%s: spread %s settled %v, want %s %v", c.name, s, s.settled(), c.want, c.settled)
		}
	}
}

func TestVictim(t *testing.T) {
	live := []string{"a", "b", "c"}
	holders := []string{"b", "b", "c", "c", "b", "c"} // a holds nothing
	for k, want := range []int{1, 2, 1} {
		if got := victim(holders, live, k); got != want {
			t.Errorf("kill %d: victim %d, want %d", k, got, want)
		}
	}
	if got := victim([]string{"", "dead"}, live, 0); got != -1 {
		t.Errorf("victim with no live holder = %d", got)
	}
}

func TestChangedRecords(t *testing.T) {
	before := records{"sh.helm.release.v1.a.v1": "10", "sh.helm.release.v1.b.v1": "11", "sh.helm.release.v1.c.v1": "12"}
	after := records{
		"sh.helm.release.v1.a.v1": "10", // untouched
		"sh.helm.release.v1.b.v1": "20", // superseded: status updated
		"sh.helm.release.v1.b.v2": "21", // a new revision
		// c uninstalled
	}
	got := changedRecords(before, after)
	if got != (recordChanges{Created: 1, Updated: 1, Deleted: 1}) || got.total() != 3 {
		t.Errorf("changedRecords = %s", got)
	}
	if got := changedRecords(before, before); got.total() != 0 {
		t.Errorf("no change: %s", got)
	}
}

func TestReplicaArgs(t *testing.T) {
	base := []string{"run", "--config", "c.yaml", "--leader-elect=false", "--http-addr", "127.0.0.1:1", "--resync", "20s"}
	got := replicaArgs(base, "127.0.0.1:2", 6)
	want := []string{"run", "--config", "c.yaml", "--http-addr", "127.0.0.1:2", "--resync", "20s", "--shards", "6", "--leader-election-namespace", leaseNamespace}
	if len(got) != len(want) {
		t.Fatalf("replicaArgs = %q", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("replicaArgs = %q, want %q", got, want)
		}
	}
}

func TestConfigDrift(t *testing.T) {
	if got := driftLine(""); got != "" {
		t.Errorf("drift off: %q", got)
	}
	if got := configYAML(1, "/c", "correct"); got != "namespaces: [bench]\nspecs:\n  t0000:\n"+
		"    trigger: {group: apps, version: v1, resource: deployments, name: t0000, namespace: bench}\n"+
		"    drift: {mode: correct}\n    releaseSpecs:\n      r0: {chart: {path: /c}, values: {index: 0}}\n      r1: {chart: {path: /c}, values: {index: 1}}\n" {
		t.Errorf("configYAML:\n%s", got)
	}
}
