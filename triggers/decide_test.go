package triggers

import (
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/release"

	"github.com/autox-dev/autox/helmops"
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
	want := map[TriggerState]map[ReleaseState]row{
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
			if got := Decide(ts, rs, "upgrade"); got != w.upgrade {
				t.Errorf("Decide(%s, %s, upgrade) = %s, want %s", ts, rs, got, w.upgrade)
			}
			if got := Decide(ts, rs, "reinstall"); got != w.reinstall {
				t.Errorf("Decide(%s, %s, reinstall) = %s, want %s", ts, rs, got, w.reinstall)
			}
		}
	}
}

func TestClassifyRelease(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	stale := 5*time.Minute + 30*time.Second
	want := &Want{Spec: "s", ReleaseSpec: "r", ChartName: "hello", ChartVersion: "0.1.0", Values: map[string]interface{}{"a": 1}}
	rel := func(mut func(r *helmops.Release)) *helmops.Release {
		r := &helmops.Release{Name: "s-r", Namespace: "default", Spec: "s", ReleaseSpec: "r", Revision: 3,
			Status: release.StatusDeployed, ChartName: "hello", ChartVersion: "0.1.0",
			Values: map[string]interface{}{"a": 1.0}, Updated: now.Add(-time.Hour), DeployedBefore: true, LastDeployedRevision: 3}
		if mut != nil {
			mut(r)
		}
		return r
	}
	cases := []struct {
		name       string
		rel        *helmops.Release
		want       *Want
		state      ReleaseState
		reasonPart string
	}{
		{"absent", nil, want, ReleaseAbsent, "not found"},
		{"unlabelled", rel(func(r *helmops.Release) { r.Spec, r.ReleaseSpec = "", "" }), want, ReleaseConflict, "without autox labels"},
		{"other spec", rel(func(r *helmops.Release) { r.Spec = "other" }), want, ReleaseConflict, `belongs to spec "other"`},
		{"in sync", rel(nil), want, ReleaseInSync, "match"},
		{"no want", rel(func(r *helmops.Release) { r.Values = nil }), nil, ReleaseInSync, "deployed"},
		{"chart version", rel(func(r *helmops.Release) { r.ChartVersion = "0.0.9" }), want, ReleaseOutOfSync, "chart hello 0.0.9 -> hello 0.1.0"},
		{"values", rel(func(r *helmops.Release) { r.Values = map[string]interface{}{"a": 2} }), want, ReleaseOutOfSync, "values changed: .a"},
		{"failed after deployed", rel(func(r *helmops.Release) { r.Status = release.StatusFailed }), want, ReleaseFailedAfterDeployed, "failed"},
		{"failed never deployed", rel(func(r *helmops.Release) { r.Status, r.DeployedBefore = release.StatusFailed, false }), want, ReleaseFailedNeverDeployed, "none was deployed"},
		{"pending young", rel(func(r *helmops.Release) {
			r.Status, r.Updated = release.StatusPendingUpgrade, now.Add(-stale+time.Second)
		}), want, ReleaseLocked, "pending-upgrade"},
		{"pending upgrade stale", rel(func(r *helmops.Release) { r.Status = release.StatusPendingUpgrade }), want, ReleaseStaleUpgrade, "left pending-upgrade"},
		{"pending rollback stale", rel(func(r *helmops.Release) { r.Status = release.StatusPendingRollback }), want, ReleaseStaleUpgrade, "left pending-rollback"},
		{"pending upgrade stale never deployed", rel(func(r *helmops.Release) { r.Status, r.LastDeployedRevision = release.StatusPendingUpgrade, 0 }), want, ReleaseStaleInstall, "left"},
		{"pending install stale", rel(func(r *helmops.Release) { r.Status = release.StatusPendingInstall }), want, ReleaseStaleInstall, "left pending-install"},
		{"uninstalling stale", rel(func(r *helmops.Release) { r.Status = release.StatusUninstalling }), want, ReleaseStaleInstall, "left uninstalling"},
		{"uninstalling young", rel(func(r *helmops.Release) { r.Status, r.Updated = release.StatusUninstalling, now }), want, ReleaseLocked, "uninstalling"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st, reason, err := ClassifyRelease(tc.rel, "s", "r", tc.want, now, stale)
			if err != nil {
				t.Fatal(err)
			}
			if st != tc.state || !strings.Contains(reason, tc.reasonPart) {
				t.Errorf("ClassifyRelease = %s %q, want %s containing %q", st, reason, tc.state, tc.reasonPart)
			}
		})
	}
}
