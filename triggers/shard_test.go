package triggers

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/internal/format"
	"github.com/autox-dev/autox/internal/shard"
)

// Every key is reconciled by exactly one shard's controller, except those
// whose releases may lie in every shard (a selector spec's own key, a
// removed spec's), which every shard reconciles over its own releases; and
// a release is always in the shard of the key that decides about it.
func TestShardOwnership(t *testing.T) {
	n := shard.Count(5)
	cfg := &config.Config{Specs: map[string]*config.Spec{
		"named": {Trigger: config.Trigger{Name: "web", Namespace: "apps"}},
		"sel":   {Trigger: config.Trigger{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}}},
	}}
	obj := format.Object{Namespace: "team", Name: "svc"}
	cases := []struct {
		key    string
		owners []int // nil: every shard
	}{
		{"named", []int{n.OfSpec("named")}},
		{ObjectKey("sel", obj), []int{n.OfObject(obj)}},
		{"sel", nil},
		{"removed", nil},
	}
	for _, c := range cases {
		var owners []int
		for i := 0; i < int(n); i++ {
			if (&Shard{Count: n, Index: i}).OwnsKey(cfg, c.key) {
				owners = append(owners, i)
			}
		}
		if c.owners == nil && len(owners) != int(n) || c.owners != nil && (len(owners) != 1 || owners[0] != c.owners[0]) {
			t.Errorf("key %q is owned by shards %v, want %v (nil: all)", c.key, owners, c.owners)
		}
	}
	if !(*Shard)(nil).OwnsKey(cfg, "named") {
		t.Error("without shards a controller does not own a key")
	}

	named := &format.Release{Record: format.Record{Name: "named-x", Spec: "named", ReleaseSpec: "x"}}
	ofObj := &format.Release{Record: format.Record{Name: "svc-x", Spec: "sel", ReleaseSpec: "x", ObjectNamespace: "team", ObjectName: "svc"}}
	for i := 0; i < int(n); i++ {
		h := shardHelm{shard: &Shard{Count: n, Index: i}}
		got := h.only([]*format.Release{named, ofObj})
		want := 0
		if i == n.OfSpec("named") {
			want++
		}
		if i == n.OfObject(obj) {
			want++
		}
		if len(got) != want {
			t.Errorf("shard %d sees %d of the releases, want %d", i, len(got), want)
		}
	}
}
