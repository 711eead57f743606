package plan

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/internal/format"
	"helm.sh/helm/v4/pkg/release/common"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Builders of the policy decisions: a release spec's policies (policy), a
// failed upgrade (failedUpgrade) or install (failedInstall) of web-a, and
// failures recorded for what web-a would install now (recorded).

func policy(id string, mut func(rs *config.ReleaseSpec)) func(o *Observation) {
	return func(o *Observation) { mut(o.Config.ReleaseSpecs[id]) }
}

func remediation(retries int, onFailure string) func(rs *config.ReleaseSpec) {
	return func(rs *config.ReleaseSpec) {
		rs.Remediation = &config.Remediation{Retries: &retries, OnFailure: onFailure}
	}
}

// failedUpgrade is web-a's revision 3, failed, after revision 2 was deployed.
func failedUpgrade() *format.Release {
	return with(deployed("a"), func(r *format.Release) {
		r.Status, r.Revision, r.DeployedBefore, r.LastDeployedRevision = common.StatusFailed, 3, true, 2
	})
}

// failedInstall is web-a's revision 1, failed, never deployed.
func failedInstall() *format.Release {
	return with(deployed("a"), func(r *format.Release) { r.Status, r.Revision, r.LastDeployedRevision = common.StatusFailed, 1, 0 })
}

// recorded is o with failures recorded for release spec id, for what o's
// plan would install (fresh) or for something else.
func recorded(id string, failures int, fresh bool) func(o *Observation) {
	return func(o *Observation) {
		fp := "another-config"
		for _, s := range Decide(*o).Steps {
			if s.ReleaseSpec == id && !s.removal && fresh {
				fp = s.Retries.Fingerprint
			}
		}
		ro := o.ReleaseSpecs[id]
		ro.Attempts = &Attempts{Fingerprint: fp, Failures: failures}
		o.ReleaseSpecs[id] = ro
	}
}

// recordHolds is o with a record of managed namespaces that holds these.
func recordHolds(namespaces ...string) func(o *Observation) {
	return func(o *Observation) {
		o.Managed = &ManagedNamespaces{ConfigMap: "home/autox-namespaces-autox", Namespaces: namespaces}
	}
}

func all(muts ...func(o *Observation)) func(o *Observation) {
	return func(o *Observation) {
		for _, m := range muts {
			m(o)
		}
	}
}

func current(rels ...*format.Release) func(o *Observation) {
	return func(o *Observation) { o.Current = rels }
}

var (
	triggerGone = func(o *Observation) { o.Trigger = TriggerRead{} }
	newLabel    = func(o *Observation) {
		o.Trigger = TriggerRead{Found: true, Labels: map[string]string{"app.kubernetes.io/version": "3.0.0"}}
	}
	suspendSpec  = func(o *Observation) { o.Config.Suspend = true }
	bDependsOnA  = policy("b", func(rs *config.ReleaseSpec) { rs.DependsOn = []string{"a"} })
	bothDeployed = current(deployed("a"), deployed("b"))
)

// TestDecidePolicies: suspend holds every write with what it would be,
// remediation stops attempts and then rolls back or uninstalls only what it
// may, the timeout moves the unlock age, and dependsOn orders the steps.
func TestDecidePolicies(t *testing.T) {
	type want struct{ action, release, pending, reason string }
	cases := []struct {
		name   string
		obs    Observation
		steps  []want
		failed []string
	}{
		// Suspend.
		{"a suspended spec whose trigger went: no uninstall", observation(all(suspendSpec, bothDeployed, triggerGone)),
			[]want{{"suspended", "web-a", "uninstall", "spec suspended; otherwise: uninstall (trigger not found)"}, {"suspended", "web-b", "uninstall", "trigger not found"}}, nil},
		{"a suspended spec relabelled: no upgrade, no reinstall", observation(all(suspendSpec, bothDeployed, newLabel)),
			[]want{{"suspended", "web-a", "upgrade", "values changed"}, {"suspended", "web-b", "reinstall", "values changed"}}, nil},
		{"a suspended spec in sync says so", observation(all(suspendSpec, bothDeployed)),
			[]want{{"suspended", "web-a", "unchanged", "chart and values match"}, {"suspended", "web-b", "unchanged", "chart and values match"}}, nil},
		{"a suspended spec keeps a dropped release spec's release", observation(all(suspendSpec, current(
			with(deployed("a"), func(r *format.Release) { r.ReleaseSpec, r.Name = "gone", "web-gone" }), deployed("a"), deployed("b")))),
			[]want{{"suspended", "web-gone", "uninstall", "release spec removed from config"}, {"suspended", "web-a", "unchanged", ""}, {"suspended", "web-b", "unchanged", ""}}, nil},
		{"a suspended spec leaves a stale release locked", observation(all(suspendSpec, current(
			with(deployed("a"), func(r *format.Release) { r.Status, r.Revision = common.StatusPendingUpgrade, 3 }), deployed("b")))),
			[]want{{"suspended", "web-a", "rollback", "left pending-upgrade"}, {"suspended", "web-b", "unchanged", ""}}, nil},
		{"a suspended release spec only holds itself", observation(all(policy("b", func(rs *config.ReleaseSpec) { rs.Suspend = true }), bothDeployed, newLabel)),
			[]want{{"upgrade", "web-a", "", "values changed"}, {"suspended", "web-b", "reinstall", "release spec suspended; otherwise: reinstall"}}, nil},
		{"a suspended release spec moved: its old release stays", observation(all(policy("a", func(rs *config.ReleaseSpec) { rs.Suspend = true }),
			current(with(deployed("a"), func(r *format.Release) { r.Namespace = "old" }), deployed("b")))),
			[]want{{"suspended", "web-a", "uninstall", "release spec now wants ns/web-a"}, {"suspended", "web-a", "install", ""}, {"unchanged", "web-b", "", ""}}, nil},
		{"a suspended spec removed from the file is a removal like any other", observation(all(suspendSpec, bothDeployed, func(o *Observation) { o.Config = nil })),
			[]want{{"uninstall", "web-a", "", "spec removed from config"}, {"uninstall", "web-b", "", "spec removed from config"}}, nil},
		{"a suspended selector spec's releases of no object stay", Observation{Spec: "web", Instance: "autox", Unattributed: true, SpecSuspended: true,
			Current: []*format.Release{deployed("a")}, Now: planNow, Defaults: config.PolicyDefaults{Timeout: time.Minute - config.StaleGrace}},
			[]want{{"suspended", "web-a", "uninstall", "no object's release"}}, nil},

		// Remediation.
		{"retries left: the upgrade is tried again", observation(all(policy("a", remediation(2, config.OnFailureRollback)), current(failedUpgrade(), deployed("b")), recorded("a", 2, true))),
			[]want{{"upgrade", "web-a", "", "revision 3 is failed"}, {"unchanged", "web-b", "", ""}}, nil},
		{"retries used up, keep: no further attempt", observation(all(policy("a", remediation(2, config.OnFailureKeep)), current(failedUpgrade(), deployed("b")), recorded("a", 3, true))),
			[]want{{"exhausted", "web-a", "upgrade", "retries used up: 3 failed attempts of this config, chart and trigger (retries 2); onFailure keep"}, {"unchanged", "web-b", "", ""}}, nil},
		{"retries used up, rollback: back to the last deployed revision", observation(all(policy("a", remediation(2, config.OnFailureRollback)), current(failedUpgrade(), deployed("b")), recorded("a", 3, true))),
			[]want{{"rollback", "web-a", "", "onFailure rollback: back to revision 2"}, {"unchanged", "web-b", "", ""}}, nil},
		{"rolled back: the upgrade is not tried again", observation(all(policy("a", remediation(0, config.OnFailureRollback)), current(deployed("a"), deployed("b")), newLabel, recorded("a", 1, true))),
			[]want{{"exhausted", "web-a", "upgrade", "the release runs its last deployed revision"}, {"reinstall", "web-b", "", ""}}, nil},
		{"retries used up, uninstall: never a release that was deployed", observation(all(policy("a", remediation(1, config.OnFailureUninstall)), current(failedUpgrade(), deployed("b")), recorded("a", 2, true))),
			[]want{{"exhausted", "web-a", "upgrade", "onFailure uninstall does not apply: a release that was once deployed is never uninstalled"}, {"unchanged", "web-b", "", ""}}, nil},
		{"retries used up, uninstall: a failed install goes", observation(all(policy("a", remediation(2, config.OnFailureUninstall)), current(failedInstall(), deployed("b")), recorded("a", 3, true))),
			[]want{{"uninstall", "web-a", "", "onFailure uninstall: the release was never deployed"}, {"unchanged", "web-b", "", ""}}, nil},
		{"uninstalled: not installed again", observation(all(policy("a", remediation(2, config.OnFailureUninstall)), current(deployed("b")), recorded("a", 3, true))),
			[]want{{"exhausted", "web-a", "install", "no release"}, {"unchanged", "web-b", "", ""}}, nil},
		{"retries used up, rollback: nothing to go back to", observation(all(policy("a", remediation(0, config.OnFailureRollback)), current(failedInstall(), deployed("b")), recorded("a", 1, true))),
			[]want{{"exhausted", "web-a", "reinstall", "onFailure rollback does not apply: no revision was deployed"}, {"unchanged", "web-b", "", ""}}, nil},
		{"failures of another config do not count", observation(all(policy("a", remediation(0, config.OnFailureUninstall)), current(failedInstall(), deployed("b")), recorded("a", 5, false))),
			[]want{{"reinstall", "web-a", "", "none was deployed"}, {"unchanged", "web-b", "", ""}}, nil},
		{"a trigger gone uninstalls whatever the failures", observation(all(policy("a", remediation(0, config.OnFailureKeep)), current(failedUpgrade(), deployed("b")), recorded("a", 1, true), triggerGone)),
			[]want{{"uninstall", "web-a", "", "trigger not found"}, {"uninstall", "web-b", "", ""}}, nil},

		// Timeout: the unlock age.
		{"a short timeout makes a pending upgrade stale sooner", observation(all(policy("a", func(rs *config.ReleaseSpec) { rs.Timeout = "1m" }), current(
			with(deployed("a"), func(r *format.Release) {
				r.Status, r.Revision, r.Modified = common.StatusPendingUpgrade, 3, planNow.Add(-2*time.Minute)
			}), deployed("b")))),
			[]want{{"rollback", "web-a", "", "left pending-upgrade for 2m0s"}, {"unchanged", "web-b", "", ""}}, nil},
		{"by default the same pending upgrade is young", observation(current(
			with(deployed("a"), func(r *format.Release) {
				r.Status, r.Revision, r.Modified = common.StatusPendingUpgrade, 3, planNow.Add(-2*time.Minute)
			}), deployed("b"))),
			[]want{{"wait", "web-a", "", "pending-upgrade since 2m0s"}, {"unchanged", "web-b", "", ""}}, nil},

		// The record of managed namespaces.
		{"an install into a namespace not recorded waits", observation(recordHolds("ns")),
			[]want{{"install", "web-a", "", ""}, {"wait", "web-b", "install", "namespace other is not recorded in ConfigMap home/autox-namespaces-autox yet"}}, nil},
		{"an upgrade there goes ahead, a reinstall waits", observation(all(recordHolds(), bothDeployed, newLabel)),
			[]want{{"upgrade", "web-a", "", "values changed"}, {"wait", "web-b", "reinstall", "namespace other is not recorded"}}, nil},
		{"a record that cannot be read holds every install, saying why", observation(all(recordHolds(), func(o *Observation) {
			o.Managed.Err = errors.New("configmaps is forbidden")
		})),
			[]want{{"wait", "web-a", "install", "(configmaps is forbidden)"}, {"wait", "web-b", "install", "(configmaps is forbidden)"}}, nil},
		{"its dependents wait with it", observation(all(recordHolds("other"), bDependsOnA)),
			[]want{{"wait", "web-a", "install", "namespace ns is not recorded"}, {"wait", "web-b", "install", "waits for release spec a"}}, nil},
		{"the removal it replaces waits with it", observation(all(recordHolds("old", "other"), current(with(deployed("a"), func(r *format.Release) { r.Namespace = "old" })))),
			[]want{{"wait", "web-a", "uninstall", "waits for the install of its replacement"}, {"wait", "web-a", "install", "namespace ns is not recorded"},
				{"install", "web-b", "", ""}}, nil},

		// dependsOn.
		{"installs in order", observation(bDependsOnA),
			[]want{{"install", "web-a", "", ""}, {"install", "web-b", "", ""}}, nil},
		{"a dependency in sync: no wait", observation(all(bDependsOnA, current(deployed("a")))),
			[]want{{"unchanged", "web-a", "", ""}, {"install", "web-b", "", ""}}, nil},
		{"a dependency locked: wait", observation(all(bDependsOnA, current(with(deployed("a"), func(r *format.Release) { r.Status, r.Modified = common.StatusPendingInstall, planNow })))),
			[]want{{"wait", "web-a", "", "pending-install"}, {"wait", "web-b", "install", "waits for release spec a: release ns/web-a is not deployed: wait"}}, nil},
		{"a dependency that cannot be decided: wait", observation(all(bDependsOnA, func(o *Observation) {
			o.ReleaseSpecs["a"] = ReleaseSpecObservation{Err: errors.New("cannot load chart")}
		})),
			[]want{{"wait", "web-b", "install", "waits for release spec a: it could not be decided"}}, []string{"a"}},
		{"a dependency suspended before it was installed: wait", observation(all(bDependsOnA, policy("a", func(rs *config.ReleaseSpec) { rs.Suspend = true }))),
			[]want{{"suspended", "web-a", "install", ""}, {"wait", "web-b", "install", "waits for release spec a: release ns/web-a is not deployed: suspended"}}, nil},
		{"a dependency suspended while deployed: go ahead", observation(all(bDependsOnA, policy("a", func(rs *config.ReleaseSpec) { rs.Suspend = true }), bothDeployed, newLabel)),
			[]want{{"suspended", "web-a", "upgrade", ""}, {"reinstall", "web-b", "", ""}}, nil},
		{"uninstalls in reverse", observation(all(bDependsOnA, bothDeployed, triggerGone)),
			[]want{{"uninstall", "web-a", "", "trigger not found"}, {"uninstall", "web-b", "", "trigger not found"}}, nil},
		{"a dependent that keeps its release holds the uninstall", observation(all(bDependsOnA, policy("b", func(rs *config.ReleaseSpec) { rs.Suspend = true }), bothDeployed, triggerGone)),
			[]want{{"wait", "web-a", "uninstall", "waits for release spec b: it depends on this one and keeps release other/web-b: suspended"}, {"suspended", "web-b", "uninstall", ""}}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := Decide(tc.obs)
			if len(res.Steps) != len(tc.steps) {
				t.Fatalf("%d steps, want %d: %+v", len(res.Steps), len(tc.steps), res.Steps)
			}
			for i, w := range tc.steps {
				s := res.Steps[i]
				if string(s.Action) != w.action || s.Release != w.release || string(s.Pending) != w.pending || !strings.Contains(s.Reason, w.reason) {
					t.Errorf("step %d = %s %s (pending %q) %q, want %s %s (pending %q) with %q", i, s.Action, s.Release, s.Pending, s.Reason, w.action, w.release, w.pending, w.reason)
				}
				if s.Action == ActionSuspended || s.Action == ActionExhausted || s.Action == ActionWait {
					if s.Changes() {
						t.Errorf("step %d (%s) counts as a change", i, s.Action)
					}
				}
			}
			var failed []string
			for _, f := range res.Failed {
				failed = append(failed, f.ReleaseSpec)
			}
			if strings.Join(failed, ",") != strings.Join(tc.failed, ",") {
				t.Errorf("failed release specs %v, want %v", failed, tc.failed)
			}
		})
	}
}

// TestDecideOrder: what waits for what in one plan, in both directions,
// and which steps are free to run at once.
func TestDecideOrder(t *testing.T) {
	after := func(res Plan) map[string]string {
		out := map[string]string{}
		for _, s := range res.Steps {
			out[s.Release] = strings.Join(s.After, ",")
		}
		return out
	}
	if got := after(Decide(observation(bDependsOnA))); got["web-a"] != "" || got["web-b"] != "a" {
		t.Errorf("installs: after = %v, want web-b after a", got)
	}
	if got := after(Decide(observation(all(bDependsOnA, bothDeployed, triggerGone)))); got["web-a"] != "b" || got["web-b"] != "" {
		t.Errorf("uninstalls: after = %v, want web-a after b", got)
	}
	if got := after(Decide(observation(all(bDependsOnA, current(deployed("a")))))); got["web-b"] != "" {
		t.Errorf("a dependency with nothing to do is not waited for: after = %v", got)
	}
	if got := after(Decide(observation(nil))); got["web-a"]+got["web-b"] != "" {
		t.Errorf("without dependsOn every step is free: after = %v", got)
	}
}

// TestRemediationState: what a step says of the failures and what apply
// must do with the record: count, or forget it.
func TestRemediationState(t *testing.T) {
	rem := func(o Observation) *Retries {
		for _, s := range Decide(o).Steps {
			if s.ReleaseSpec == "a" && s.Retries != nil {
				return s.Retries
			}
		}
		return nil
	}
	limit := policy("a", remediation(2, config.OnFailureKeep))
	if r := rem(observation(all(limit, current(failedUpgrade())))); r == nil || r.Failures != 0 || r.Exhausted || r.Forget || r.Fingerprint == "" {
		t.Errorf("no failures recorded: %+v", r)
	}
	if r := rem(observation(all(limit, current(failedUpgrade()), recorded("a", 1, true)))); r.Failures != 1 || r.Exhausted || !r.Recorded {
		t.Errorf("one failure recorded: %+v", r)
	}
	if r := rem(observation(all(limit, current(deployed("a")), recorded("a", 1, true)))); !r.Forget {
		t.Errorf("in sync with failures recorded: the record must go: %+v", r)
	}
	if r := rem(observation(all(limit, current(failedUpgrade()), recorded("a", 1, true), triggerGone))); !r.Forget {
		t.Errorf("trigger gone with failures recorded: the record must go: %+v", r)
	}
	if r := rem(observation(all(limit, current(failedUpgrade()), recorded("a", 3, true)))); r.Forget || !r.Exhausted {
		t.Errorf("exhausted: the record stays: %+v", r)
	}
	base := rem(observation(limit)).Fingerprint
	for name, mut := range map[string]func(o *Observation){
		"values":  policy("a", func(rs *config.ReleaseSpec) { rs.Values = map[string]interface{}{"x": 1} }),
		"trigger": newLabel,
		"chart":   func(o *Observation) { o.ReleaseSpecs["a"] = ReleaseSpecObservation{Chart: ChartID{"hello", "1.1.0"}} },
		"timeout": policy("a", func(rs *config.ReleaseSpec) { rs.Timeout = "1m" }),
		"wait":    policy("a", func(rs *config.ReleaseSpec) { rs.Wait = true }),
		"retries": policy("a", remediation(3, config.OnFailureKeep)),
	} {
		if fp := rem(observation(all(limit, mut))).Fingerprint; fp == base {
			t.Errorf("a change of %s keeps the fingerprint: its failures would still count", name)
		}
	}
	if fp := rem(observation(all(limit, policy("a", func(rs *config.ReleaseSpec) { rs.MaxHistory, rs.DependsOn = 3, []string{"b"} })))).Fingerprint; fp != base {
		t.Error("maxHistory and dependsOn do not change what an attempt does, yet change the fingerprint")
	}
}

// TestPoliciesInPlanJSON: plan -o json carries what shaped a step, and a
// release spec without policies shows none (the output of an existing
// config stays as it was).
func TestPoliciesInPlanJSON(t *testing.T) {
	res := Decide(observation(all(policy("b", func(rs *config.ReleaseSpec) {
		rs.Timeout, rs.Wait, rs.CRDs, rs.DependsOn = "90s", true, config.CRDsCreateReplace, []string{"a"}
		remediation(1, config.OnFailureRollback)(rs)
	}), policy("a", func(rs *config.ReleaseSpec) { rs.Suspend = true }), bothDeployed, newLabel)))
	js, err := json.Marshal(res.Steps)
	if err != nil {
		t.Fatal(err)
	}
	var steps []map[string]interface{}
	if err := json.Unmarshal(js, &steps); err != nil {
		t.Fatal(err)
	}
	if _, has := steps[0]["policies"]; has || steps[0]["suspended"] != "releaseSpec" || steps[0]["pending"] != "upgrade" || steps[0]["action"] != "suspended" {
		t.Errorf("suspended step without policies: %v", steps[0])
	}
	p, _ := steps[1]["policies"].(map[string]interface{})
	r, _ := p["remediation"].(map[string]interface{})
	if p["timeout"] != "90s" || p["wait"] != true || p["crds"] != "CreateReplace" || p["dependsOn"] == nil ||
		r["retries"] != 1.0 || r["onFailure"] != "rollback" || r["failures"] != 0.0 {
		t.Errorf("policies of web-b: %v", steps[1])
	}
	if _, has := steps[1]["pending"]; has {
		t.Errorf("a step that is not held has no pending action: %v", steps[1])
	}
}

// TestTriageSuspended: a pass queues a key whose only differences are in
// suspended release specs once per term (its reconcile says what is
// pending), then leaves it alone; the active release specs of a spec are
// triaged as before.
func TestTriageSuspended(t *testing.T) {
	a := format.Object{Namespace: "ns", Name: "a"}
	web := format.Object{Namespace: "ns", Name: "web"}
	selected := TriggerRead{Found: true, Labels: labels("autox.dev/experiment", "enabled")}
	plain := TriggerRead{Found: true, Labels: labels()}
	// survey is a converged pass over selectorConfig, changed by mut.
	survey := func(mut func(cfg *config.Config, s *Survey)) Survey {
		cfg := selectorConfig(t)
		s := Survey{Config: cfg, Claims: NewClaimIndex(cfg),
			Records: []format.Record{recordOf(t, namedRelease(t, cfg, plain)), recordOf(t, objectRelease(t, cfg, a, selected))},
			Listed: map[string]Listing{
				"web":    {OK: true, Objects: map[format.Object]TriggerRead{web: plain}},
				"exp":    {OK: true, Objects: map[format.Object]TriggerRead{a: selected}},
				"canary": {OK: true, Objects: map[format.Object]TriggerRead{}},
			},
			Charts: map[string]map[string]ChartID{"web": {"a": {"hello", "1.0.0"}}, "exp": {"job": {"hello", "1.0.0"}}, "canary": {"c": {"hello", "1.0.0"}}},
		}
		mut(cfg, &s)
		return s
	}
	gone := func(cfg *config.Config, s *Survey) {
		s.Listed["web"] = Listing{OK: true, Objects: map[format.Object]TriggerRead{}}
	}
	cases := []struct {
		name          string
		survey        Survey
		keys, noticed []string
	}{
		{"a suspended spec whose trigger went", survey(func(cfg *config.Config, s *Survey) { cfg.Specs["web"].Suspend = true; gone(cfg, s) }),
			[]string{"web"}, []string{"suspended:web"}},
		{"noticed before: left alone", survey(func(cfg *config.Config, s *Survey) {
			cfg.Specs["web"].Suspend = true
			gone(cfg, s)
			s.Noticed = map[string]bool{"suspended:web": true}
		}), nil, nil},
		{"not suspended: queued every pass", survey(func(cfg *config.Config, s *Survey) {
			gone(cfg, s)
			s.Noticed = map[string]bool{"suspended:web": true}
		}), []string{"web"}, nil},
		{"a suspended spec in sync: nothing", survey(func(cfg *config.Config, s *Survey) { cfg.Specs["web"].Suspend = true }), nil, nil},
		{"a suspended spec's removed release spec", survey(func(cfg *config.Config, s *Survey) {
			cfg.Specs["web"].Suspend = true
			s.Records = append(s.Records, format.Record{Name: "web-gone", Namespace: "ns", Spec: "web", ReleaseSpec: "gone", Status: "deployed"})
		}), []string{"web"}, []string{"suspended:web"}},
		{"a suspended release spec out of sync, the other in sync", survey(func(cfg *config.Config, s *Survey) {
			cfg.Specs["web"].ReleaseSpecs["z"] = &config.ReleaseSpec{Chart: config.Chart{Repo: "https://charts.example", Name: "hello", Version: "1.0.0"},
				ReleaseName: "web-z", Namespace: "ns", OnChange: config.OnChangeUpgrade, Suspend: true}
			s.Charts["web"]["z"] = ChartID{"hello", "1.0.0"}
		}), []string{"web"}, []string{"suspended:web"}},
		{"a suspended release spec, the other out of sync: queued", survey(func(cfg *config.Config, s *Survey) {
			cfg.Specs["web"].ReleaseSpecs["z"] = &config.ReleaseSpec{Chart: config.Chart{Repo: "https://charts.example", Name: "hello", Version: "1.0.0"},
				ReleaseName: "web-z", Namespace: "ns", OnChange: config.OnChangeUpgrade, Suspend: true}
			s.Charts["web"]["z"] = ChartID{"hello", "1.0.0"}
			s.Records[0].Digest = "changed"
		}), []string{"web"}, nil},
		{"a suspended selector spec's object gone", survey(func(cfg *config.Config, s *Survey) {
			cfg.Specs["exp"].Suspend = true
			s.Listed["exp"] = Listing{OK: true, Objects: map[format.Object]TriggerRead{}}
		}), []string{"exp/ns/a"}, []string{"suspended:exp/ns/a"}},
		{"a suspended selector spec's object relabelled", survey(func(cfg *config.Config, s *Survey) {
			cfg.Specs["exp"].Suspend = true
			s.Listed["exp"].Objects[a] = TriggerRead{Found: true, Labels: labels("autox.dev/experiment", "enabled", "app.kubernetes.io/version", "2")}
		}), []string{"exp/ns/a"}, []string{"suspended:exp/ns/a"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := Triage(tc.survey)
			if strings.Join(v.Keys, " ") != strings.Join(tc.keys, " ") || strings.Join(v.Noticed, " ") != strings.Join(tc.noticed, " ") {
				t.Errorf("keys %v noticed %v, want keys %v noticed %v", v.Keys, v.Noticed, tc.keys, tc.noticed)
			}
		})
	}
}

// TestUnattributedKeepPolicies: a selector spec's releases that name no
// object (made while it named one trigger) go as removals, but with the
// policies and identity of the spec's release spec of their id: a
// suspended release spec keeps its release, its timeout sets the unlock
// age, and the uninstall runs with its disableHooks as its service
// account — not with the defaults as autox's own identity.
func TestUnattributedKeepPolicies(t *testing.T) {
	selector := func(mut func(rs *config.ReleaseSpec)) *config.Spec {
		s := planSpec()
		s.Trigger.Name, s.Trigger.Selector = "", &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
		mut(s.ReleaseSpecs["a"])
		return s
	}
	obs := func(spec *config.Spec, rel *format.Release) Observation {
		return Observation{Spec: "web", Instance: "autox", Unattributed: true, Policies: spec, Current: []*format.Release{rel},
			Now: planNow, Defaults: config.PolicyDefaults{Timeout: time.Minute}, DefaultServiceAccount: "fallback"}
	}

	p := Decide(obs(selector(func(rs *config.ReleaseSpec) { rs.Suspend = true }), deployed("a")))
	if s := p.Steps[0]; s.Action != ActionSuspended || s.Pending != ActionUninstall {
		t.Errorf("suspended release spec: %s (pending %s) %q, want suspended uninstall", s.Action, s.Pending, s.Reason)
	}

	spec := selector(func(rs *config.ReleaseSpec) {
		rs.Timeout, rs.DisableHooks, rs.ServiceAccountName = "20m", true, "deployer"
	})
	s := Decide(obs(spec, deployed("a"))).Steps[0]
	if s.Action != ActionUninstall || s.ServiceAccount != "deployer" || !s.Policy.DisableHooks || s.Policy.Timeout != 20*time.Minute {
		t.Errorf("uninstall: %s as %q, disableHooks %v, timeout %s; want uninstall as deployer, disableHooks, 20m",
			s.Action, s.ServiceAccount, s.Policy.DisableHooks, s.Policy.Timeout)
	}
	pending := with(deployed("a"), func(r *format.Release) {
		r.Status, r.Modified = common.StatusPendingUpgrade, planNow.Add(-10*time.Minute)
	})
	if s := Decide(obs(spec, pending)).Steps[0]; s.Action != ActionWait {
		t.Errorf("pending-upgrade for 10m under a 20m timeout: %s %q, want wait", s.Action, s.Reason)
	}

	// A release spec id the selector spec no longer has: the defaults.
	gone := with(deployed("a"), func(r *format.Release) { r.ReleaseSpec = "gone" })
	if s := Decide(obs(spec, gone)).Steps[0]; s.Action != ActionUninstall || s.ServiceAccount != "fallback" || s.Policy.DisableHooks {
		t.Errorf("release spec gone: %s as %q, disableHooks %v; want uninstall as the default account", s.Action, s.ServiceAccount, s.Policy.DisableHooks)
	}
}

// TestRemovalsKeepDependsOn: removals of release specs that left the
// config keep the order their last config gave (Observation.Departed): an
// uninstall comes after those of the release specs that depended on it,
// every one of them (a removed selector spec has one per object), and
// waits while one keeps its release.
func TestRemovalsKeepDependsOn(t *testing.T) {
	rel := func(id, name string, mut func(r *format.Release)) *format.Release {
		r := with(deployed("a"), func(r *format.Release) { r.ReleaseSpec, r.Name = id, name })
		if mut != nil {
			mut(r)
		}
		return r
	}
	removed := func(rels ...*format.Release) Observation {
		return Observation{Spec: "web", Instance: "autox", Current: rels, Now: planNow, Defaults: config.PolicyDefaults{Timeout: time.Minute},
			Departed: map[string][]string{"crds": nil, "probe": {"crds"}}}
	}
	p := Decide(removed(rel("crds", "web-crds", nil), rel("probe", "web-probe-1", nil), rel("probe", "web-probe-2", nil)))
	if s := p.Steps[0]; s.Action != ActionUninstall || !slices.Equal(s.After, []string{"probe"}) {
		t.Errorf("the CRD chart's removal: %s after %v, want uninstall after probe", s.Action, s.After)
	}
	for _, s := range p.Steps[1:] {
		if s.Action != ActionUninstall || len(s.After) != 0 {
			t.Errorf("%s: %s after %v, want uninstall first", s.Release, s.Action, s.After)
		}
	}
	locked := func(r *format.Release) { r.Status, r.Modified = common.StatusPendingUpgrade, planNow }
	p = Decide(removed(rel("crds", "web-crds", nil), rel("probe", "web-probe-1", locked)))
	if s := p.Steps[0]; s.Action != ActionWait || !strings.Contains(s.Reason, "waits for release spec probe") {
		t.Errorf("the CRD chart's removal while its user is locked: %s %q, want wait", s.Action, s.Reason)
	}
	// Without what the last config said, nothing is ordered.
	o := removed(rel("crds", "web-crds", nil), rel("probe", "web-probe-1", nil))
	o.Departed = nil
	if s := Decide(o).Steps[0]; s.Action != ActionUninstall || len(s.After) != 0 {
		t.Errorf("unknown order: %s after %v", s.Action, s.After)
	}
}
