package plan

import (
	"errors"
	"fmt"
	"slices"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/internal/format"
	"github.com/autox-dev/autox/internal/redact"
)

// The decision (DESIGN §3): the decision table for each release, then what
// the release policies make of the steps (suspend, used-up retries, a
// namespace not recorded yet, dependsOn). Like the rest of the plan it
// decides from the observation alone.

const (
	// ActionSuspended holds the step of a suspended spec or release spec:
	// no Helm write; Step.Pending says what it would do.
	ActionSuspended Action = "suspended"
	// ActionExhausted holds the step of a release spec whose remediation
	// retries are used up for what it would install: no Helm write until
	// its config, chart or trigger changes; Step.Pending says what it
	// would do.
	ActionExhausted Action = "exhausted"
)

// Decide plans one spec from its observation: the one decision of autox,
// which run, plan and the quiet pass share. The steps of a suspended spec
// or release spec are held; an install into a namespace the record of
// managed namespaces does not hold waits for it; then steps wait for the
// release specs they depend on (installs and upgrades) or that depend on
// them (uninstalls).
func Decide(o Observation) Plan {
	p := decide(o)
	hold(&p, o)
	holdUnrecorded(&p, o)
	orderRemovals(&p, o.Departed)
	order(&p, o.Config)
	return p
}

// orderRemovals keeps dependsOn for release specs that left the config
// (departed: their dependsOn, by id, as their last config said): an
// uninstall of a release spec — gone or not — comes after the removals of
// the departed release specs that depended on it, and waits while one of
// them keeps its release. So a spec removed from the file, or release specs
// removed in one edit, uninstall the chart that uses a CRD before the CRD
// chart. The removal of a moved release is the replacement's to order.
func orderRemovals(p *Plan, departed map[string][]string) {
	if len(departed) == 0 {
		return
	}
	users := make([]string, 0, len(departed))
	for id := range departed {
		users = append(users, id)
	}
	slices.Sort(users)
	for i := range p.Steps {
		s := &p.Steps[i]
		if s.Action != ActionUninstall || s.moved {
			continue
		}
	users:
		for _, user := range users {
			if user == s.ReleaseSpec || !slices.Contains(departed[user], s.ReleaseSpec) {
				continue
			}
			for j := range p.Steps {
				u := p.Steps[j]
				if !u.removal || u.moved || u.ReleaseSpec != user {
					continue
				}
				if u.Action != ActionUninstall {
					waitFor(s, user, fmt.Sprintf("it depended on this one and keeps release %s/%s: %s (%s)", u.Namespace, u.Release, u.Action, u.Reason))
					break users
				}
				if !slices.Contains(s.After, user) {
					s.After = append(s.After, user)
				}
			}
		}
	}
}

// forward reports whether a is an operation that makes the release spec's
// release: what dependsOn orders and retries count.
func forward(a Action) bool {
	return a == ActionInstall || a == ActionUpgrade || a == ActionReinstall
}

// holdUnrecorded makes an install or reinstall into a namespace the record
// of managed namespaces does not hold wait (DESIGN §4): a release there
// could not be found by a later start once the namespace left the config.
// The removal that waits for it as its replacement waits with it: without
// the install, nothing proves the replacement. A reconcile records the
// namespace first and decides again; applied unrecorded, such a step fails
// (triggers/apply).
func holdUnrecorded(p *Plan, o Observation) {
	if o.Managed == nil {
		return
	}
	held := map[string]bool{}
	for i := range p.Steps {
		s := &p.Steps[i]
		if (s.Action != ActionInstall && s.Action != ActionReinstall) || o.Managed.Holds(s.Namespace) {
			continue
		}
		why := fmt.Sprintf("namespace %s is not recorded in ConfigMap %s yet, and a release there could leak once the namespace leaves the config",
			s.Namespace, o.Managed.ConfigMap)
		if o.Managed.Err != nil {
			why += " (" + o.Managed.Err.Error() + ")"
		}
		s.Pending, s.Action, s.Unrecorded = s.Action, ActionWait, true
		s.Reason = fmt.Sprintf("%s; otherwise: %s (%s)", why, s.Pending, s.Reason)
		held[s.ReleaseSpec] = true
	}
	for i := range p.Steps {
		s := &p.Steps[i]
		if s.ReplacedBy != "" && held[s.ReplacedBy] {
			s.Pending, s.Action, s.ReplacedBy = s.Action, ActionWait, ""
			s.Reason = fmt.Sprintf("waits for the install of its replacement, whose namespace is not recorded yet; otherwise: %s (%s)", s.Pending, s.Reason)
		}
	}
}

// Unrecorded reports whether a step of p waits for its namespace to be
// recorded (holdUnrecorded).
func (p Plan) Unrecorded() bool {
	return slices.ContainsFunc(p.Steps, func(s Step) bool { return s.Unrecorded })
}

// decide plans one spec from its observation before the policies that
// hold or order its steps (Decide).
func decide(o Observation) Plan {
	res := Plan{Spec: o.Spec, Object: o.Object, Ref: o.Ref}
	spec := o.Config
	state, triggerReason := TriggerOf(o)
	res.Trigger, res.TriggerReason = state, triggerReason

	// Releases of this spec that no release spec wants under that name and
	// namespace: the release spec was removed, renamed or moved. One that
	// the config hands over to another owner is that owner's to adopt.
	// Whose policies the removals keep: the spec's, or for Unattributed
	// releases (Config nil) the selector spec's, which no object's release
	// of theirs makes wanted.
	policies := spec
	if policies == nil {
		policies = o.Policies
	}
	for _, rel := range o.Current {
		var rs, policy *config.ReleaseSpec
		if spec != nil {
			rs = spec.ReleaseSpecs[rel.ReleaseSpec]
		}
		if policies != nil {
			policy = policies.ReleaseSpecs[rel.ReleaseSpec]
		}
		if Wants(rs, rel.Namespace, rel.Name) && o.Object.Labelled(rel.ObjectNamespace, rel.ObjectName) {
			continue
		}
		if _, handedOver := AdopterOf(o.InForce, o.Instance, rel); handedOver {
			continue
		}
		reason := triggerReason
		if spec != nil {
			reason = "release spec removed from config"
			if rs != nil {
				reason = "release spec now wants " + rs.Namespace + "/" + rs.ReleaseName
			}
		}
		resolved := o.Defaults.Of(policy)
		relState, stateReason, _ := ClassifyRelease(rel, rel.Owner(), nil, o.Now, resolved.StaleAfter())
		action := ActionFor(TriggerSpecRemoved, relState, config.OnChangeUpgrade)
		if action == ActionWait {
			reason = stateReason
		}
		res.Steps = append(res.Steps, Step{Action: action, Spec: o.Spec, ReleaseSpec: rel.ReleaseSpec, Release: rel.Name,
			Namespace: rel.Namespace, Reason: reason, Revision: rel.Revision, Object: releaseObject(rel), Hide: redactorOf(nil, rel, nil, nil),
			State: relState, Policy: resolved, removal: true, moved: rs != nil, ServiceAccount: config.RunsAs(policies, policy, o.DefaultServiceAccount)})
	}
	if o.Unattributed {
		for i := range res.Steps {
			res.Steps[i].Reason = "made by this spec before it had a selector: no object's release"
		}
	}
	res.Incomplete = unwantedUndecodable(o)
	if spec == nil {
		if len(o.Unread) > 0 {
			res.Incomplete = errors.Join(res.Incomplete,
				fmt.Errorf("releases of the removed spec may remain in namespaces that could not be read: %w", unreadError(o.Unread)))
		}
		return res
	}

	for _, id := range spec.ReleaseSpecIDs() {
		rs := spec.ReleaseSpecs[id]
		ro := o.ReleaseSpecs[id]
		fail := func(hide *redact.Redactor, err error) {
			res.Failed = append(res.Failed, Failure{ReleaseSpec: id, Release: rs.ReleaseName, Namespace: rs.Namespace, Err: hide.Error(err)})
		}
		if cause, unread := o.Unread[rs.Namespace]; unread {
			fail(nil, fmt.Errorf("cannot read the release records of namespace %s: %w", rs.Namespace, cause))
			continue
		}
		if cause := o.Undecodable[rs.Namespace+"/"+rs.ReleaseName]; cause != nil {
			fail(nil, cause)
			continue
		}
		if ro.Err != nil {
			fail(redactorOf(rs, ro.Other, ro.Sources, nil), ro.Err)
			continue
		}
		step, err := stepFor(o, id, rs, ro, state, triggerReason)
		if err != nil {
			fail(step.Hide, err)
			continue
		}
		res.Steps = append(res.Steps, step)
	}
	res.Steps = replacements(res)
	return res
}

func stepFor(o Observation, id string, rs *config.ReleaseSpec, ro ReleaseSpecObservation, state TriggerState, triggerReason string) (Step, error) {
	rel := ro.Other
	for _, c := range o.Current {
		if Wants(rs, c.Namespace, c.Name) && o.Object.Labelled(c.ObjectNamespace, c.ObjectName) {
			rel = c
		}
	}
	step := Step{Spec: o.Spec, ReleaseSpec: id, Release: rs.ReleaseName, Namespace: rs.Namespace, Object: o.Object.String(),
		ServiceAccount: config.RunsAs(o.Config, rs, o.DefaultServiceAccount), ChartPinned: rs.Chart.Pinned(), ChartVerified: rs.Chart.Verify, ChartPlainHTTP: rs.Chart.PlainHTTP,
		Policy: o.Defaults.Of(rs)}
	if rel != nil {
		step.Revision = rel.Revision
		step.RollbackTo = rel.LastDeployedRevision
	}

	if !state.Wanted() {
		step.Hide = redactorOf(rs, rel, ro.Sources, nil)
		step.Secrets = secretsOf(rel, ro.Sources, Merged{})
	} else {
		merged, err := MergeValues(rs, ro.Sources, o.Config.Trigger, o.Trigger.Labels)
		// What the release gets is what its operation may quote.
		step.Hide = redactorOf(rs, rel, ro.Sources, merged.Values)
		step.Secrets = secretsOf(rel, ro.Sources, merged)
		if err != nil {
			return step, err
		}
		values := merged.Values
		digest, err := format.Digest(ro.Chart.Name, ro.Chart.Version, values)
		if err != nil {
			return step, fmt.Errorf("cannot digest the desired values: %w", err)
		}
		step.Desired = &Desired{Values: values, ChartName: ro.Chart.Name, ChartVersion: ro.Chart.Version, From: merged.From, Mask: merged.Mask,
			Digest: digest, Revision: 1, Source: rs.Chart, Loaded: ro.Loaded}
		if rel != nil {
			step.Desired.Revision = rel.Revision + 1
		}
	}
	owner := format.Owner{Spec: o.Spec, ReleaseSpec: id, Instance: o.Instance, Object: o.Object}
	from, adopt := adoption(o, id, rel)
	if adopt {
		// Handed over by a rename: judged as this release spec's own.
		adopted := *rel
		adopted.Spec, adopted.ReleaseSpec = o.Spec, id
		rel = &adopted
	}
	relState, relReason, err := ClassifyRelease(rel, owner, step.Desired, o.Now, step.Policy.StaleAfter())
	if err != nil {
		return step, err
	}
	step.Action = ActionFor(state, relState, rs.OnChange)
	step.State = relState
	if adopt {
		step.AdoptFrom = &from
		if step.Action == ActionNone && relState == ReleaseInSync && state.Wanted() {
			step.Action = ActionAdopt
		}
		relReason = fmt.Sprintf("release of spec %s, release spec %s, which left the config; %s", from.Spec, from.ReleaseSpec, relReason)
	}
	switch {
	case state == TriggerConflict || state == TriggerOverLimit:
		step.Reason = triggerReason
	case step.Action == ActionUninstall:
		step.Reason = triggerReason
	case step.Action == ActionInstall:
		step.Reason = triggerReason + ", release not found"
	default:
		step.Reason = relReason
	}
	remediate(&step, rs, ro, rel, state)
	return step, nil
}

// hold suspends every step of a suspended spec, and of a suspended
// release spec: no Helm write of any kind, and what it would do is kept.
func hold(p *Plan, o Observation) {
	for i := range p.Steps {
		s := &p.Steps[i]
		who := config.SuspendedBySpec
		switch {
		case o.SpecSuspended:
		case o.Config != nil:
			who = o.Config.Suspended(s.ReleaseSpec)
		case o.Policies != nil:
			who = o.Policies.Suspended(s.ReleaseSpec)
		default:
			who = ""
		}
		if who == "" {
			continue
		}
		s.Suspended, s.Pending, s.Action = who, s.Action, ActionSuspended
		if who == config.SuspendedBySpec {
			s.Reason = fmt.Sprintf("spec suspended; otherwise: %s (%s)", s.Pending, s.Reason)
		} else {
			s.Reason = fmt.Sprintf("release spec suspended; otherwise: %s (%s)", s.Pending, s.Reason)
		}
	}
}

// deployed reports whether a step leaves its release deployed as it is.
func (s Step) deployed() bool {
	return s.Action != ActionUninstall && (s.State == ReleaseInSync || s.State == ReleaseOutOfSync)
}

// order makes the steps of spec's release specs wait for their
// dependencies: an install, upgrade or reinstall runs after the write
// steps of the release specs it depends on (After), or waits when one of
// them is neither deployed nor made so by this plan; an uninstall runs
// after the uninstalls of the release specs that depend on it, or waits
// while one of them keeps its release.
func order(p *Plan, spec *config.Spec) {
	if spec == nil {
		return
	}
	idx := map[string]int{}
	for i, s := range p.Steps {
		if !s.removal {
			idx[s.ReleaseSpec] = i
		}
	}
	ids := spec.DependencyOrder()
	for _, id := range ids {
		i, ok := idx[id]
		if !ok || !forward(p.Steps[i].Action) {
			continue
		}
		s := &p.Steps[i]
		for _, dep := range spec.ReleaseSpecs[id].DependsOn {
			j, ok := idx[dep]
			switch {
			case !ok:
				waitFor(s, dep, "it could not be decided")
			case forward(p.Steps[j].Action) || p.Steps[j].Action == ActionRollback:
				s.After = append(s.After, dep)
				continue
			case p.Steps[j].deployed():
				continue
			default:
				waitFor(s, dep, fmt.Sprintf("release %s/%s is not deployed: %s (%s)", p.Steps[j].Namespace, p.Steps[j].Release, p.Steps[j].Action, p.Steps[j].Reason))
			}
			break
		}
	}
	for k := len(ids) - 1; k >= 0; k-- {
		i, ok := idx[ids[k]]
		if !ok || p.Steps[i].Action != ActionUninstall {
			continue
		}
		s := &p.Steps[i]
		for _, user := range spec.Dependents(ids[k]) {
			j, ok := idx[user]
			switch {
			case !ok:
				waitFor(s, user, "it depends on this one and could not be decided")
			case p.Steps[j].Action == ActionUninstall:
				s.After = append(s.After, user)
				continue
			case p.Steps[j].State == ReleaseAbsent || p.Steps[j].State == ReleaseConflict:
				continue // it has no release of ours
			default:
				waitFor(s, user, fmt.Sprintf("it depends on this one and keeps release %s/%s: %s (%s)", p.Steps[j].Namespace, p.Steps[j].Release, p.Steps[j].Action, p.Steps[j].Reason))
			}
			break
		}
	}
}

// waitFor holds step s for release spec id: nothing is done for it in this
// plan; a later reconcile (an event, the pass) tries again.
func waitFor(s *Step, id, why string) {
	s.Pending, s.Action, s.After = s.Action, ActionWait, nil
	s.Reason = fmt.Sprintf("waits for release spec %s: %s", id, why)
}
