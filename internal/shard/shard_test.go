package shard

import (
	"strings"
	"testing"

	"github.com/autox-dev/autox/internal/format"
)

func TestOneShardHoldsEverything(t *testing.T) {
	n := Count(1)
	for _, s := range []string{"", "a", "web", strings.Repeat("x", 300)} {
		if got := n.OfSpec(s); got != 0 {
			t.Errorf("OfSpec(%q) = %d with one shard", s, got)
		}
	}
	if n.Sharded() {
		t.Error("one shard reports Sharded")
	}
}

// The assignment is pinned: every replica and every later version must put
// a release in the same shard, or a version upgrade would move releases
// between holders mid-operation.
func TestAssignmentIsStable(t *testing.T) {
	n := Count(12)
	cases := []struct {
		got, want int
	}{
		{n.OfSpec("web"), Count(12).OfSpec("web")},
		{n.OfObject(format.Object{Namespace: "team-a", Name: "app"}), n.OfRecord(format.Record{Spec: "s", ObjectNamespace: "team-a", ObjectName: "app"})},
		{n.OfSpec("web"), n.OfRecord(format.Record{Spec: "web"})},
	}
	for i, c := range cases {
		if c.got != c.want {
			t.Errorf("case %d: %d != %d", i, c.got, c.want)
		}
	}
	// FNV-1a 32 of "spec/web" mod 12, computed once and frozen.
	if got := n.OfSpec("web"); got != pinnedWeb {
		t.Errorf("OfSpec(web) with 12 shards = %d, want %d (the assignment changed)", got, pinnedWeb)
	}
}

func TestLongObjectNameByItsLabel(t *testing.T) {
	n := Count(7)
	long := strings.Repeat("a", 80)
	full := format.Object{Namespace: "ns", Name: long}
	rec := format.Record{Spec: "s", ObjectNamespace: "ns", ObjectName: format.ObjectLabel(long)}
	if n.OfObject(full) != n.OfRecord(rec) {
		t.Errorf("the object (%d) and its release (%d) are in different shards", n.OfObject(full), n.OfRecord(rec))
	}
}

func TestSpread(t *testing.T) {
	n := Count(4)
	seen := make([]int, n)
	for i := 0; i < 400; i++ {
		seen[n.OfObject(format.Object{Namespace: "ns", Name: "obj-" + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + itoa(i)})]++
	}
	for s, c := range seen {
		if c < 50 {
			t.Errorf("shard %d got %d of 400 objects: %v", s, c, seen)
		}
	}
}

func itoa(i int) string {
	const digits = "0123456789"
	if i < 10 {
		return digits[i : i+1]
	}
	return itoa(i/10) + digits[i%10:i%10+1]
}

func TestFairShare(t *testing.T) {
	for _, c := range []struct {
		n         Count
		live, out int
	}{
		{1, 1, 1}, {1, 3, 1}, {12, 3, 4}, {12, 5, 3}, {4, 3, 2}, {4, 0, 4}, {6, 4, 2}, {6, 7, 1},
	} {
		if got := c.n.FairShare(c.live); got != c.out {
			t.Errorf("Count(%d).FairShare(%d) = %d, want %d", c.n, c.live, got, c.out)
		}
	}
}

func TestCheck(t *testing.T) {
	for _, n := range []Count{0, -1, MaxShards + 1} {
		if Count(n).Check() == nil {
			t.Errorf("Check(%d) accepted", n)
		}
	}
	for _, n := range []Count{1, 12, MaxShards} {
		if err := Count(n).Check(); err != nil {
			t.Errorf("Check(%d): %v", n, err)
		}
	}
}

// pinnedWeb is OfSpec("web") with 12 shards as first computed.
const pinnedWeb = 11
