package driftwatch

import (
	"errors"
	"strings"
	"testing"

	"github.com/autox-dev/autox/helmops"
	"github.com/autox-dev/autox/internal/drift"
)

// TestEvents: each outcome of an object's check makes its Event, naming
// the release, the object and the paths; a clean or failed check none.
func TestEvents(t *testing.T) {
	dep := drift.ObjectRef{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "ns", Name: "d"}
	field := func(s drift.FieldState, who ...string) []drift.Field {
		return []drift.Field{{Path: "/spec/replicas", State: s, Managers: who}}
	}
	cases := map[string]struct {
		o      helmops.ObjectDrift
		reason string
		says   []string
	}{
		"warn":      {helmops.ObjectDrift{Result: drift.Result{Object: dep, Fields: field(drift.Drifted), NotCorrected: drift.ReasonWarn}}, EventDetected, []string{"/spec/replicas", "ns/d"}},
		"corrected": {helmops.ObjectDrift{Result: drift.Result{Object: dep, Fields: field(drift.Drifted)}, Corrected: true}, EventCorrected, []string{"/spec/replicas"}},
		"failed":    {helmops.ObjectDrift{Result: drift.Result{Object: dep, Fields: field(drift.Drifted)}, CorrectErr: errors.New("forbidden")}, EventCorrectionFailed, []string{"forbidden"}},
		"contested": {helmops.ObjectDrift{Result: drift.Result{Object: dep, Fields: field(drift.Contested, "hpa")}}, EventContested, []string{"written by hpa"}},
		"missing":   {helmops.ObjectDrift{Result: drift.Result{Object: dep, Missing: true}, Corrected: true}, EventCorrected, []string{"missing"}},
		"clean":     {helmops.ObjectDrift{Result: drift.Result{Object: dep}}, "", nil},
		"error":     {helmops.ObjectDrift{Result: drift.Result{Object: dep}, CheckErr: errors.New("webhook down")}, "", nil},
	}
	for name, c := range cases {
		tgt := Target{DriftTarget: helmops.DriftTarget{Namespace: "ns", Name: "d"}}
		evs := Events(tgt, &helmops.DriftReport{Objects: []helmops.ObjectDrift{c.o}})
		if c.reason == "" {
			if len(evs) != 0 {
				t.Errorf("%s: Events %+v, want none", name, evs)
			}
			continue
		}
		if len(evs) != 1 || evs[0].Reason != c.reason {
			t.Errorf("%s: Events %+v, want one %s", name, evs, c.reason)
			continue
		}
		for _, s := range c.says {
			if !strings.Contains(evs[0].Message, s) {
				t.Errorf("%s: %q does not say %q", name, evs[0].Message, s)
			}
		}
	}
}
