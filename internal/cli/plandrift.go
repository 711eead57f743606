package cli

import (
	"context"
	"fmt"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/helmops"
	"github.com/autox-dev/autox/triggers/plan"
)

// What `autox plan` shows of drift (issue 33): the releases the plan leaves
// as they are, in sync, whose drift mode is warn or correct, get the check
// the drift loop makes — a server-side-apply dry run of each object as the
// release's identity — read-only whatever their mode: the plan never
// corrects, and a failed check is shown, never fails the plan.

// planDrift decides what plan does about step s's drift: the read-only
// check to make, or (nil target) the drift to show without one.
func planDrift(cfg *config.Config, s plan.Step) (*helmops.DriftTarget, *releaseDrift) {
	if s.Revision == 0 {
		return nil, unchecked("no release")
	}
	var rs *config.ReleaseSpec
	if spec := cfg.Specs[s.Spec]; spec != nil {
		rs = spec.ReleaseSpecs[s.ReleaseSpec]
	}
	switch {
	case rs == nil:
		return nil, unchecked("its release spec is not in the config")
	case s.Changes():
		return nil, unchecked("the plan changes the release")
	case !leftInSync(s):
		return nil, unchecked(fmt.Sprintf("not in sync: %s", s.Action))
	case !rs.Drift.Enabled():
		return nil, &releaseDrift{State: driftOff, Reason: "drift mode off"}
	}
	t := readOnlyTarget(s.Namespace, s.Release, s.Revision, rs.Drift, s.ServiceAccount)
	t.Suspended = s.Action == plan.ActionSuspended
	return &t, nil
}

// leftInSync says whether step s leaves its release deployed and in sync,
// also when a suspension holds it: what the drift loop would check.
func leftInSync(s plan.Step) bool {
	if s.State != plan.ReleaseInSync {
		return false
	}
	return s.Action == plan.ActionNone || s.Action == plan.ActionSuspended && s.Pending == plan.ActionNone
}

// readOnlyTarget is the drift check of a release in warn mode, whatever
// its policy's mode, with its ignore rules: it never writes but the dry
// runs. serviceAccount is the release's identity ("" for autox's own).
func readOnlyTarget(namespace, name string, revision int, policy *config.Drift, serviceAccount string) helmops.DriftTarget {
	warn := &config.Drift{Mode: config.DriftWarn}
	if policy != nil {
		warn.Ignore = policy.Ignore
	}
	t := helmops.DriftTarget{Namespace: namespace, Name: name, Revision: revision, Policy: warn}
	if serviceAccount != "" {
		t.ServiceAccount = helmops.ServiceAccount{Namespace: namespace, Name: serviceAccount}
	}
	return t
}

// planDrifts checks the drift of the plan's steps, one per step in order.
func planDrifts(ctx context.Context, checker *helmops.DriftChecker, cfg *config.Config, steps []plan.Step) []*releaseDrift {
	out := make([]*releaseDrift, len(steps))
	for i, s := range steps {
		t, d := planDrift(cfg, s)
		if t != nil {
			t.Redact = s.Hide
			d = driftOf(checker.Check(ctx, *t))
		}
		out[i] = d
	}
	return out
}
