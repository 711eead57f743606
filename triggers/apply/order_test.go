package apply

import (
	"context"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	chart "helm.sh/helm/v4/pkg/chart/v2"

	"github.com/autox-dev/autox/triggers/plan"
)

// Steps with After run once what they come after succeeded, in that
// order; one whose predecessor failed is not started; the others run at
// once. The fake's gate lets one operation through at a time, so the order
// of h.done is the order operations ran in.
func TestApplyRunsDependenciesFirst(t *testing.T) {
	install := func(id, release string, after ...string) plan.Step {
		return plan.Step{Action: plan.ActionInstall, Spec: "s", ReleaseSpec: id, Release: release, Namespace: "ns", After: after,
			Desired: &plan.Desired{Loaded: &chart.Chart{Metadata: &chart.Metadata{Name: "c", Version: "1"}}}}
	}
	cases := []struct {
		name    string
		steps   []plan.Step
		order   string // operations run, in order ("" in between: any order)
		failing []string
	}{
		{"a chain", []plan.Step{install("app", "app", "crd"), install("crd", "crd"), install("web", "web", "app")}, "crd app web", nil},
		{"a failed dependency stops its dependents", []plan.Step{install("app", "app", "crd"), install("crd", "bad"), install("web", "web", "app")},
			"bad", []string{"app", "bad", "web"}},
		{"uninstalls after their dependents", []plan.Step{
			{Action: plan.ActionUninstall, Spec: "s", ReleaseSpec: "crd", Release: "crd", Namespace: "ns", After: []string{"app"}},
			{Action: plan.ActionUninstall, Spec: "s", ReleaseSpec: "app", Release: "app", Namespace: "ns"},
		}, "app crd", nil},
		{"an uninstall that waits for a later step is no removal", []plan.Step{
			{Action: plan.ActionUninstall, Spec: "s", ReleaseSpec: "crd", Release: "crd", Namespace: "ns", After: []string{"web"}},
			{Action: plan.ActionNone, Spec: "s", ReleaseSpec: "other", Release: "other", Namespace: "ns"},
			{Action: plan.ActionUninstall, Spec: "s", ReleaseSpec: "web", Release: "web", Namespace: "ns"},
		}, "web crd", nil},
		{"an install after one held back is not started", []plan.Step{install("app", "app", "crd"), install("web", "web")},
			"web", []string{"app"}},
		{"an uninstall after a failed removal is not started", []plan.Step{
			{Action: plan.ActionUninstall, Spec: "s", ReleaseSpec: "app", Release: "bad", Namespace: "ns"},
			{Action: plan.ActionUninstall, Spec: "s", ReleaseSpec: "crd", Release: "crd", Namespace: "ns", After: []string{"app"}},
		}, "bad", []string{"bad", "crd"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := &stepHelm{gate: make(chan struct{})}
			result := make(chan []error)
			// Removals first: only a leading run of uninstalls is a group of its own.
			go func() {
				result <- applyAll(context.Background(), New(Options{Helm: h, Log: zerolog.Nop()}), plan.Plan{Spec: "s", Steps: tc.steps})
			}()
			var errs []error
			for errs == nil {
				select {
				case h.gate <- struct{}{}:
				case errs = <-result:
				}
			}
			if got := strings.Join(h.done, " "); got != tc.order {
				t.Errorf("operations ran %q, want %q", got, tc.order)
			}
			var failing []string
			for i, err := range errs {
				if err != nil {
					failing = append(failing, tc.steps[i].Release)
				}
			}
			if strings.Join(failing, ",") != strings.Join(tc.failing, ",") {
				t.Errorf("failed steps %v, want %v (%v)", failing, tc.failing, errs)
			}
		})
	}
}
