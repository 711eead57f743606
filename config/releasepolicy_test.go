package config

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

// policyBase is a spec with three release specs; tests replace the
// placeholders POLICY_A, POLICY_B and POLICY_C (the rest of a flow map).
const policyBase = `
namespaces: [default]
specs:
  a:
    trigger: {group: apps, version: v1, resource: deployments, name: a, namespace: default}
    releaseSpecs:
      crd: {chart: {path: charts/crd}POLICY_A}
      app: {chart: {path: charts/app}POLICY_B}
      web: {chart: {path: charts/web}POLICY_C}
`

func policyConfig(a, b, c string) string {
	return strings.NewReplacer("POLICY_A", a, "POLICY_B", b, "POLICY_C", c).Replace(policyBase)
}

func TestPoliciesValid(t *testing.T) {
	yaml := policyConfig(", crds: CreateReplace, suspend: true",
		", dependsOn: [crd], timeout: 90s, wait: true, waitForJobs: true, disableHooks: true, maxHistory: 3, remediation: {retries: 2, onFailure: rollback}",
		", dependsOn: [app, crd], remediation: {retries: 0}")
	cfg, err := Parse([]byte(strings.Replace(yaml, "  a:\n", "  a:\n    suspend: true\n", 1)), "/cfg")
	if err != nil {
		t.Fatal(err)
	}
	spec := cfg.Specs["a"]
	crd, app, web := spec.ReleaseSpecs["crd"], spec.ReleaseSpecs["app"], spec.ReleaseSpecs["web"]
	if !spec.Suspend || !crd.Suspend || crd.CRDs != CRDsCreateReplace {
		t.Errorf("suspend and crds not read: spec %v, crd %+v", spec.Suspend, crd)
	}
	if app.TimeoutOr(time.Minute) != 90*time.Second || !app.Wait || !app.WaitForJobs || !app.DisableHooks || app.MaxHistoryOr(10) != 3 {
		t.Errorf("app policies = %+v", app)
	}
	if r, ok := app.Limited(); !ok || r != 2 || app.Remediation.OnFailure != OnFailureRollback {
		t.Errorf("app remediation = %+v", app.Remediation)
	}
	if r, ok := web.Limited(); !ok || r != 0 || web.Remediation.OnFailure != OnFailureKeep {
		t.Errorf("retries: 0 must be a bound of 0 with onFailure defaulted to keep, got %+v", web.Remediation)
	}
	if got := spec.DependencyOrder(); !reflect.DeepEqual(got, []string{"crd", "app", "web"}) {
		t.Errorf("DependencyOrder = %v, want crd before app before web", got)
	}
	if got := spec.Dependents("crd"); !reflect.DeepEqual(got, []string{"app", "web"}) {
		t.Errorf("Dependents(crd) = %v", got)
	}
	if spec.Suspended("web") != SuspendedBySpec {
		t.Errorf("Suspended(web) = %q, want the spec's", spec.Suspended("web"))
	}

	// serverSideApply: a release spec's wins over its spec's, which is the
	// default of the others; unset is nil (installs client-side, upgrades as
	// recorded).
	ssa, err := Parse([]byte(strings.Replace(policyConfig(", serverSideApply: false", "", ""), "  a:\n", "  a:\n    serverSideApply: true\n", 1)), "/cfg")
	if err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]bool{"crd": false, "app": true, "web": true} {
		if got := ssa.Specs["a"].ReleaseSpecs[id].ServerSideApply; got == nil || *got != want {
			t.Errorf("serverSideApply of %s = %v, want %v", id, got, want)
		}
	}

	// Defaults: what autox did before the policies existed.
	cfg, err = Parse([]byte(policyConfig("", "", "")), "/cfg")
	if err != nil {
		t.Fatal(err)
	}
	x := cfg.Specs["a"].ReleaseSpecs["app"]
	if _, limited := x.Limited(); limited || x.TimeoutOr(5*time.Minute) != 5*time.Minute || x.MaxHistoryOr(10) != 10 ||
		x.Wait || x.CRDs != "" || x.Remediation != nil || x.ServerSideApply != nil || cfg.Specs["a"].Suspended("app") != "" {
		t.Errorf("defaults = %+v", x)
	}
	if got := cfg.Specs["a"].DependencyOrder(); !reflect.DeepEqual(got, []string{"app", "crd", "web"}) {
		t.Errorf("without dependsOn the order is by id, got %v", got)
	}
}

func TestPoliciesInvalid(t *testing.T) {
	cases := []struct {
		name    string
		a, b, c string
		want    []string
	}{
		{"timeout without a unit", "", ", timeout: 30", "", []string{"specs.a.releaseSpecs.app.timeout: must be a string, got the number 30"}},
		{"timeout not a duration", "", ", timeout: soon", "", []string{`specs.a.releaseSpecs.app.timeout: "soon" is not a duration`}},
		{"timeout zero", "", ", timeout: 0s", "", []string{`specs.a.releaseSpecs.app.timeout: "0s" is not a duration`}},
		{"waitForJobs without wait", "", ", waitForJobs: true", "", []string{"specs.a.releaseSpecs.app.waitForJobs: needs `wait: true`"}},
		{"wait not a boolean", "", ", wait: \"yes\"", "", []string{"specs.a.releaseSpecs.app.wait: must be true or false"}},
		{"serverSideApply not a boolean", "", ", serverSideApply: auto", "", []string{"specs.a.releaseSpecs.app.serverSideApply: must be true or false"}},
		{"crds", ", crds: create", "", "", []string{`specs.a.releaseSpecs.crd.crds: must be Skip, Create or CreateReplace`, `got "create"`}},
		{"maxHistory 0", "", ", maxHistory: 0", "", []string{"specs.a.releaseSpecs.app.maxHistory: must be at least 1", "--max-history"}},
		{"retries negative", "", ", remediation: {retries: -1}", "", []string{"specs.a.releaseSpecs.app.remediation.retries: must be 0 or more"}},
		{"onFailure unknown", "", ", remediation: {retries: 1, onFailure: delete}", "", []string{"specs.a.releaseSpecs.app.remediation.onFailure: must be keep, rollback or uninstall"}},
		{"onFailure without retries", "", ", remediation: {onFailure: uninstall}", "", []string{"specs.a.releaseSpecs.app.remediation.onFailure: applies once the retries are used up: set `retries`"}},
		{"remediation field", "", ", remediation: {retry: 1}", "", []string{"specs.a.releaseSpecs.app.remediation.retry: unknown field; known fields here: retries, onFailure"}},
		{"dependsOn unknown", "", ", dependsOn: [crds]", "", []string{`specs.a.releaseSpecs.app.dependsOn[0]: release spec "crds" is not in this spec`, "app, crd, web"}},
		{"dependsOn self", "", ", dependsOn: [app]", "", []string{`specs.a.releaseSpecs.app.dependsOn[0]: release spec "app" cannot depend on itself`}},
		{"dependsOn twice", "", ", dependsOn: [crd, crd]", "", []string{`specs.a.releaseSpecs.app.dependsOn[1]: release spec "crd" is listed twice`}},
		{"dependsOn empty item", "", ", dependsOn: [crd, ~]", "", []string{"specs.a.releaseSpecs.app.dependsOn[1]: has no value"}},
		{"dependsOn not a list", "", ", dependsOn: crd", "", []string{"specs.a.releaseSpecs.app.dependsOn: must be a list"}},
		{"a cycle of two", ", dependsOn: [app]", ", dependsOn: [crd]", "",
			[]string{"specs.a.releaseSpecs.app.dependsOn: release specs depend on each other in a cycle (app -> crd -> app)"}},
		{"a cycle of three, found once", ", dependsOn: [web]", ", dependsOn: [crd]", ", dependsOn: [app]",
			[]string{"specs.a.releaseSpecs.app.dependsOn: release specs depend on each other in a cycle (app -> crd -> web -> app)"}},
		{"suspend not a boolean", ", suspend: 1", "", "", []string{"specs.a.releaseSpecs.crd.suspend: must be true or false, got the number 1"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(policyConfig(tc.a, tc.b, tc.c)), "/cfg")
			var cerr *Error
			if !errors.As(err, &cerr) {
				t.Fatalf("want a config error, got %v", err)
			}
			lines := cerr.Lines()
			for _, w := range tc.want {
				if !containsLine(lines, w) {
					t.Errorf("no line contains %q; lines:\n%s", w, strings.Join(lines, "\n"))
				}
			}
			if strings.Contains(tc.name, "found once") && len(lines) != 1 {
				t.Errorf("one cycle, %d lines:\n%s", len(lines), strings.Join(lines, "\n"))
			}
		})
	}
}

func containsLine(lines []string, want string) bool {
	for _, l := range lines {
		if strings.Contains(l, want) {
			return true
		}
	}
	return false
}

// TestPolicyChangeIsASpecChange: a policy change is a change of its spec
// (its key is reconciled, so that `suspend: false` acts at once), and the
// diff is all it is: the release format does not see it.
func TestPolicyChangeIsASpecChange(t *testing.T) {
	old, err := Parse([]byte(policyConfig("", "", "")), "/cfg")
	if err != nil {
		t.Fatal(err)
	}
	for _, change := range []string{", suspend: true", ", timeout: 1m", ", wait: true", ", remediation: {retries: 1}", ", dependsOn: [crd]", ", maxHistory: 2", ", serverSideApply: true", ", serverSideApply: false", ", drift: {mode: correct}"} {
		cfg, err := Parse([]byte(policyConfig("", change, "")), "/cfg")
		if err != nil {
			t.Fatal(err)
		}
		if ch := Diff(old, cfg); !reflect.DeepEqual(ch.ChangedSpecs, []string{"a"}) || len(ch.RemovedReleaseSpecs)+len(ch.AddedSpecs)+len(ch.RemovedSpecs) != 0 {
			t.Errorf("%s: diff = %+v, want spec a changed and nothing else", change, ch)
		}
	}
}
