package observe

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/triggers/plan"
)

// listCounter records the LISTs that reach it; it lists nothing.
type listCounter struct{ listed []ListKey }

func (l *listCounter) Get(context.Context, config.Trigger) (plan.TriggerRead, *corev1.ObjectReference, error) {
	return plan.TriggerRead{}, nil, nil
}

func (l *listCounter) List(_ context.Context, k ListKey) (map[string]plan.TriggerRead, error) {
	l.listed = append(l.listed, k)
	return map[string]plan.TriggerRead{}, nil
}

func (l *listCounter) Reference(config.Trigger, string) *corev1.ObjectReference { return nil }

// TestListTriggersOfTheWantedSpecs: a pass lists the triggers of the specs
// it wants only (a shard's: its named specs and the selectors), each
// listing once however many specs share it.
func TestListTriggersOfTheWantedSpecs(t *testing.T) {
	dir := t.TempDir()
	cfg, err := config.Parse([]byte(`
namespaces: [a, b]
specs:
  one:
    trigger: {group: apps, version: v1, resource: deployments, name: one, namespace: a}
    releaseSpecs: {x: {chart: {path: c}}}
  two:
    trigger: {group: apps, version: v1, resource: deployments, name: two, namespace: a}
    releaseSpecs: {x: {chart: {path: c}}}
  three:
    trigger: {group: apps, version: v1, resource: deployments, name: three, namespace: b}
    releaseSpecs: {x: {chart: {path: c}}}
`), dir)
	if err != nil {
		t.Fatal(err)
	}
	lists := &listCounter{}
	ob := New(Options{Triggers: lists})
	namespaces := func() []string {
		var out []string
		for _, k := range lists.listed {
			out = append(out, k.Namespace)
		}
		slices.Sort(out)
		return out
	}
	ob.ListTriggers(context.Background(), cfg, nil)
	if got := namespaces(); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("every spec: listed %v, want a and b once each", got)
	}
	lists.listed = nil
	listed := ob.ListTriggers(context.Background(), cfg, func(spec string) bool { return spec == "three" })
	if got := namespaces(); !slices.Equal(got, []string{"b"}) {
		t.Errorf("spec three only: listed %v, want b", got)
	}
	if l := Listings(cfg, listed); l["one"].OK || !l["three"].OK {
		t.Errorf("listings: %+v, want one not read, three read", l)
	}
}
