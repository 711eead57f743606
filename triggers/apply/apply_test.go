package apply

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/rs/zerolog"
	"helm.sh/helm/v3/pkg/chart"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/helmops"
	"github.com/autox-dev/autox/internal/redact"
	"github.com/autox-dev/autox/triggers/observe"
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

func (h *stepHelm) Install(_ context.Context, d helmops.Desired) (int, error) {
	return 1, h.op(d.Name, false, func() error {
		if d.Name == "bad" {
			return fmt.Errorf("install of %s failed", d.Name)
		}
		return nil
	})
}

func (h *stepHelm) UninstallWith(_ context.Context, _, name string, _ *redact.Redactor, _ helmops.Policy) error {
	return h.op(name, true, func() error { return nil })
}

// A spec's steps run StepsInParallel at a time, the leading uninstalls
// (removed release specs) before the others; every step runs, and a failed
// one is reported in its place without stopping the others.
func TestApplyRunsStepsInParallelAfterRemovals(t *testing.T) {
	h := &stepHelm{gate: make(chan struct{})}
	spec := &config.Spec{ReleaseSpecs: map[string]*config.ReleaseSpec{}}
	o := &observe.Observed{Observation: plan.Observation{Spec: "s", Config: spec}, Loaded: map[string]*chart.Chart{}}
	var steps []plan.Step
	for i := 0; i < 2; i++ {
		steps = append(steps, plan.Step{Action: plan.ActionUninstall, Spec: "s", ReleaseSpec: fmt.Sprintf("gone%d", i), Release: fmt.Sprintf("gone%d", i), Namespace: "ns"})
	}
	for i := 0; i < 9; i++ {
		id, name := fmt.Sprintf("r%d", i), fmt.Sprintf("r%d", i)
		if i == 4 {
			name = "bad"
		}
		spec.ReleaseSpecs[id] = &config.ReleaseSpec{ReleaseName: name, Namespace: "ns"}
		o.Loaded[id] = &chart.Chart{Metadata: &chart.Metadata{Name: "c", Version: "1"}}
		steps = append(steps, plan.Step{Action: plan.ActionInstall, Spec: "s", ReleaseSpec: id, Release: name, Namespace: "ns",
			Desired: &plan.Desired{}})
	}
	a := New(Options{Helm: h, Log: zerolog.Nop()})
	result := make(chan []error)
	go func() { result <- a.Apply(context.Background(), o, steps) }()
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
	errs := New(Options{Helm: h, Log: zerolog.Nop()}).Apply(ctx, &observe.Observed{}, steps)
	if len(h.done) != 0 {
		t.Errorf("operations started after cancel: %v", h.done)
	}
	for i, err := range errs {
		if err == nil {
			t.Errorf("step %d: no error", i)
		}
	}
}
