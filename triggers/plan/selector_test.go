package plan

import (
	"strings"
	"testing"

	"github.com/autox-dev/autox/internal/format"
)

func TestClaimants(t *testing.T) {
	cfg := selectorConfig(t)
	idx := NewClaimIndex(cfg)
	cases := []struct {
		name   string
		obj    format.Object
		labels map[string]string
		want   string
	}{
		{"selected", format.Object{Namespace: "ns", Name: "a"}, labels("autox.dev/experiment", "enabled"), "exp"},
		{"selected in the other namespace", format.Object{Namespace: "other", Name: "a"}, labels("autox.dev/experiment", "enabled"), "exp"},
		{"not selected", format.Object{Namespace: "ns", Name: "a"}, labels(), ""},
		{"named and selected", format.Object{Namespace: "ns", Name: "web"}, labels("autox.dev/experiment", "enabled"), "exp,web"},
		{"named only", format.Object{Namespace: "ns", Name: "web"}, labels(), "web"},
		{"two selectors", format.Object{Namespace: "ns", Name: "b"}, labels("autox.dev/experiment", "enabled", "canary", ""), "canary,exp"},
		{"second selector out of its namespace", format.Object{Namespace: "other", Name: "b"}, labels("autox.dev/experiment", "enabled", "canary", ""), "exp"},
	}
	for _, tc := range cases {
		got := strings.Join(idx.Claimants("apps", "deployments", tc.obj, tc.labels), ",")
		if got != tc.want {
			t.Errorf("%s: Claimants = %q, want %q", tc.name, got, tc.want)
		}
		if other := idx.Claimants("", "deployments", tc.obj, tc.labels); len(other) != 0 {
			t.Errorf("%s: another group claimed by %v", tc.name, other)
		}
	}
}

func TestAdmit(t *testing.T) {
	objs := []format.Object{{Namespace: "ns", Name: "c"}, {Namespace: "other", Name: "a"}, {Namespace: "ns", Name: "a"}, {Namespace: "ns", Name: "b"}}
	none := func(format.Object) bool { return false }
	got := Admit(objs, none, 2)
	if len(got) != 2 || !got[format.Object{Namespace: "ns", Name: "a"}] || !got[format.Object{Namespace: "ns", Name: "b"}] {
		t.Errorf("Admit without releases = %v, want ns/a and ns/b (namespace/name order)", got)
	}
	// ns/c and other/a have releases: they stay served, and take the room.
	served := func(o format.Object) bool {
		return o == format.Object{Namespace: "ns", Name: "c"} || o == format.Object{Namespace: "other", Name: "a"}
	}
	got = Admit(objs, served, 2)
	if len(got) != 2 || !got[format.Object{Namespace: "ns", Name: "c"}] || !got[format.Object{Namespace: "other", Name: "a"}] {
		t.Errorf("Admit with two served = %v, want the served ones only", got)
	}
	// A lowered bound takes nothing away.
	if got = Admit(objs, served, 1); len(got) != 2 {
		t.Errorf("Admit with a bound under the served = %v, want both served kept", got)
	}
	if got = Admit(objs, served, 3); len(got) != 3 || !got[format.Object{Namespace: "ns", Name: "a"}] {
		t.Errorf("Admit with room for one more = %v, want ns/a added", got)
	}
}

// TestPlanSelectorObject decides one object of the selector spec exp (and,
// for conflicts, the named spec web on the same object): each row is an
// observation built from the shared builders and the one step it must give.
func TestPlanSelectorObject(t *testing.T) {
	cfg := selectorConfig(t)
	a := format.Object{Namespace: "ns", Name: "a"}
	web := format.Object{Namespace: "ns", Name: "web"}
	selected := TriggerRead{Found: true, Labels: labels("autox.dev/experiment", "enabled")}
	unselected := TriggerRead{Found: true, Labels: labels()}
	noVersion := TriggerRead{Found: true, Labels: map[string]string{"autox.dev/experiment": "enabled"}}
	relA := objectRelease(t, cfg, a, selected)
	relWeb := objectRelease(t, cfg, web, selected)
	// A release of a-job in ns made for object other/a: that object's.
	otherA := objectRelease(t, cfg, format.Object{Namespace: "other", Name: "a"}, selected)
	otherA.Namespace = "ns"
	namedWeb := func(trig TriggerRead) Observation {
		return Observation{Spec: "web", Config: cfg.Specs["web"], Instance: "autox", Trigger: trig,
			Claimants:    NewClaimIndex(cfg).Claimants("apps", "deployments", web, trig.Labels),
			ReleaseSpecs: map[string]ReleaseSpecObservation{"a": {Chart: ChartID{"hello", "1.0.0"}}}, Now: planNow}
	}
	cases := []struct {
		name    string
		obs     Observation
		trigger TriggerState
		action  Action
		// reason and release, if set, must be in the step's reason / be its release.
		reason, release, object string
	}{
		{"new object", objectObservation(t, cfg, a, selected), TriggerWanted, ActionInstall, "release not found", "a-job", "ns/a"},
		{"in sync", objectObservation(t, cfg, a, selected, relA), TriggerWanted, ActionNone, "chart and values match", "a-job", "ns/a"},
		{"no longer selected", objectObservation(t, cfg, a, unselected, relA), TriggerUnlabelled, ActionUninstall, "no longer matches", "a-job", ""},
		{"deleted", objectObservation(t, cfg, a, TriggerRead{}, relA), TriggerAbsent, ActionUninstall, "trigger not found", "", ""},
		{"trigger label gone", objectObservation(t, cfg, a, noVersion, relA), TriggerUnlabelled, ActionUninstall, "missing", "", ""},
		{"name taken by another object's release", changed(objectObservation(t, cfg, a, selected), func(o *Observation) {
			o.ReleaseSpecs["job"] = ReleaseSpecObservation{Chart: ChartID{"hello", "1.0.0"}, Other: otherA}
		}), TriggerWanted, ActionConflict, "object other/a", "", ""},
		{"over the bound", changed(objectObservation(t, cfg, a, selected), func(o *Observation) { o.OverLimit = true }),
			TriggerOverLimit, ActionNone, "maxObjects (2)", "", ""},
		{"over the bound with a release: kept", changed(objectObservation(t, cfg, a, selected, relA), func(o *Observation) { o.OverLimit = true }),
			TriggerOverLimit, ActionNone, "", "", ""},
		{"out of the selector's namespaces", changed(objectObservation(t, cfg, a, selected, relA), func(o *Observation) { o.OutOfScope = true }),
			TriggerUnlabelled, ActionUninstall, "no longer covers", "", ""},

		// Conflicts: one object claimed by two specs; nothing installed, nothing removed.
		{"selector spec on a named trigger", objectObservation(t, cfg, web, selected), TriggerConflict, ActionConflict, "exp, web", "", "ns/web"},
		{"conflict with a release and a label gone", objectObservation(t, cfg, web, noVersion, relWeb), TriggerConflict, ActionConflict, "", "", ""},
		{"named spec on a selected object", namedWeb(selected), TriggerConflict, ActionConflict, "exp, web", "web-a", ""},
		{"named spec, object not selected: no conflict", namedWeb(unselected), TriggerWanted, ActionInstall, "", "web-a", ""},
		// Not exp's object any more, whoever else claims it: its releases go.
		{"left exp's selector, still named by web", objectObservation(t, cfg, web, unselected, relWeb), TriggerUnlabelled, ActionUninstall, "", "", ""},
		{"deleted object in conflict", objectObservation(t, cfg, web, TriggerRead{}, relWeb), TriggerAbsent, ActionUninstall, "", "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := Decide(tc.obs)
			if len(res.Steps) != 1 || len(res.Failed) != 0 {
				t.Fatalf("Decide = %+v, want one step", res)
			}
			s := res.Steps[0]
			if res.Trigger != tc.trigger || s.Action != tc.action {
				t.Errorf("trigger %s, action %s (%s); want %s, %s", res.Trigger, s.Action, s.Reason, tc.trigger, tc.action)
			}
			if reason := s.Reason + " " + res.TriggerReason; tc.reason != "" && !strings.Contains(reason, tc.reason) {
				t.Errorf("reason %q, want it to say %q", reason, tc.reason)
			}
			if tc.release != "" && s.Release != tc.release {
				t.Errorf("release %s, want %s", s.Release, tc.release)
			}
			if tc.object != "" && s.Object != tc.object {
				t.Errorf("object %q, want %q", s.Object, tc.object)
			}
			if tc.action == ActionConflict && s.Changes() {
				t.Errorf("a conflict makes a Helm write")
			}
		})
	}
}

// TestInjectedValuesNameTheObject: a selector object's release gets the
// object, not the spec's trigger, as autox.trigger.
func TestInjectedValuesNameTheObject(t *testing.T) {
	cfg := selectorConfig(t)
	selected := TriggerRead{Found: true, Labels: labels("autox.dev/experiment", "enabled")}
	res := Decide(objectObservation(t, cfg, format.Object{Namespace: "ns", Name: "a"}, selected))
	trig := res.Steps[0].Desired.Values["autox"].(map[string]interface{})["trigger"].(map[string]interface{})
	if trig["name"] != "a" || trig["namespace"] != "ns" {
		t.Errorf("injected trigger = %v, want object ns/a", trig)
	}
}

func TestWantedBySelector(t *testing.T) {
	cfg := selectorConfig(t)
	rec := func(ns, name, objNS, obj string) format.Record {
		return format.Record{Name: name, Namespace: ns, Spec: "exp", ReleaseSpec: "job", ObjectNamespace: objNS, ObjectName: obj}
	}
	long := strings.Repeat("x", 70)
	cases := []struct {
		name string
		rec  format.Record
		want bool
	}{
		{"its object's name", rec("ns", "a-job", "ns", "a"), true},
		{"renamed", rec("ns", "old-a", "ns", "a"), false},
		{"no object", rec("ns", "a-job", "", ""), false},
		{"object out of scope", rec("gone", "a-job", "gone", "a"), false},
		{"long name: the object decides", rec("ns", "whatever", "ns", format.ObjectLabel(long)), true},
		{"named spec release with an object", format.Record{Name: "web-a", Namespace: "ns", Spec: "web", ReleaseSpec: "a", ObjectNamespace: "ns", ObjectName: "web"}, false},
		{"named spec release", format.Record{Name: "web-a", Namespace: "ns", Spec: "web", ReleaseSpec: "a"}, true},
	}
	for _, tc := range cases {
		if got := WantedBy(cfg, tc.rec); got != tc.want {
			t.Errorf("%s: WantedBy = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestInSyncObject(t *testing.T) {
	cfg := selectorConfig(t)
	a := format.Object{Namespace: "ns", Name: "a"}
	trig := TriggerRead{Found: true, Labels: labels("autox.dev/experiment", "enabled")}
	spec, _ := cfg.Specs["exp"].ForObject("exp", "ns", "a")
	rel := objectRelease(t, cfg, a, trig)
	digest, _ := format.Digest("hello", "1.0.0", rel.Values)
	rec := format.Record{Name: rel.Name, Namespace: "ns", Spec: "exp", ReleaseSpec: "job", Instance: "autox", ObjectNamespace: "ns", ObjectName: "a",
		Revision: 1, Status: "deployed", Digest: digest, AutoxRevision: 1}
	ids := map[string]ChartID{"job": {"hello", "1.0.0"}}
	if !InSync("exp", spec, a, trig, []format.Record{rec}, ids, nil) {
		t.Errorf("its own record: not in sync")
	}
	if InSync("exp", spec, format.Object{Namespace: "ns", Name: "b"}, trig, []format.Record{rec}, ids, nil) {
		t.Errorf("another object's record counted as in sync")
	}
	if InSync("exp", spec, a, TriggerRead{Found: true, Labels: version}, []format.Record{rec}, ids, nil) {
		t.Errorf("an object no longer selected is in sync")
	}
}
