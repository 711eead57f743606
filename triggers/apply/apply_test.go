package apply

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"
	chart "helm.sh/helm/v4/pkg/chart/v2"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/helmops"
	"github.com/autox-dev/autox/internal/format"
	"github.com/autox-dev/autox/internal/redact"
	"github.com/autox-dev/autox/triggers/plan"
)

// stepHelm records which operations run at once; only the parts Apply
// uses are implemented.
type stepHelm struct {
	Helm
	mu                          sync.Mutex
	running, most, uninstalling int
	installsDuringUninstall     int
	done                        []string
	gate                        chan struct{} // each operation waits for one value
}

func (h *stepHelm) op(name string, uninstall bool, run func() error) error {
	h.mu.Lock()
	h.running++
	h.most = max(h.most, h.running)
	if uninstall {
		h.uninstalling++
	} else if h.uninstalling > 0 {
		h.installsDuringUninstall++
	}
	h.mu.Unlock()
	<-h.gate
	err := run()
	h.mu.Lock()
	h.running--
	if uninstall {
		h.uninstalling--
	}
	h.done = append(h.done, name)
	h.mu.Unlock()
	return err
}

func (h *stepHelm) Install(_ context.Context, d helmops.Target) (int, error) {
	return 1, h.op(d.Name, false, func() error {
		if d.Name == "bad" {
			return fmt.Errorf("install of %s failed", d.Name)
		}
		return nil
	})
}

func (h *stepHelm) UninstallWith(_ context.Context, _, name string, _ int, _ *redact.Redactor, _ config.Policy) error {
	return h.op(name, true, func() error {
		if name == "bad" {
			return fmt.Errorf("uninstall of %s failed", name)
		}
		return nil
	})
}

// applyAll acts on p once, as a reconcile that cannot observe again does,
// and returns the steps' errors.
func applyAll(ctx context.Context, a *Applier, p plan.Plan) []error {
	x := a.Start(false)
	x.Act(ctx, p)
	_, errs := x.Done()
	return errs
}

// A spec's steps run StepsInParallel at a time, the leading uninstalls
// (removed release specs) before the others; every step runs, and a failed
// one is reported in its place without stopping the others.
func TestApplyRunsStepsInParallelAfterRemovals(t *testing.T) {
	h := &stepHelm{gate: make(chan struct{})}
	var steps []plan.Step
	for i := 0; i < 2; i++ {
		steps = append(steps, plan.Step{Action: plan.ActionUninstall, Spec: "s", ReleaseSpec: fmt.Sprintf("gone%d", i), Release: fmt.Sprintf("gone%d", i), Namespace: "ns"})
	}
	for i := 0; i < 9; i++ {
		id, name := fmt.Sprintf("r%d", i), fmt.Sprintf("r%d", i)
		if i == 4 {
			name = "bad"
		}
		steps = append(steps, plan.Step{Action: plan.ActionInstall, Spec: "s", ReleaseSpec: id, Release: name, Namespace: "ns",
			Desired: &plan.Desired{Loaded: &chart.Chart{Metadata: &chart.Metadata{Name: "c", Version: "1"}}}})
	}
	a := New(Options{Helm: h, Log: zerolog.Nop()})
	result := make(chan []error)
	go func() { result <- applyAll(context.Background(), a, plan.Plan{Spec: "s", Steps: steps}) }()
	for range steps {
		h.gate <- struct{}{}
	}
	errs := <-result
	if len(h.done) != len(steps) {
		t.Fatalf("operations run: %v", h.done)
	}
	if h.installsDuringUninstall != 0 {
		t.Errorf("%d installs started while a removal ran", h.installsDuringUninstall)
	}
	if h.most > StepsInParallel {
		t.Errorf("%d operations at once, more than %d", h.most, StepsInParallel)
	}
	for i, err := range errs {
		if (err != nil) != (steps[i].Release == "bad") {
			t.Errorf("step %d (%s): error %v", i, steps[i].Release, err)
		}
	}
}

// A step not started when the context has ended is not started.
func TestApplyStartsNothingAfterCancel(t *testing.T) {
	h := &stepHelm{gate: make(chan struct{})}
	close(h.gate)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	steps := []plan.Step{{Action: plan.ActionUninstall, Release: "a", Namespace: "ns"}, {Action: plan.ActionUninstall, Release: "b", Namespace: "ns"}}
	errs := applyAll(ctx, New(Options{Helm: h, Log: zerolog.Nop()}), plan.Plan{Steps: steps})
	if len(h.done) != 0 {
		t.Errorf("operations started after cancel: %v", h.done)
	}
	for i, err := range errs {
		if err == nil {
			t.Errorf("step %d: no error", i)
		}
	}
}

// orderHelm records the operations in the order they run.
type orderHelm struct {
	Helm
	mu        sync.Mutex
	calls     []string
	dryRunErr error
}

func (h *orderHelm) record(call string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls = append(h.calls, call)
}

func (h *orderHelm) Install(_ context.Context, d helmops.Target) (int, error) {
	h.record("install " + d.Namespace + "/" + d.Name)
	return 1, nil
}

func (h *orderHelm) UninstallWith(_ context.Context, ns, name string, _ int, _ *redact.Redactor, _ config.Policy) error {
	h.record("uninstall " + ns + "/" + name)
	return nil
}

// UninstallMoved is recorded as any uninstall: where it runs in the order
// is what is tested here (helmops tests its wait).
func (h *orderHelm) UninstallMoved(ctx context.Context, ns, name string, current int, hide *redact.Redactor, p config.Policy) error {
	return h.UninstallWith(ctx, ns, name, current, hide, p)
}

func (h *orderHelm) DryRunReplacement(_ context.Context, d helmops.Target, old helmops.Ref) error {
	h.record("dry run " + d.Namespace + "/" + d.Name + " for " + old.String())
	return h.dryRunErr
}

func (h *orderHelm) Adopt(_ context.Context, a helmops.Adoption) error {
	h.record(fmt.Sprintf("adopt %s/%s@%d %s/%s -> %s/%s", a.Namespace, a.Name, a.Revision, a.From.Spec, a.From.ReleaseSpec, a.To.Spec, a.To.ReleaseSpec))
	return nil
}

// A release moved to another namespace is removed only after its
// replacement's dry run passed; when the dry run fails, neither the removal
// nor the install runs, and both steps fail. An adoption hands Helm the
// owner the release's labels name and the new one.
func TestApplyProvesAReplacementFirst(t *testing.T) {
	loaded := &chart.Chart{Metadata: &chart.Metadata{Name: "c", Version: "1"}}
	steps := []plan.Step{
		{Action: plan.ActionUninstall, Spec: "s", ReleaseSpec: "a", Release: "r", Namespace: "old", ReplacedBy: "a"},
		{Action: plan.ActionInstall, Spec: "s", ReleaseSpec: "a", Release: "r", Namespace: "new", Desired: &plan.Desired{Loaded: loaded}},
		{Action: plan.ActionAdopt, Spec: "s", ReleaseSpec: "b", Release: "b", Namespace: "new", Revision: 3,
			AdoptFrom: &format.Owner{Spec: "was", ReleaseSpec: "b", Instance: "autox"}},
	}
	// The removal group runs before the others; within a group, in any order.
	inGroups := func(calls []string, removals int) []string {
		out := slices.Clone(calls)
		slices.Sort(out[min(removals, len(out)):])
		return out
	}
	for _, tc := range []struct {
		name      string
		dryRunErr error
		// removals is how many calls the removal group makes.
		removals int
		calls    []string
		failed   []bool
	}{
		{"renders", nil, 2, []string{"dry run new/r for old/r", "uninstall old/r", "adopt new/b@3 was/b -> s/b", "install new/r"}, []bool{false, false, false}},
		{"does not render", errors.New("ConfigMap prerequisite is missing"), 1, []string{"dry run new/r for old/r", "adopt new/b@3 was/b -> s/b"},
			[]bool{true, true, false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &orderHelm{dryRunErr: tc.dryRunErr}
			a := New(Options{Helm: h, Log: zerolog.Nop()})
			p := plan.Plan{Spec: "s", Steps: steps}
			errs := applyAll(context.Background(), a, p)
			if got := inGroups(h.calls, tc.removals); !slices.Equal(got, tc.calls) {
				t.Errorf("calls %q, want %q", got, tc.calls)
			}
			for i, err := range errs {
				if (err != nil) != tc.failed[i] {
					t.Errorf("step %d: error %v", i, err)
				}
			}
			// Decided again after the removals (here: the same steps), what
			// was tried is not tried again, and a release spec whose
			// replacement failed its dry run stays blocked.
			h.calls = nil
			x := a.Start(true)
			if !x.Act(context.Background(), p) {
				t.Fatal("the removals did not run first, to observe again")
			}
			h.calls = nil
			x.Act(context.Background(), p)
			_, all := x.Done()
			first, after := all[:1], all[1:]
			if got := inGroups(h.calls, 0); !slices.Equal(got, tc.calls[tc.removals:]) {
				t.Errorf("after the removals: calls %q, want %q", got, tc.calls[tc.removals:])
			}
			if len(first) != 1 || (first[0] != nil) != tc.failed[0] || after[0] != nil || (after[1] != nil) != tc.failed[1] || after[2] != nil {
				t.Errorf("errors %v, then %v", first, after)
			}
		})
	}
}

// TestReplacementMissingKeepsTheOld: a removal tied to a replacement whose
// install is not among the steps is an error and removes nothing: nothing
// proved the replacement.
func TestReplacementMissingKeepsTheOld(t *testing.T) {
	steps := []plan.Step{{Action: plan.ActionUninstall, Spec: "s", ReleaseSpec: "a", Release: "r", Namespace: "old", ReplacedBy: "a"}}
	h := &orderHelm{}
	errs := applyAll(context.Background(), New(Options{Helm: h, Log: zerolog.Nop()}), plan.Plan{Spec: "s", Steps: steps})
	if len(h.calls) != 0 {
		t.Errorf("calls %q, want none", h.calls)
	}
	if len(errs) != 1 || errs[0] == nil || !strings.Contains(errs[0].Error(), "old/r is kept") {
		t.Errorf("errors %v, want the removal kept", errs)
	}
}
