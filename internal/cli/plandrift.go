package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/helmops"
	"github.com/autox-dev/autox/internal/format"
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

// newestByAutox decides, from the release's record as listed (found: it
// is there; err: its namespace could not be listed), whether the revision
// the plan read is autox's own newest one, as the drift loop requires
// (triggers' DriftTargets): nil when it is, else the drift to show without
// a check; one another Helm client wrote is not checked (writtenByAnother).
func newestByAutox(rec format.Record, found bool, err error, revision int) *releaseDrift {
	switch {
	case err != nil:
		return &releaseDrift{State: driftError, Reason: "the release could not be checked", Error: err.Error()}
	case !found:
		return unchecked("no release")
	case rec.Revision != revision:
		return unchecked(fmt.Sprintf("its newest revision is %d now, not the plan's %d", rec.Revision, revision))
	}
	return writtenByAnother(rec)
}

// writtenByAnother is the drift to show, without a check, of a release
// whose newest revision another Helm client wrote (a manual upgrade or
// rollback: autox's revision label names an older one, or there is no
// digest), nil when autox wrote it: the drift loop's rule (triggers'
// DriftTargets), which plan and list --drift follow so that the three agree.
func writtenByAnother(rec format.Record) *releaseDrift {
	if rec.Digest == "" || rec.AutoxRevision != rec.Revision {
		return unchecked(fmt.Sprintf("revision %d was written by another Helm client, not autox: the drift loop does not check it", rec.Revision))
	}
	return nil
}

// planDrifts checks the drift of the plan's steps, one per step in order.
// records lists the releases' records (helmops.Inventory.Managed): one
// metadata LIST per namespace with a release to check, read-only.
func planDrifts(ctx context.Context, checker *helmops.DriftChecker, records func(context.Context, []string) ([]format.Record, error),
	cfg *config.Config, steps []plan.Step) []*releaseDrift {
	out := make([]*releaseDrift, len(steps))
	targets := make([]*helmops.DriftTarget, len(steps))
	var namespaces []string
	seen := map[string]bool{}
	for i, s := range steps {
		targets[i], out[i] = planDrift(cfg, s)
		if targets[i] != nil && !seen[s.Namespace] {
			seen[s.Namespace] = true
			namespaces = append(namespaces, s.Namespace)
		}
	}
	if len(namespaces) == 0 {
		return out
	}
	recs, err := records(ctx, namespaces)
	byName := make(map[string]format.Record, len(recs))
	for _, r := range recs {
		byName[r.Namespace+"/"+r.Name] = r
	}
	var nsErr *helmops.NamespacesError
	for i, t := range targets {
		if t == nil {
			continue
		}
		rec, found := byName[t.Namespace+"/"+t.Name]
		readErr := err // a listed record holds, whatever failed elsewhere
		if errors.As(err, &nsErr) {
			readErr = nsErr.Failed[t.Namespace]
		}
		if found {
			readErr = nil
		}
		if d := newestByAutox(rec, found, readErr, t.Revision); d != nil {
			out[i] = d
			continue
		}
		t.Redact = steps[i].Hide
		out[i] = driftOf(checker.Check(ctx, *t))
	}
	return out
}
