package cli

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/helmops"
	"github.com/autox-dev/autox/internal/drift"
	"github.com/autox-dev/autox/internal/format"
	"github.com/autox-dev/autox/triggers/plan"
)

// TestPlanDrift: plan checks, read-only (warn, whatever the mode), only the
// releases it leaves in sync with drift on; the others say why not.
func TestPlanDrift(t *testing.T) {
	cfg := &config.Config{Specs: map[string]*config.Spec{"web": {ReleaseSpecs: map[string]*config.ReleaseSpec{
		"on":  {Drift: &config.Drift{Mode: config.DriftCorrect, Ignore: []config.DriftIgnore{{Paths: []string{"/spec/replicas"}}}}},
		"off": {},
	}}}}
	step := func(rs string, a plan.Action, st plan.ReleaseState) plan.Step {
		return plan.Step{Spec: "web", ReleaseSpec: rs, Release: "web-" + rs, Namespace: "apps", Revision: 3, Action: a, State: st, ServiceAccount: "deployer"}
	}
	held := step("on", plan.ActionSuspended, plan.ReleaseInSync)
	held.Pending = plan.ActionNone
	heldUpgrade := step("on", plan.ActionSuspended, plan.ReleaseOutOfSync)
	heldUpgrade.Pending = plan.ActionUpgrade
	noRelease := step("on", plan.ActionInstall, plan.ReleaseAbsent)
	noRelease.Revision = 0
	for _, c := range []struct {
		name  string
		s     plan.Step
		check bool
		state string
	}{
		{"in sync", step("on", plan.ActionNone, plan.ReleaseInSync), true, ""},
		{"suspended in sync", held, true, ""},
		{"suspended upgrade", heldUpgrade, false, driftUnchecked},
		{"upgrade", step("on", plan.ActionUpgrade, plan.ReleaseOutOfSync), false, driftUnchecked},
		{"locked", step("on", plan.ActionWait, plan.ReleaseLocked), false, driftUnchecked},
		{"mode off", step("off", plan.ActionNone, plan.ReleaseInSync), false, driftOff},
		{"no release", noRelease, false, driftUnchecked},
		{"release spec gone", step("gone", plan.ActionNone, plan.ReleaseInSync), false, driftUnchecked},
	} {
		target, d := planDrift(cfg, c.s)
		if c.check != (target != nil) || !c.check && (d == nil || d.State != c.state) {
			t.Errorf("%s: target %+v, drift %+v", c.name, target, d)
			continue
		}
		if target != nil && (target.Policy.ModeOrOff() != config.DriftWarn || len(target.Policy.Ignore) != 1 ||
			target.ServiceAccount != (helmops.ServiceAccount{Namespace: "apps", Name: "deployer"}) || target.Suspended != (c.s.Action == plan.ActionSuspended)) {
			t.Errorf("%s: target %+v", c.name, target)
		}
	}
}

// TestPlanDriftNewestByAutox: as the drift loop (DriftTargets), plan
// checks a release only when autox wrote its newest revision: one another
// Helm client wrote (autox's revision label names an older one, or there
// is no digest) is not checked, with the reason; a record that cannot be
// listed is an error; the planDrifts wiring asks for no check then (a nil
// checker would panic).
func TestPlanDriftNewestByAutox(t *testing.T) {
	ours := format.Record{Namespace: "apps", Name: "web-on", Revision: 3, Status: "deployed", Digest: "d", AutoxRevision: 3}
	foreign := ours
	foreign.AutoxRevision = 2
	noDigest := ours
	noDigest.Digest, noDigest.AutoxRevision = "", 0
	newer := ours
	newer.Revision, newer.AutoxRevision = 4, 4
	for _, c := range []struct {
		name   string
		rec    format.Record
		found  bool
		err    error
		state  string
		reason string
	}{
		{"autox wrote it", ours, true, nil, "", ""},
		{"another Helm client wrote it", foreign, true, nil, driftUnchecked, "revision 3 was written by another Helm client, not autox: the drift loop does not check it"},
		{"no digest", noDigest, true, nil, driftUnchecked, "revision 3 was written by another Helm client, not autox: the drift loop does not check it"},
		{"a newer revision since", newer, true, nil, driftUnchecked, "its newest revision is 4 now, not the plan's 3"},
		{"gone", format.Record{}, false, nil, driftUnchecked, "no release"},
		{"unreadable", format.Record{}, false, errors.New("cannot list release records: Forbidden"), driftError, "the release could not be checked"},
	} {
		d := newestByAutox(c.rec, c.found, c.err, 3)
		if c.state == "" {
			if d != nil {
				t.Errorf("%s: not checked: %+v", c.name, d)
			}
			continue
		}
		if d == nil || d.State != c.state || d.Reason != c.reason {
			t.Errorf("%s: %+v", c.name, d)
		}
	}

	cfg := &config.Config{Specs: map[string]*config.Spec{"web": {ReleaseSpecs: map[string]*config.ReleaseSpec{
		"on": {Drift: &config.Drift{Mode: config.DriftWarn}},
	}}}}
	steps := []plan.Step{{Spec: "web", ReleaseSpec: "on", Release: "web-on", Namespace: "apps", Revision: 3, Action: plan.ActionNone, State: plan.ReleaseInSync}}
	var asked []string
	records := func(_ context.Context, namespaces []string) ([]format.Record, error) {
		asked = append(asked, namespaces...)
		return []format.Record{foreign}, nil
	}
	drifts := planDrifts(context.Background(), nil, records, cfg, steps)
	if len(drifts) != 1 || drifts[0].State != driftUnchecked || driftColumn(drifts[0]) != "-" || len(asked) != 1 || asked[0] != "apps" {
		t.Errorf("planDrifts: %+v, namespaces read %v", drifts, asked)
	}
	partial := func(context.Context, []string) ([]format.Record, error) {
		return nil, &helmops.NamespacesError{Failed: map[string]error{"apps": errors.New("Forbidden")}}
	}
	if d := planDrifts(context.Background(), nil, partial, cfg, steps); d[0].State != driftError || d[0].Error != "Forbidden" {
		t.Errorf("planDrifts of an unreadable namespace: %+v", d[0])
	}
}

// TestListDriftNewestByAutox: list --drift follows the rule of plan and
// the drift loop: a release whose newest revision another Helm client
// wrote, or one not deployed, is unchecked with the reason plan gives, and
// no check is made of it (a nil checker would panic).
func TestListDriftNewestByAutox(t *testing.T) {
	cfg := &config.Config{Specs: map[string]*config.Spec{"web": {ReleaseSpecs: map[string]*config.ReleaseSpec{
		"on": {Drift: &config.Drift{Mode: config.DriftWarn}},
	}}}}
	ours := format.Record{Namespace: "apps", Name: "web-on", Spec: "web", ReleaseSpec: "on", Revision: 3, Status: "deployed", Digest: "d", AutoxRevision: 3}
	foreign := ours
	foreign.Name, foreign.AutoxRevision = "web-manual", 2
	noDigest := ours
	noDigest.Name, noDigest.Digest, noDigest.AutoxRevision = "web-helm", "", 0
	failed := ours
	failed.Name, failed.Status = "web-failed", "failed"
	rels := []*format.Release{{Record: foreign}, {Record: noDigest}, {Record: failed}}
	rows := listRows(cfg, format.DefaultInstance, rels, false, "")
	addDrift(context.Background(), nil, cfg, rows, rels)
	want := []string{
		"revision 3 was written by another Helm client, not autox: the drift loop does not check it",
		"revision 3 was written by another Helm client, not autox: the drift loop does not check it",
		"revision 3 is failed, not deployed",
	}
	for i, r := range rows {
		if r.Drift == nil || r.Drift.State != driftUnchecked || r.Drift.Reason != want[i] || driftColumn(r.Drift) != "-" {
			t.Errorf("%s: %+v", r.Release, r.Drift)
		}
	}
	// The same reason as plan's for the same record.
	if p := newestByAutox(foreign, true, nil, 3); p == nil || p.Reason != rows[0].Drift.Reason {
		t.Errorf("plan says %+v, list %+v", p, rows[0].Drift)
	}
}

// TestDriftOf: one decision of a check's state for plan and list: drift
// wins over a failed object, whose error is kept; paths only.
func TestDriftOf(t *testing.T) {
	dep := drift.ObjectRef{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "apps", Name: "web"}
	svc := drift.ObjectRef{Version: "v1", Kind: "Service", Namespace: "apps", Name: "web"}
	drifted := helmops.ObjectDrift{Result: drift.Result{Object: dep, Fields: []drift.Field{{Path: "/spec/replicas", State: drift.Drifted}}}}
	missing := helmops.ObjectDrift{Result: drift.Result{Object: svc, Missing: true}}
	failed := helmops.ObjectDrift{Result: drift.Result{Object: svc}, CheckErr: errors.New("cannot dry-run apply Service/apps/web: Forbidden")}
	clean := helmops.ObjectDrift{Result: drift.Result{Object: svc}}
	for _, c := range []struct {
		name   string
		objs   []helmops.ObjectDrift
		err    error
		state  string
		column string
	}{
		{"none", []helmops.ObjectDrift{clean}, nil, driftNone, "none"},
		{"drifted", []helmops.ObjectDrift{drifted, clean}, nil, driftDrifted, "drifted: Deployment.apps/apps/web: /spec/replicas"},
		{"drifted and missing", []helmops.ObjectDrift{missing, drifted}, nil, driftDrifted, "drifted: Service/apps/web: missing; Deployment.apps/apps/web: /spec/replicas"},
		{"missing", []helmops.ObjectDrift{missing}, nil, driftMissing, "missing: Service/apps/web: missing"},
		{"drifted and failed", []helmops.ObjectDrift{drifted, failed}, nil, driftDrifted, "drifted: Deployment.apps/apps/web: /spec/replicas"},
		{"failed", []helmops.ObjectDrift{failed, clean}, nil, driftError, "error: cannot dry-run apply Service/apps/web: Forbidden"},
		{"release unreadable", nil, errors.New("cannot read revision 3"), driftError, "error: cannot read revision 3"},
	} {
		d := driftOf(&helmops.DriftReport{Objects: c.objs}, c.err)
		if d.State != c.state || driftColumn(d) != c.column {
			t.Errorf("%s: %+v, column %q", c.name, d, driftColumn(d))
		}
		if c.name == "drifted and failed" && !strings.Contains(d.Error, "Forbidden") {
			t.Errorf("%s: the failure is lost: %+v", c.name, d)
		}
	}
	if driftColumn(unchecked("no release")) != "-" || driftColumn(nil) != "-" {
		t.Error("an unchecked release's column is not -")
	}
}
