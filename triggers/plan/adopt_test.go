package plan

import (
	"errors"
	"strings"
	"testing"

	"github.com/autox-dev/autox/internal/format"
	"helm.sh/helm/v4/pkg/release/common"
)

// TestAdopterOf: a release is handed over when its owner left the config and
// exactly one release spec wants its name and namespace with the object
// labels it has; from a record alone only when the object's name is whole.
func TestAdopterOf(t *testing.T) {
	cfg := selectorConfig(t)
	selected := TriggerRead{Found: true, Labels: labels("autox.dev/experiment", "enabled")}
	a := format.Object{Namespace: "ns", Name: "a"}
	long := format.Object{Namespace: "ns", Name: strings.Repeat("l", 70)}
	renamed := func(rel *format.Release) *format.Release { rel.Spec = "old"; return rel }
	cases := []struct {
		name string
		rel  *format.Release
		// want is spec/release spec/object of the adopter, "" for none;
		// fromRecord the same from the record's labels.
		want, fromRecord string
	}{
		{"a renamed named spec's release", renamed(namedRelease(t, cfg, selected)), "web/a/", "web/a/"},
		{"a renamed selector spec's release", renamed(objectRelease(t, cfg, a, selected)), "exp/job/ns/a", "exp/job/ns/a"},
		{"a long object name: only the release tells it", renamed(objectRelease(t, cfg, long, selected)),
			"exp/job/" + long.String(), ""},
		{"the owner is still in the config", namedRelease(t, cfg, selected), "", ""},
		{"a renamed release spec id", with(namedRelease(t, cfg, selected), func(r *format.Release) { r.ReleaseSpec = "was-a" }), "web/a/", "web/a/"},
		{"no release spec wants the name", with(renamed(namedRelease(t, cfg, selected)), func(r *format.Release) { r.Name = "nobody" }), "", ""},
		{"object labels on a named spec's name", with(renamed(namedRelease(t, cfg, selected)), func(r *format.Release) {
			r.ObjectNamespace, r.ObjectName = "ns", "web"
		}), "", ""},
		{"an object out of the selector's scope", with(renamed(objectRelease(t, cfg, a, selected)), func(r *format.Release) {
			r.ObjectNamespace = "elsewhere"
		}), "", ""},
		{"another instance's release", with(renamed(namedRelease(t, cfg, selected)), func(r *format.Release) { r.Instance = "team-b" }), "", ""},
		{"not autox's", with(namedRelease(t, cfg, selected), func(r *format.Release) { r.Spec, r.ReleaseSpec, r.Instance = "", "", "" }), "", ""},
	}
	name := func(o format.Owner, ok bool) string {
		if !ok {
			return ""
		}
		return o.Spec + "/" + o.ReleaseSpec + "/" + o.Object.String()
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := name(AdopterOf(cfg, "autox", tc.rel)); got != tc.want {
				t.Errorf("AdopterOf = %q, want %q", got, tc.want)
			}
			if tc.rel.Instance != "autox" {
				return // the inventory's records are all its instance's
			}
			rec := format.Record{Name: tc.rel.Name, Namespace: tc.rel.Namespace, Spec: tc.rel.Spec, ReleaseSpec: tc.rel.ReleaseSpec,
				Instance: tc.rel.Instance, ObjectNamespace: tc.rel.ObjectNamespace, ObjectName: tc.rel.ObjectName}
			if got := name(AdopterOfRecord(cfg, rec)); got != tc.fromRecord {
				t.Errorf("AdopterOfRecord = %q, want %q", got, tc.fromRecord)
			}
			orphan := len(OrphanSpecs(cfg, []format.Record{rec})) > 0
			if want := !WantedBy(cfg, rec) && tc.fromRecord == ""; orphan != want {
				t.Errorf("OrphanSpecs lists it: %v, want %v", orphan, want)
			}
		})
	}
}

// TestAdoptAnObject: a selector spec renamed keeps each object's release:
// the object's reconcile under the new name adopts it, and the sweep of
// the old name would not remove it.
func TestAdoptAnObject(t *testing.T) {
	cfg := selectorConfig(t)
	selected := TriggerRead{Found: true, Labels: labels("autox.dev/experiment", "enabled")}
	a := format.Object{Namespace: "ns", Name: "a"}
	old := objectRelease(t, cfg, a, selected)
	old.Spec = "old"
	o := objectObservation(t, cfg, a, selected)
	o.ReleaseSpecs["job"] = ReleaseSpecObservation{Chart: ChartID{"hello", "1.0.0"}, Other: old}
	res := Decide(o)
	if len(res.Steps) != 1 || res.Steps[0].Action != ActionAdopt || res.Steps[0].AdoptFrom == nil || res.Steps[0].AdoptFrom.Spec != "old" {
		t.Fatalf("steps %+v", res.Steps)
	}
	removed := Observation{Spec: "old", Instance: "autox", InForce: cfg, Object: a, Current: []*format.Release{old}, Now: planNow}
	if res := Decide(removed); len(res.Steps) != 0 {
		t.Errorf("the removed spec's reconcile decides %+v", res.Steps)
	}
}

// TestReplacements: a release whose release spec now wants another
// namespace or name is removed only after the new one passed a dry run
// (ReplacedBy), and not at all when the new one cannot be decided.
func TestReplacements(t *testing.T) {
	moved := func(r *format.Release) { r.Namespace = "old" }
	cases := []struct {
		name string
		obs  Observation
		// removal is the removal step's ReplacedBy, "-" for no removal step.
		removal string
	}{
		{"moved: the install proves the new one first", observation(func(o *Observation) {
			o.Current = []*format.Release{with(deployed("a"), moved)}
		}), "a"},
		{"renamed in its namespace: the same", observation(func(o *Observation) {
			o.Current = []*format.Release{with(deployed("a"), func(r *format.Release) { r.Name = "old-a" })}
		}), "a"},
		{"moved, the new one's chart cannot be read: the old one stays", observation(func(o *Observation) {
			o.Current = []*format.Release{with(deployed("a"), moved)}
			o.ReleaseSpecs["a"] = ReleaseSpecObservation{Err: errNoChart}
		}), "-"},
		{"moved, the new namespace cannot be read: the old one stays", observation(func(o *Observation) {
			o.Current = []*format.Release{with(deployed("b"), moved)}
			o.Unread = map[string]error{"other": errNoChart}
		}), "-"},
		{"moved while the trigger is gone: removed", observation(func(o *Observation) {
			o.Current = []*format.Release{with(deployed("a"), moved)}
			o.Trigger = TriggerRead{}
		}), ""},
		{"moved, the new place is another's release: the old one stays", observation(func(o *Observation) {
			o.Current = []*format.Release{with(deployed("a"), moved)}
			o.ReleaseSpecs["a"] = ReleaseSpecObservation{Chart: ChartID{"hello", "1.0.0"},
				Other: with(deployed("a"), func(r *format.Release) { r.Spec, r.ReleaseSpec, r.Instance = "", "", "" })}
		}), "-"},
		{"moved, the new place holds its failed release: the old one stays", observation(func(o *Observation) {
			o.Current = []*format.Release{with(deployed("a"), moved), with(deployed("a"), func(r *format.Release) {
				r.Status, r.LastDeployedRevision = common.StatusFailed, 0
			})}
		}), "-"},
		{"moved, the new one deployed in sync: removed", observation(func(o *Observation) {
			o.Current = []*format.Release{with(deployed("a"), moved), deployed("a")}
		}), ""},
		{"release spec removed: removed", observation(func(o *Observation) {
			o.Current = []*format.Release{with(deployed("a"), func(r *format.Release) { r.ReleaseSpec, r.Name = "gone", "web-gone" })}
		}), ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := "-"
			for _, s := range Decide(tc.obs).Steps {
				if s.Action == ActionUninstall {
					got = s.ReplacedBy
				}
			}
			if got != tc.removal {
				t.Errorf("removal ReplacedBy = %q, want %q", got, tc.removal)
			}
		})
	}
}

var errNoChart = errors.New("cannot load chart")
