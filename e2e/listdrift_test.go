package e2e

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// TestListDriftSkipsAForeignRevision: `autox list --drift` of the built
// binary checks a release in drift warn mode read-only (dry runs only, no
// drift), and once another Helm client has upgraded it, shows it
// unchecked (`-` in the table, the reason in the JSON) without a check:
// no write of any kind, dry runs included.
func TestListDriftSkipsAForeignRevision(t *testing.T) {
	t.Parallel() // a namespace and a Lease of its own
	e := newEnv(t)
	e.Deployment("web", version("1.0.0"))
	config := e.WriteConfig(planDriftConfig)
	p := e.run(config)
	e.WaitRelease("web-drifty", "installed", deployedAt(1))
	p.Stop(patience)

	type row struct {
		Release  string
		Revision int
		Drift    *struct{ State, Reason string }
	}
	list := func() []row {
		t.Helper()
		var rows []row
		out := e.cliStdout(0, "list", "--config", config, "--drift", "-o", "json")
		if err := json.Unmarshal([]byte(out), &rows); err != nil || len(rows) != 1 || rows[0].Release != "web-drifty" || rows[0].Drift == nil {
			t.Fatalf("list --drift -o json (%v):\n%s", err, out)
		}
		return rows
	}

	// autox's own revision: checked, with dry runs only.
	before := len(cluster.WritesSoFar(t, e.NS))
	if rows := list(); rows[0].Drift.State != "none" {
		t.Errorf("list --drift of autox's revision: %+v", *rows[0].Drift)
	}
	dryRuns := 0
	for _, w := range cluster.WritesSoFar(t, e.NS)[before:] {
		if !w.DryRun {
			t.Errorf("list --drift wrote: %+v", w)
		}
		dryRuns++
	}
	if dryRuns == 0 {
		t.Error("list --drift made no dry run of autox's revision: it was not checked")
	}

	cluster.UpgradeReusingValues(t, e.NS, "web-drifty", filepath.Join(e.Charts, "drift"))
	before = len(cluster.WritesSoFar(t, e.NS))
	rows := list()
	table := e.cli(0, "list", "--config", config, "--drift")
	if ws := cluster.WritesSoFar(t, e.NS)[before:]; len(ws) != 0 {
		t.Errorf("list --drift of a revision another Helm client wrote made writes: %+v", ws)
	}
	if rows[0].Revision != 2 || rows[0].Drift.State != "unchecked" || !strings.Contains(rows[0].Drift.Reason, "revision 2 was written by another Helm client") {
		t.Errorf("list --drift of a revision another Helm client wrote: revision %d, %+v", rows[0].Revision, *rows[0].Drift)
	}
	var line string
	for _, l := range strings.Split(table, "\n") {
		if strings.Contains(l, "web-drifty") {
			line = l
		}
	}
	if !strings.Contains(table, "DRIFT") || !strings.HasSuffix(strings.TrimSpace(line), " -") {
		t.Errorf("list --drift table: the release is not shown unchecked (-):\n%s", table)
	}
	if r := e.Release("web-drifty"); r.Revision != 2 {
		t.Errorf("revision %d after list --drift, want 2", r.Revision)
	}
}
