package plan

import (
	"strings"
	"testing"
	"time"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/internal/format"
	"helm.sh/helm/v4/pkg/release/common"
)

// TestDecideTable covers every (trigger state × release state × onChange) pair.
func TestDecideTable(t *testing.T) {
	type row struct{ upgrade, reinstall Action }
	notWanted := map[ReleaseState]row{
		ReleaseAbsent:              {ActionNone, ActionNone},
		ReleaseConflict:            {ActionNone, ActionNone},
		ReleaseInSync:              {ActionUninstall, ActionUninstall},
		ReleaseOutOfSync:           {ActionUninstall, ActionUninstall},
		ReleaseFailedAfterDeployed: {ActionUninstall, ActionUninstall},
		ReleaseFailedNeverDeployed: {ActionUninstall, ActionUninstall},
		ReleaseLocked:              {ActionWait, ActionWait},
		ReleaseStaleUpgrade:        {ActionUninstall, ActionUninstall},
		ReleaseStaleInstall:        {ActionUninstall, ActionUninstall},
	}
	// Conflict and over-limit never write: a conflict reports, over-limit keeps.
	all := func(a Action) map[ReleaseState]row {
		m := map[ReleaseState]row{}
		for rs := range releaseStateNames {
			m[rs] = row{a, a}
		}
		return m
	}
	want := map[TriggerState]map[ReleaseState]row{
		TriggerConflict:    all(ActionConflict),
		TriggerOverLimit:   all(ActionNone),
		TriggerAbsent:      notWanted,
		TriggerUnlabelled:  notWanted,
		TriggerSpecRemoved: notWanted,
		TriggerWanted: {
			ReleaseAbsent:              {ActionInstall, ActionInstall},
			ReleaseConflict:            {ActionConflict, ActionConflict},
			ReleaseInSync:              {ActionNone, ActionNone},
			ReleaseOutOfSync:           {ActionUpgrade, ActionReinstall},
			ReleaseFailedAfterDeployed: {ActionUpgrade, ActionReinstall},
			ReleaseFailedNeverDeployed: {ActionReinstall, ActionReinstall},
			ReleaseLocked:              {ActionWait, ActionWait},
			ReleaseStaleUpgrade:        {ActionRollback, ActionRollback},
			ReleaseStaleInstall:        {ActionReinstall, ActionReinstall},
		},
	}
	if len(want) != len(triggerStateNames) {
		t.Fatalf("table has %d trigger states, code has %d", len(want), len(triggerStateNames))
	}
	for ts, rows := range want {
		if len(rows) != len(releaseStateNames) {
			t.Fatalf("%s: table has %d release states, code has %d", ts, len(rows), len(releaseStateNames))
		}
		for rs, w := range rows {
			if got := ActionFor(ts, rs, "upgrade"); got != w.upgrade {
				t.Errorf("ActionFor(%s, %s, upgrade) = %s, want %s", ts, rs, got, w.upgrade)
			}
			if got := ActionFor(ts, rs, "reinstall"); got != w.reinstall {
				t.Errorf("ActionFor(%s, %s, reinstall) = %s, want %s", ts, rs, got, w.reinstall)
			}
		}
	}
}

func TestClassifyRelease(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	stale := 5*time.Minute + 30*time.Second
	want := &Desired{ChartName: "hello", ChartVersion: "0.1.0", Values: map[string]interface{}{"a": 1}}
	rel := func(mut func(r *format.Release)) *format.Release {
		r := &format.Release{Record: format.Record{Name: "s-r", Namespace: "default", Spec: "s", ReleaseSpec: "r", Revision: 3, Status: common.StatusDeployed, Instance: "autox"},
			ChartName: "hello", ChartVersion: "0.1.0", Values: map[string]interface{}{"a": 1.0}, Modified: now.Add(-time.Hour), Updated: now.Add(-2 * time.Hour), DeployedBefore: true, LastDeployedRevision: 3}
		if mut != nil {
			mut(r)
		}
		return r
	}
	cases := []struct {
		name       string
		rel        *format.Release
		want       *Desired
		state      ReleaseState
		reasonPart string
	}{
		{"absent", nil, want, ReleaseAbsent, "not found"},
		{"unlabelled", rel(func(r *format.Release) { r.Spec, r.ReleaseSpec = "", "" }), want, ReleaseConflict, "without autox labels"},
		{"only the spec label", rel(func(r *format.Release) { r.ReleaseSpec = "" }), want, ReleaseConflict, "without autox labels"},
		{"other spec", rel(func(r *format.Release) { r.Spec = "other" }), want, ReleaseConflict, `belongs to spec "other"`},
		{"in sync", rel(nil), want, ReleaseInSync, "match"},
		{"no want", rel(func(r *format.Release) { r.Values = nil }), nil, ReleaseInSync, "deployed"},
		{"chart version", rel(func(r *format.Release) { r.ChartVersion = "0.0.9" }), want, ReleaseOutOfSync, "chart hello 0.0.9 -> hello 0.1.0"},
		{"values", rel(func(r *format.Release) { r.Values = map[string]interface{}{"a": 2} }), want, ReleaseOutOfSync, "values changed: .a"},
		{"failed after deployed", rel(func(r *format.Release) { r.Status = common.StatusFailed }), want, ReleaseFailedAfterDeployed, "failed"},
		{"failed never deployed", rel(func(r *format.Release) { r.Status, r.DeployedBefore = common.StatusFailed, false }), want, ReleaseFailedNeverDeployed, "none was deployed"},
		{"pending young", rel(func(r *format.Release) {
			r.Status, r.Modified = common.StatusPendingUpgrade, now.Add(-stale+time.Second)
		}), want, ReleaseLocked, "pending-upgrade"},
		{"pending upgrade stale", rel(func(r *format.Release) { r.Status = common.StatusPendingUpgrade }), want, ReleaseStaleUpgrade, "left pending-upgrade"},
		{"pending rollback stale", rel(func(r *format.Release) { r.Status = common.StatusPendingRollback }), want, ReleaseStaleUpgrade, "left pending-rollback"},
		{"pending upgrade stale never deployed", rel(func(r *format.Release) { r.Status, r.LastDeployedRevision = common.StatusPendingUpgrade, 0 }), want, ReleaseStaleInstall, "left"},
		{"pending install stale", rel(func(r *format.Release) { r.Status = common.StatusPendingInstall }), want, ReleaseStaleInstall, "left pending-install"},
		{"uninstalling stale", rel(func(r *format.Release) { r.Status = common.StatusUninstalling }), want, ReleaseStaleInstall, "left uninstalling"},
		{"uninstalling young", rel(func(r *format.Release) { r.Status, r.Modified = common.StatusUninstalling, now }), want, ReleaseLocked, "uninstalling"},
		{"uninstalling, last written unknown", rel(func(r *format.Release) { r.Status, r.Modified = common.StatusUninstalling, time.Time{} }), want, ReleaseLocked, "unknown"},
		{"pending, deployed long ago, record written just now", rel(func(r *format.Release) {
			r.Status, r.Modified, r.Updated = common.StatusPendingUpgrade, now, now.Add(-24*time.Hour)
		}), want, ReleaseLocked, "pending-upgrade"},
		{"another instance's release", rel(func(r *format.Release) { r.Instance = "team-b" }), want, ReleaseConflict, `instance "team-b"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st, reason, err := ClassifyRelease(tc.rel, format.Owner{Spec: "s", ReleaseSpec: "r", Instance: "autox"}, tc.want, now, stale)
			if err != nil {
				t.Fatal(err)
			}
			if st != tc.state || !strings.Contains(reason, tc.reasonPart) {
				t.Errorf("ClassifyRelease = %s %q, want %s containing %q", st, reason, tc.state, tc.reasonPart)
			}
		})
	}
}

func TestInSync(t *testing.T) {
	spec := &config.Spec{
		Trigger: config.Trigger{Group: "apps", Version: "v1", Resource: "deployments", Name: "web", Namespace: "ns", Labels: []string{"v"}},
		ReleaseSpecs: map[string]*config.ReleaseSpec{
			"a": {Chart: config.Chart{Repo: "https://c", Name: "hello", Version: "1.0.0"}, ReleaseName: "web-a", Namespace: "ns", Values: map[string]interface{}{"x": 1.0}},
		},
	}
	labelled := TriggerRead{Found: true, Labels: map[string]string{"v": "2"}}
	digest, err := format.Digest("hello", "1.0.0", DesiredValues(spec.ReleaseSpecs["a"], spec.Trigger, labelled.Labels))
	if err != nil {
		t.Fatal(err)
	}
	good := format.Record{Name: "web-a", Namespace: "ns", Spec: "web", ReleaseSpec: "a", Revision: 4, Status: "deployed", Digest: digest, AutoxRevision: 4}
	ids := map[string]ChartID{"a": {"hello", "1.0.0"}}
	mod := func(f func(r *format.Record)) []format.Record { r := good; f(&r); return []format.Record{r} }
	cases := []struct {
		name string
		obs  TriggerRead
		recs []format.Record
		ids  map[string]ChartID
		want bool
	}{
		{"in sync", labelled, []format.Record{good}, ids, true},
		{"label value changed", TriggerRead{Found: true, Labels: map[string]string{"v": "3"}}, []format.Record{good}, ids, false},
		{"release missing", labelled, nil, ids, false},
		{"extra release", labelled, append([]format.Record{good}, format.Record{Name: "old", Namespace: "ns", Spec: "web", ReleaseSpec: "gone"}), ids, false},
		{"written by another client", labelled, mod(func(r *format.Record) { r.Revision = 5 }), ids, false},
		{"no digest label", labelled, mod(func(r *format.Record) { r.Digest = "" }), ids, false},
		{"failed", labelled, mod(func(r *format.Record) { r.Status = "failed" }), ids, false},
		{"pending", labelled, mod(func(r *format.Record) { r.Status = "pending-upgrade" }), ids, false},
		{"renamed", labelled, mod(func(r *format.Record) { r.Name = "web-b" }), ids, false},
		{"chart unknown", labelled, []format.Record{good}, nil, false},
		{"chart version differs", labelled, []format.Record{good}, map[string]ChartID{"a": {"hello", "1.0.1"}}, false},
		{"absent and nothing installed", TriggerRead{}, nil, ids, true},
		{"absent but installed", TriggerRead{}, []format.Record{good}, ids, false},
		{"unlabelled and nothing installed", TriggerRead{Found: true}, nil, ids, true},
	}
	for _, tc := range cases {
		if got := InSync("web", spec, format.Object{}, tc.obs, tc.recs, tc.ids, nil); got != tc.want {
			t.Errorf("%s: InSync = %v, want %v", tc.name, got, tc.want)
		}
	}
}
