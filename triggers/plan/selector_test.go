package plan

import (
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/release"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/internal/format"
)

// selectorConfig has a selector spec "exp" on deployments in ns and other,
// a named spec "web" on deployment ns/web, and a second selector spec
// "canary" whose selector overlaps exp's when both labels are set.
func selectorConfig(t *testing.T) *config.Config {
	t.Helper()
	cfg, err := config.Parse([]byte(`
namespaces: [ns, other]
specs:
  exp:
    trigger:
      group: apps
      version: v1
      resource: deployments
      selector: {matchLabels: {autox.dev/experiment: enabled}}
      maxObjects: 2
    releaseSpecs:
      job:
        chart: {repo: "https://charts.example", name: hello, version: 1.0.0}
        values: {token: s3cret-token}
  web:
    trigger: {group: apps, version: v1, resource: deployments, name: web, namespace: ns}
    releaseSpecs:
      a: {chart: {repo: "https://charts.example", name: hello, version: 1.0.0}}
  canary:
    trigger:
      group: apps
      version: v1
      resource: deployments
      namespace: ns
      selector: {matchExpressions: [{key: canary, operator: Exists}]}
    releaseSpecs:
      c: {chart: {repo: "https://charts.example", name: hello, version: 1.0.0}}
`), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

var version = map[string]string{"app.kubernetes.io/version": "1"}

func labels(extra ...string) map[string]string {
	l := map[string]string{"app.kubernetes.io/version": "1"}
	for i := 0; i+1 < len(extra); i += 2 {
		l[extra[i]] = extra[i+1]
	}
	return l
}

func TestObjectLabel(t *testing.T) {
	short := "web"
	if got := format.ObjectLabel(short); got != short || !format.ObjectLabelIsName(got) {
		t.Errorf("ObjectLabel(%q) = %q (is name %v)", short, got, format.ObjectLabelIsName(got))
	}
	long := strings.Repeat("a", 60) + "-" + strings.Repeat("b", 40)
	got := format.ObjectLabel(long)
	if len(got) != 63 || !strings.HasPrefix(got, long[:50]+"-") || got != format.ObjectLabel(long) {
		t.Errorf("ObjectLabel(long) = %q: want 63 characters, the first 50 of the name, '-', a stable hash", got)
	}
	if format.ObjectLabelIsName(got) {
		t.Errorf("a hashed label %q is taken for a whole name", got)
	}
	if other := format.ObjectLabel(long + "x"); other == got {
		t.Errorf("two long names share the label %q", got)
	}
	exact := strings.Repeat("c", 63)
	if format.ObjectLabel(exact) != exact {
		t.Errorf("a 63-character name must be its own label")
	}
}

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

// objectObservation observes object ns/a of spec exp.
func objectObservation(t *testing.T, cfg *config.Config, obj format.Object, trig TriggerRead, current ...*format.Release) Observation {
	t.Helper()
	spec, err := cfg.Specs["exp"].ForObject("exp", obj.Namespace, obj.Name)
	if err != nil {
		t.Fatal(err)
	}
	o := Observation{Spec: "exp", Config: spec, Object: obj, Instance: "autox", Trigger: trig, Current: current,
		ReleaseSpecs: map[string]ReleaseSpecObservation{"job": {Chart: ChartID{"hello", "1.0.0"}}},
		Now:          planNow, StaleAfter: planNow.Sub(planNow.Add(-300e9))}
	if trig.Found {
		o.Claimants = NewClaimIndex(cfg).Claimants("apps", "deployments", obj, trig.Labels)
	}
	return o
}

// objectRelease is the release spec exp's job makes for obj, in sync.
func objectRelease(t *testing.T, cfg *config.Config, obj format.Object, trig TriggerRead) *format.Release {
	spec, err := cfg.Specs["exp"].ForObject("exp", obj.Namespace, obj.Name)
	if err != nil {
		t.Fatal(err)
	}
	rs := spec.ReleaseSpecs["job"]
	return &format.Release{Name: rs.ReleaseName, Namespace: rs.Namespace, Spec: "exp", ReleaseSpec: "job", Instance: "autox",
		ObjectNamespace: obj.Namespace, ObjectName: format.ObjectLabel(obj.Name), Revision: 1, Status: release.StatusDeployed,
		ChartName: "hello", ChartVersion: "1.0.0", Values: DesiredValues(rs, spec.Trigger, trig.Labels), Modified: planNow, LastDeployedRevision: 1}
}

func TestPlanSelectorObject(t *testing.T) {
	cfg := selectorConfig(t)
	a := format.Object{Namespace: "ns", Name: "a"}
	selected := TriggerRead{Found: true, Labels: labels("autox.dev/experiment", "enabled")}
	step := func(o Observation) Step {
		t.Helper()
		res := Decide(o)
		if len(res.Steps) != 1 || len(res.Failed) != 0 {
			t.Fatalf("Decide = %+v, want one step", res)
		}
		return res.Steps[0]
	}

	s := step(objectObservation(t, cfg, a, selected))
	if s.Action != ActionInstall || s.Release != "a-job" || s.Namespace != "ns" || s.Object != "ns/a" {
		t.Errorf("new object: %+v, want install of ns/a-job for object ns/a", s)
	}
	if trig := s.Desired.Values["autox"].(map[string]interface{})["trigger"].(map[string]interface{}); trig["name"] != "a" || trig["namespace"] != "ns" {
		t.Errorf("injected trigger = %v, want object ns/a", trig)
	}

	rel := objectRelease(t, cfg, a, selected)
	if s := step(objectObservation(t, cfg, a, selected, rel)); s.Action != ActionNone {
		t.Errorf("in sync: %s (%s)", s.Action, s.Reason)
	}
	unselected := TriggerRead{Found: true, Labels: labels()}
	if s := step(objectObservation(t, cfg, a, unselected, rel)); s.Action != ActionUninstall || !strings.Contains(s.Reason, "no longer matches") {
		t.Errorf("no longer selected: %s (%s), want uninstall", s.Action, s.Reason)
	}
	if s := step(objectObservation(t, cfg, a, TriggerRead{}, rel)); s.Action != ActionUninstall {
		t.Errorf("deleted: %s (%s), want uninstall", s.Action, s.Reason)
	}
	noVersion := TriggerRead{Found: true, Labels: map[string]string{"autox.dev/experiment": "enabled"}}
	if s := step(objectObservation(t, cfg, a, noVersion, rel)); s.Action != ActionUninstall {
		t.Errorf("trigger label gone: %s (%s), want uninstall", s.Action, s.Reason)
	}

	// Another object of the same name in another namespace owns a-job in ns?
	// No: the release namespace follows the object. But a release of that
	// name made for another object is that object's.
	other := objectRelease(t, cfg, format.Object{Namespace: "other", Name: "a"}, selected)
	other.Namespace = "ns"
	o := objectObservation(t, cfg, a, selected)
	o.ReleaseSpecs["job"] = ReleaseSpecObservation{Chart: ChartID{"hello", "1.0.0"}, Other: other}
	if s := step(o); s.Action != ActionConflict || !strings.Contains(s.Reason, "object other/a") {
		t.Errorf("name taken by another object's release: %s (%s), want conflict naming it", s.Action, s.Reason)
	}

	// Over the bound: nothing new, and what it has stays.
	o = objectObservation(t, cfg, a, selected)
	o.OverLimit = true
	res := Decide(o)
	if res.Trigger != TriggerOverLimit || res.Steps[0].Action != ActionNone || !strings.Contains(res.Steps[0].Reason, "maxObjects (2)") {
		t.Errorf("over the bound: %s %+v", res.Trigger, res.Steps)
	}
	o = objectObservation(t, cfg, a, selected, rel)
	o.OverLimit = true
	if s := step(o); s.Action != ActionNone {
		t.Errorf("over the bound with a release: %s, want it kept", s.Action)
	}
}

func TestPlanConflict(t *testing.T) {
	cfg := selectorConfig(t)
	web := format.Object{Namespace: "ns", Name: "web"}
	both := TriggerRead{Found: true, Labels: labels("autox.dev/experiment", "enabled")}
	// The selector spec's view: nothing installed, nothing removed.
	res := Decide(objectObservation(t, cfg, web, both))
	if res.Trigger != TriggerConflict || len(res.Steps) != 1 || res.Steps[0].Action != ActionConflict ||
		!strings.Contains(res.TriggerReason, "exp, web") {
		t.Errorf("selector spec on a named trigger: %s %q %+v", res.Trigger, res.TriggerReason, res.Steps)
	}
	rel := objectRelease(t, cfg, web, both)
	unlabelled := TriggerRead{Found: true, Labels: map[string]string{"autox.dev/experiment": "enabled"}}
	res = Decide(objectObservation(t, cfg, web, unlabelled, rel))
	if res.Trigger != TriggerConflict || res.Steps[0].Action != ActionConflict || res.Steps[0].Changes() {
		t.Errorf("a conflict must not uninstall: %s %+v", res.Trigger, res.Steps)
	}
	// The named spec's view of the same object.
	named := Observation{Spec: "web", Config: cfg.Specs["web"], Instance: "autox", Trigger: both,
		Claimants:    NewClaimIndex(cfg).Claimants("apps", "deployments", web, both.Labels),
		ReleaseSpecs: map[string]ReleaseSpecObservation{"a": {Chart: ChartID{"hello", "1.0.0"}}}, Now: planNow}
	res = Decide(named)
	if res.Trigger != TriggerConflict || res.Steps[0].Action != ActionConflict || res.Steps[0].Object != "" {
		t.Errorf("named spec on a selected object: %s %+v", res.Trigger, res.Steps)
	}
	// No longer selected by exp, still named by web: not exp's object any
	// more, so its releases go; web's claim is no conflict for exp.
	unselected := TriggerRead{Found: true, Labels: labels()}
	o := objectObservation(t, cfg, web, unselected, rel)
	if len(o.Claimants) != 1 || o.Claimants[0] != "web" {
		t.Fatalf("claimants = %v", o.Claimants)
	}
	if res := Decide(o); res.Trigger == TriggerConflict || res.Steps[0].Action != ActionUninstall {
		t.Errorf("object that left exp's selector: %s %+v, want uninstall", res.Trigger, res.Steps)
	}
	// Deleted: a conflict needs an object; its releases go.
	res = Decide(objectObservation(t, cfg, web, TriggerRead{}, rel))
	if res.Steps[0].Action != ActionUninstall {
		t.Errorf("deleted object in conflict: %+v, want uninstall", res.Steps)
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

func TestTriggerObject(t *testing.T) {
	long := strings.Repeat("y", 80)
	rel := &format.Release{ObjectNamespace: "ns", ObjectName: format.ObjectLabel(long),
		Values: map[string]interface{}{"autox": map[string]interface{}{"trigger": map[string]interface{}{"name": long}}}}
	if got := rel.TriggerObject(); got != (format.Object{Namespace: "ns", Name: long}) {
		t.Errorf("TriggerObject = %v, want the whole name from the values", got)
	}
	rel.Values["autox"].(map[string]interface{})["trigger"].(map[string]interface{})["name"] = "forged"
	if got := rel.TriggerObject(); got.Name != format.ObjectLabel(long) {
		t.Errorf("values that do not give the label back were believed: %v", got)
	}
}

func TestPlanOutOfScope(t *testing.T) {
	cfg := selectorConfig(t)
	a := format.Object{Namespace: "ns", Name: "a"}
	selected := TriggerRead{Found: true, Labels: labels("autox.dev/experiment", "enabled")}
	o := objectObservation(t, cfg, a, selected, objectRelease(t, cfg, a, selected))
	o.OutOfScope = true
	if res := Decide(o); res.Steps[0].Action != ActionUninstall || !strings.Contains(res.Steps[0].Reason, "no longer covers") {
		t.Errorf("object out of the selector's namespaces: %+v, want uninstall", res.Steps)
	}
}
