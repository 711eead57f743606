package cli

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/internal/format"
	"github.com/autox-dev/autox/triggers/plan"
)

// A step held by a release policy shows in the plan table as what holds
// it, with what it would do otherwise; -o json carries pending, suspended
// and the policies.
func TestPlanShowsHeldSteps(t *testing.T) {
	steps := []plan.Step{{Action: plan.ActionSuspended, Pending: plan.ActionUpgrade, Suspended: config.SuspendedBySpec,
		Spec: "web", ReleaseSpec: "hello", Release: "web-hello", Namespace: "apps",
		Reason: "spec suspended; otherwise: upgrade (values changed: .greeting)",
		Policy: config.PolicyDefaults{}.Of(&config.ReleaseSpec{Wait: true, Timeout: "90s"})}}
	var table bytes.Buffer
	if err := printSteps(&table, "table", steps, 1); err != nil {
		t.Fatal(err)
	}
	line := strings.Fields(strings.Split(table.String(), "\n")[1])
	if len(line) < 2 || line[0] != "suspended" || !strings.Contains(table.String(), "otherwise: upgrade (values changed: .greeting)") {
		t.Errorf("plan table:\n%s", table.String())
	}
	var out bytes.Buffer
	got := jsonRows(t, &out, printSteps(&out, "json", steps, 1))
	policies, _ := got[0]["policies"].(map[string]interface{})
	if got[0]["action"] != "suspended" || got[0]["pending"] != "upgrade" || got[0]["suspended"] != "spec" ||
		policies["wait"] != true || policies["timeout"] != "90s" {
		t.Errorf("plan -o json: %s", out.String())
	}
}

// list shows what the config suspends, by spec or by release spec, in a
// column of the table and a field of -o json (omitted when not).
func TestListShowsSuspended(t *testing.T) {
	cfg := &config.Config{Specs: map[string]*config.Spec{
		"web": {Suspend: true, ReleaseSpecs: map[string]*config.ReleaseSpec{"hello": {ReleaseName: "web-hello", Namespace: "apps"}}},
		"api": {ReleaseSpecs: map[string]*config.ReleaseSpec{
			"held": {ReleaseName: "api-held", Namespace: "apps", Suspend: true},
			"free": {ReleaseName: "api-free", Namespace: "apps"},
		}},
	}}
	rels := []*format.Release{
		{Record: format.Record{Name: "web-hello", Namespace: "apps", Spec: "web", ReleaseSpec: "hello", Instance: format.DefaultInstance}},
		{Record: format.Record{Name: "api-held", Namespace: "apps", Spec: "api", ReleaseSpec: "held", Instance: format.DefaultInstance}},
		{Record: format.Record{Name: "api-free", Namespace: "apps", Spec: "api", ReleaseSpec: "free", Instance: format.DefaultInstance}},
	}
	rows := listRows(cfg, format.DefaultInstance, rels, false, "")
	var table bytes.Buffer
	if err := printRows(&table, "table", rows); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(table.String()), "\n")
	want := map[string]string{"web-hello": "spec", "api-held": "releaseSpec", "api-free": "-"}
	if head := strings.Fields(lines[0]); head[len(head)-1] != "SUSPENDED" {
		t.Errorf("list header: %q", lines[0])
	}
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		if w, ok := want[f[1]]; !ok || f[len(f)-1] != w {
			t.Errorf("list row %q: SUSPENDED want %q", l, w)
		}
	}
	var out bytes.Buffer
	got := jsonRows(t, &out, printRows(&out, "json", rows))
	for _, r := range got {
		s, has := r["suspended"]
		if w := want[r["release"].(string)]; (w == "-" && has) || (w != "-" && s != w) {
			t.Errorf("list -o json row %v: suspended want %q", r, w)
		}
	}
}

// jsonRows decodes the -o json array printed to out (err: the printing's).
func jsonRows(t *testing.T, out *bytes.Buffer, err error) []map[string]interface{} {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	var rows []map[string]interface{}
	if err := json.Unmarshal(out.Bytes(), &rows); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	return rows
}

// A chart pulled over plain HTTP says so in the plan's CHART TRUST column
// and in -o json.
func TestPlanShowsPlainHTTP(t *testing.T) {
	steps := []plan.Step{{Action: plan.ActionInstall, Spec: "web", ReleaseSpec: "hello", Release: "web-hello", Namespace: "apps",
		Reason: "no release", ChartPinned: true, ChartPlainHTTP: true}}
	var table bytes.Buffer
	if err := printSteps(&table, "table", steps, 1); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(table.String(), " pinned,plain-http ") {
		t.Errorf("plan table:\n%s", table.String())
	}
	var out bytes.Buffer
	if got := jsonRows(t, &out, printSteps(&out, "json", steps, 1)); got[0]["chartPlainHTTP"] != true {
		t.Errorf("plan -o json: %s", out.String())
	}
	if got := chartTrust(false, false, true); got != "plain-http" {
		t.Errorf("chartTrust of a plain-HTTP chart alone = %q", got)
	}
}
