package plan

import (
	"errors"
	"strings"
	"testing"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/internal/format"
	"helm.sh/helm/v4/pkg/release/common"
)

// TestPlan decides one spec from observations alone: no cluster, no clock.
func TestDecide(t *testing.T) {
	type want struct{ action, release, reason string }
	cases := []struct {
		name   string
		obs    Observation
		steps  []want
		failed []string // release spec ids
	}{
		{"nothing installed yet", observation(nil),
			[]want{{"install", "web-a", "trigger labelled, release not found"}, {"install", "web-b", "trigger labelled, release not found"}}, nil},
		{"in sync", observation(func(o *Observation) { o.Current = []*format.Release{deployed("a"), deployed("b")} }),
			[]want{{"unchanged", "web-a", "chart and values match"}, {"unchanged", "web-b", "chart and values match"}}, nil},
		{"new label value: upgrade, or reinstall for onChange reinstall", observation(func(o *Observation) {
			o.Current = []*format.Release{deployed("a"), deployed("b")}
			o.Trigger = TriggerRead{Found: true, Labels: map[string]string{"app.kubernetes.io/version": "3.0.0"}}
		}), []want{{"upgrade", "web-a", "values changed: .autox.trigger.labels.app.kubernetes.io/version"},
			{"reinstall", "web-b", "values changed: .autox.trigger.labels.app.kubernetes.io/version"}}, nil},
		{"chart version changed", observation(func(o *Observation) {
			o.Current = []*format.Release{deployed("a"), deployed("b")}
			o.ReleaseSpecs["a"] = ReleaseSpecObservation{Chart: ChartID{"hello", "1.1.0"}}
		}), []want{{"upgrade", "web-a", "chart hello 1.0.0 -> hello 1.1.0"}, {"unchanged", "web-b", "chart and values match"}}, nil},
		{"trigger gone", observation(func(o *Observation) {
			o.Current = []*format.Release{deployed("a"), deployed("b")}
			o.Trigger = TriggerRead{}
		}),
			[]want{{"uninstall", "web-a", "trigger not found"}, {"uninstall", "web-b", "trigger not found"}}, nil},
		{"label gone, nothing installed", observation(func(o *Observation) { o.Trigger = TriggerRead{Found: true} }),
			[]want{{"unchanged", "web-a", "release not found"}, {"unchanged", "web-b", "release not found"}}, nil},
		{"label gone", observation(func(o *Observation) {
			o.Current = []*format.Release{deployed("a")}
			o.Trigger = TriggerRead{Found: true}
		}),
			[]want{{"uninstall", "web-a", "label app.kubernetes.io/version missing"}, {"unchanged", "web-b", "release not found"}}, nil},
		{"spec removed", observation(func(o *Observation) { o.Config = nil; o.Current = []*format.Release{deployed("a"), deployed("b")} }),
			[]want{{"uninstall", "web-a", "spec removed from config"}, {"uninstall", "web-b", "spec removed from config"}}, nil},
		{"release spec removed, then the rest", observation(func(o *Observation) {
			o.Current = []*format.Release{with(deployed("a"), func(r *format.Release) { r.ReleaseSpec, r.Name = "gone", "web-gone" }), deployed("a")}
		}), []want{{"uninstall", "web-gone", "release spec removed from config"}, {"unchanged", "web-a", "chart and values match"},
			{"install", "web-b", "trigger labelled, release not found"}}, nil},
		{"release spec moved to another namespace", observation(func(o *Observation) {
			o.Current = []*format.Release{with(deployed("a"), func(r *format.Release) { r.Namespace = "old" })}
		}), []want{{"uninstall", "web-a", "release spec now wants ns/web-a"}, {"install", "web-a", "trigger labelled, release not found"},
			{"install", "web-b", "trigger labelled, release not found"}}, nil},
		{"a foreign release of the wanted name", observation(func(o *Observation) {
			o.ReleaseSpecs["a"] = ReleaseSpecObservation{Chart: ChartID{"hello", "1.0.0"}, Other: with(deployed("a"), func(r *format.Release) { r.Spec, r.ReleaseSpec, r.Instance = "", "", "" })}
		}), []want{{"conflict", "web-a", "without autox labels"}, {"install", "web-b", "trigger labelled, release not found"}}, nil},
		{"another instance's release of the wanted name", observation(func(o *Observation) {
			o.ReleaseSpecs["a"] = ReleaseSpecObservation{Chart: ChartID{"hello", "1.0.0"}, Other: with(deployed("a"), func(r *format.Release) { r.Instance = "team-b" })}
		}), []want{{"conflict", "web-a", `instance "team-b"`}, {"install", "web-b", "trigger labelled, release not found"}}, nil},
		{"an unreadable namespace fails only its release spec", observation(func(o *Observation) {
			o.Unread = map[string]error{"other": errors.New("forbidden")}
		}), []want{{"install", "web-a", "trigger labelled, release not found"}}, []string{"b"}},
		{"a removed spec with releases maybe in an unreadable namespace", observation(func(o *Observation) {
			o.Config, o.Current, o.Unread = nil, []*format.Release{deployed("a")}, map[string]error{"other": errors.New("forbidden")}
		}), []want{{"uninstall", "web-a", "spec removed from config"}}, nil},
		{"a chart that cannot be read fails its release spec only", observation(func(o *Observation) {
			o.ReleaseSpecs["b"] = ReleaseSpecObservation{Err: errors.New("cannot load chart")}
		}), []want{{"install", "web-a", "trigger labelled, release not found"}}, []string{"b"}},
		{"a young pending upgrade waits", observation(func(o *Observation) {
			o.Current = []*format.Release{with(deployed("a"), func(r *format.Release) { r.Status, r.Modified, r.Revision = common.StatusPendingUpgrade, planNow, 3 }), deployed("b")}
		}), []want{{"wait", "web-a", "pending-upgrade"}, {"unchanged", "web-b", "chart and values match"}}, nil},
		{"a stale pending upgrade rolls back", observation(func(o *Observation) {
			o.Current = []*format.Release{with(deployed("a"), func(r *format.Release) { r.Status, r.Revision = common.StatusPendingUpgrade, 3 }), deployed("b")}
		}), []want{{"rollback", "web-a", "left pending-upgrade"}, {"unchanged", "web-b", "chart and values match"}}, nil},
		{"release spec id renamed: adopted, not removed", observation(func(o *Observation) {
			o.Current = []*format.Release{with(deployed("a"), func(r *format.Release) { r.ReleaseSpec = "was-a" }), deployed("b")}
		}), []want{{"adopt", "web-a", "release of spec web, release spec was-a, which left the config; chart and values match"},
			{"unchanged", "web-b", "chart and values match"}}, nil},
		{"release spec id renamed with new values: one upgrade", observation(func(o *Observation) {
			o.Current = []*format.Release{with(deployed("a"), func(r *format.Release) {
				r.ReleaseSpec = "was-a"
				r.Values = map[string]interface{}{"token": "old-token", "autox": r.Values["autox"]}
			})}
		}), []want{{"upgrade", "web-a", "release spec was-a, which left the config; values changed: .token"},
			{"install", "web-b", "trigger labelled, release not found"}}, nil},
		{"release spec id renamed, trigger gone: the new owner removes it", observation(func(o *Observation) {
			o.Current = []*format.Release{with(deployed("a"), func(r *format.Release) { r.ReleaseSpec = "was-a" })}
			o.Trigger = TriggerRead{}
		}), []want{{"uninstall", "web-a", "trigger not found"}, {"unchanged", "web-b", "release not found"}}, nil},
		{"spec renamed: the release of the removed spec is adopted", observation(func(o *Observation) {
			o.ReleaseSpecs["a"] = ReleaseSpecObservation{Chart: ChartID{"hello", "1.0.0"}, Other: with(deployed("a"), func(r *format.Release) { r.Spec = "old" })}
		}), []want{{"adopt", "web-a", "release of spec old, release spec a"}, {"install", "web-b", "trigger labelled, release not found"}}, nil},
		{"spec renamed: the removed spec leaves its releases to the new one", observation(func(o *Observation) {
			o.Config, o.Current = nil, []*format.Release{deployed("a"), deployed("b")}
			o.InForce = inForce(map[string]*config.Spec{"renamed": planSpec()})
		}), nil, nil},
		{"the old owner is still in the config: a conflict", observation(func(o *Observation) {
			o.ReleaseSpecs["a"] = ReleaseSpecObservation{Chart: ChartID{"hello", "1.0.0"}, Other: with(deployed("a"), func(r *format.Release) { r.Spec = "old" })}
			o.InForce = inForce(map[string]*config.Spec{"web": o.Config, "old": withSpec(planSpec(), func(s *config.Spec) { s.ReleaseSpecs["a"].ReleaseName = "old-a" })})
		}), []want{{"conflict", "web-a", `belongs to spec "old", release spec "a"`}, {"install", "web-b", "trigger labelled, release not found"}}, nil},
		{"a release naming an object is not a named spec's to adopt", observation(func(o *Observation) {
			o.ReleaseSpecs["a"] = ReleaseSpecObservation{Chart: ChartID{"hello", "1.0.0"}, Other: with(deployed("a"), func(r *format.Release) {
				r.Spec, r.ObjectNamespace, r.ObjectName = "old", "ns", "web"
			})}
		}), []want{{"conflict", "web-a", `belongs to spec "old"`}, {"install", "web-b", "trigger labelled, release not found"}}, nil},
		{"two specs want the removed spec's release: nobody adopts it", observation(func(o *Observation) {
			o.Config, o.Current = nil, []*format.Release{deployed("a")}
			o.InForce = inForce(map[string]*config.Spec{"one": planSpec(), "two": planSpec()})
		}), []want{{"uninstall", "web-a", "spec removed from config"}}, nil},
		{"a failed release never deployed is reinstalled", observation(func(o *Observation) {
			o.Current = []*format.Release{with(deployed("a"), func(r *format.Release) { r.Status, r.Revision, r.LastDeployedRevision = common.StatusFailed, 1, 0 }), deployed("b")}
		}), []want{{"reinstall", "web-a", "none was deployed"}, {"unchanged", "web-b", "chart and values match"}}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := Decide(tc.obs)
			if len(res.Steps) != len(tc.steps) {
				t.Fatalf("%d steps, want %d: %+v", len(res.Steps), len(tc.steps), res.Steps)
			}
			for i, w := range tc.steps {
				s := res.Steps[i]
				if string(s.Action) != w.action || s.Release != w.release || !strings.Contains(s.Reason, w.reason) {
					t.Errorf("step %d = %s %s %q, want %s %s with %q", i, s.Action, s.Release, s.Reason, w.action, w.release, w.reason)
				}
			}
			var failed []string
			for _, f := range res.Failed {
				failed = append(failed, f.ReleaseSpec)
			}
			if strings.Join(failed, ",") != strings.Join(tc.failed, ",") {
				t.Errorf("failed release specs %v, want %v", failed, tc.failed)
			}
			if (tc.obs.Config == nil && len(tc.obs.Unread) > 0) != (res.Incomplete != nil) {
				t.Errorf("Incomplete = %v", res.Incomplete)
			}
		})
	}
}

// TestDecideUndecodable: a release whose newest record cannot be decoded
// fails the release spec that wants it with the error naming the record, and
// no step touches it; a release no release spec wants any more leaves the
// plan incomplete instead of being uninstalled; the other release specs go on.
func TestDecideUndecodable(t *testing.T) {
	broken := errors.New("release ns/web-a: its newest record, Secret sh.helm.release.v1.web-a.v3 (revision 3), cannot be decoded")
	newLabel := TriggerRead{Found: true, Labels: map[string]string{"app.kubernetes.io/version": "3.0.0"}}
	cases := []struct {
		name       string
		obs        Observation
		steps      []string // action release
		failed     string   // the release spec failed with broken, "" for none
		incomplete bool
	}{
		{"wanted: the release spec fails, the other upgrades", observation(func(o *Observation) {
			o.Current, o.Trigger = []*format.Release{deployed("b")}, newLabel
			o.Undecodable = map[string]error{"ns/web-a": broken}
		}), []string{"reinstall web-b"}, "a", false},
		{"trigger gone: not uninstalled", observation(func(o *Observation) {
			o.Current, o.Trigger = []*format.Release{deployed("b")}, TriggerRead{}
			o.Undecodable = map[string]error{"ns/web-a": broken}
		}), []string{"uninstall web-b"}, "a", false},
		{"release spec removed: incomplete, not uninstalled", observation(func(o *Observation) {
			o.Current = []*format.Release{deployed("a"), deployed("b")}
			o.Undecodable = map[string]error{"ns/web-gone": broken}
		}), []string{"unchanged web-a", "unchanged web-b"}, "", true},
		{"spec removed: incomplete, not uninstalled", observation(func(o *Observation) {
			o.Config, o.Current = nil, []*format.Release{deployed("b")}
			o.Undecodable = map[string]error{"ns/web-a": broken}
		}), []string{"uninstall web-b"}, "", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := Decide(tc.obs)
			var steps []string
			for _, s := range res.Steps {
				steps = append(steps, string(s.Action)+" "+s.Release)
			}
			if strings.Join(steps, ", ") != strings.Join(tc.steps, ", ") {
				t.Errorf("steps %v, want %v", steps, tc.steps)
			}
			var failed []string
			for _, f := range res.Failed {
				failed = append(failed, f.ReleaseSpec)
				if !errors.Is(f.Err, broken) && !strings.Contains(f.Err.Error(), broken.Error()) {
					t.Errorf("release spec %s failed with %v, want the record's error", f.ReleaseSpec, f.Err)
				}
			}
			if strings.Join(failed, ",") != tc.failed {
				t.Errorf("failed release specs %v, want %q", failed, tc.failed)
			}
			if (res.Incomplete != nil) != tc.incomplete || (tc.incomplete && !strings.Contains(res.Incomplete.Error(), broken.Error())) {
				t.Errorf("Incomplete = %v, want the record's error: %v", res.Incomplete, tc.incomplete)
			}
		})
	}
}

// TestPlanDesired: what an install makes — the user's values plus the
// injected `autox` key, the digest a quiet pass compares, the next revision.
func TestPlanDesired(t *testing.T) {
	res := Decide(observation(func(o *Observation) {
		o.Trigger = TriggerRead{Found: true, Labels: map[string]string{"app.kubernetes.io/version": "3.0.0"}}
		o.Current = []*format.Release{deployed("a")}
	}))
	up := res.Steps[0]
	if up.Action != ActionUpgrade || up.Desired == nil || up.Desired.Revision != 3 || up.Revision != 2 {
		t.Fatalf("upgrade step %+v", up)
	}
	spec := planSpec()
	want := DesiredValues(spec.ReleaseSpecs["a"], spec.Trigger, map[string]string{"app.kubernetes.io/version": "3.0.0"})
	if d, _ := ValuesDiff(want, up.Desired.Values); d != "" {
		t.Errorf("desired values differ at %s", d)
	}
	digest, _ := format.Digest("hello", "1.0.0", want)
	if up.Desired.Digest != digest {
		t.Errorf("digest %s, want %s", up.Desired.Digest, digest)
	}
	if install := res.Steps[1]; install.Action != ActionInstall || install.Desired.Revision != 1 || install.Desired.ChartName != "job" {
		t.Errorf("install step %+v %+v", install, install.Desired)
	}
	// Plan only decides: the observation is not changed.
	if _, has := spec.ReleaseSpecs["a"].Values[config.InjectedValuesKey]; has {
		t.Error("the config's values were modified")
	}
}

// TestPlanHidesValues: a failure's text, and every step's redactor, hide the
// release's values — desired, current and last deployed.
func TestPlanHidesValues(t *testing.T) {
	res := Decide(observation(func(o *Observation) {
		o.ReleaseSpecs["a"] = ReleaseSpecObservation{Err: errors.New(`Invalid value: "s3cret-token"`)}
		o.Current = []*format.Release{with(deployed("b"), func(r *format.Release) { r.DeployedValues = map[string]interface{}{"old": "older-s3cret"} })}
	}))
	if len(res.Failed) != 1 || strings.Contains(res.Failed[0].Err.Error(), "s3cret-token") || !strings.Contains(res.Failed[0].Err.Error(), "***") {
		t.Fatalf("failure %+v", res.Failed)
	}
	if got := res.Steps[0].Hide.String("rolled back to older-s3cret"); strings.Contains(got, "older-s3cret") {
		t.Errorf("the last deployed revision's values are not hidden: %q", got)
	}
}
