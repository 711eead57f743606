package cli

import (
	"bytes"
	"strconv"
	"strings"
	"testing"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/internal/format"
	"github.com/autox-dev/autox/internal/shard"
	"github.com/autox-dev/autox/triggers/plan"
)

// With --shards > 1, plan and list say each release's shard: the one its
// labels put it in (a selector object's, else its spec's); with 1 they print
// as they always have.
func TestPlanAndListShowShards(t *testing.T) {
	n := shard.Count(6)
	steps := []plan.Step{
		{Action: plan.ActionInstall, Spec: "web", ReleaseSpec: "hello", Release: "web-hello", Namespace: "apps"},
		{Action: plan.ActionInstall, Spec: "sel", ReleaseSpec: "r", Object: "team/obj", Release: "obj-r", Namespace: "team"},
	}
	want := []int{n.OfSpec("web"), n.OfObject(format.Object{Namespace: "team", Name: "obj"})}
	var table bytes.Buffer
	if err := printSteps(&table, "table", steps, n); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(table.String()), "\n")
	if !strings.HasPrefix(lines[0], "SHARD") {
		t.Errorf("plan header: %q", lines[0])
	}
	for i, l := range lines[1:] {
		if f := strings.Fields(l); f[0] != itoa(want[i]) {
			t.Errorf("plan row %q: shard want %d", l, want[i])
		}
	}
	var out bytes.Buffer
	got := jsonRows(t, &out, printSteps(&out, "json", steps, n))
	for i, r := range got {
		if r["shard"] != float64(want[i]) || r["action"] != "install" {
			t.Errorf("plan -o json row %v: shard want %d", r, want[i])
		}
	}
	var one bytes.Buffer
	if err := printSteps(&one, "table", steps, 1); err != nil || strings.Contains(one.String(), "SHARD") {
		t.Errorf("plan with one shard shows shards: %v\n%s", err, one.String())
	}

	rels := []*format.Release{
		{Record: format.Record{Name: "web-hello", Namespace: "apps", Spec: "web", ReleaseSpec: "hello", Instance: format.DefaultInstance}},
		{Record: format.Record{Name: "obj-r", Namespace: "team", Spec: "sel", ReleaseSpec: "r", Instance: format.DefaultInstance, ObjectNamespace: "team", ObjectName: "obj"}},
	}
	rows := withShards(n, listRows(&config.Config{}, format.DefaultInstance, rels, false, ""), rels)
	var lt bytes.Buffer
	if err := printRows(&lt, "table", rows); err != nil {
		t.Fatal(err)
	}
	lines = strings.Split(strings.TrimSpace(lt.String()), "\n")
	for i, l := range lines[1:] {
		if f := strings.Fields(l); f[0] != itoa(want[i]) {
			t.Errorf("list row %q: shard want %d", l, want[i])
		}
	}
	if rows := withShards(1, listRows(&config.Config{}, format.DefaultInstance, rels, false, ""), rels); rows[0].Shard != nil {
		t.Error("list with one shard sets a shard")
	}
}

func itoa(i int) string { return strconv.Itoa(i) }
