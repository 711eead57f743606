package plan

import (
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/internal/format"
	"github.com/autox-dev/autox/internal/redact"
)

// Observation is everything the decision for one spec needs, read before
// anything is decided.
type Observation struct {
	// Spec is the spec's name; Config is the spec, nil when the (valid)
	// config no longer has it.
	Spec   string
	Config *config.Spec
	// Instance is the autox instance deciding.
	Instance string
	// InForce is the whole config in force (Config is one spec of it): what
	// other specs want tells a release handed over by a rename from one
	// that goes (AdopterOf). Nil hands nothing over.
	InForce *config.Config
	// Trigger is the live read of the spec's trigger (unused when Config is nil).
	Trigger TriggerRead
	// Object is the object of a selector spec this observation is about:
	// Config is then the spec as it applies to that object (config.Spec.ForObject)
	// and Current holds that object's releases only. Zero for a named spec.
	Object format.Object
	// Claimants are the specs that claim the trigger object, this one
	// included (Claimants); with more than one, nothing is installed,
	// upgraded or removed for it.
	Claimants []string
	// OutOfScope says the object is in a namespace its selector spec no
	// longer covers: it is not selected, whatever its labels; the config
	// says so, so the object is not read.
	OutOfScope bool
	// OverLimit says the object is past its selector spec's maxObjects in
	// the last listing: it gets nothing new and keeps what it has.
	OverLimit bool
	// Unattributed says Current are a selector spec's releases that name no
	// object (made while it named one trigger): no object wants them, and
	// Config is nil, so they are decided like those of a removed spec.
	Unattributed bool
	// SpecSuspended says the spec is suspended where Config cannot say so
	// (Unattributed releases): nothing is written for them.
	SpecSuspended bool
	// Current are the spec's own releases in the namespaces that could be read.
	Current []*format.Release
	// Unread maps a namespace whose release records could not be read to the
	// cause: nothing there is taken for absent.
	Unread map[string]error
	// Undecodable maps a release of the key ("namespace/name") whose newest
	// record could not be decoded to the error naming it: it is not in
	// Current, is neither absent nor removable, and nothing is done to it.
	Undecodable map[string]error
	// ReleaseSpecs holds, per release spec id, what was read for it.
	ReleaseSpecs map[string]ReleaseSpecObservation
	// Now is the time of the observation; StaleAfter how old a pending
	// release must be before it counts as left by a dead process.
	Now        time.Time
	StaleAfter time.Duration
	// DefaultServiceAccount is --default-service-account: what a release
	// that names no account runs as ("" for autox's own identity).
	DefaultServiceAccount string
}

// ReleaseSpecObservation is what was read for one release spec beyond the
// spec's releases.
type ReleaseSpecObservation struct {
	// Other is the release of the wanted name when it is not one of the
	// spec's own (another tool's, spec's or instance's), nil when there is none.
	Other *format.Release
	// Chart names the desired chart; read only while the trigger is wanted.
	Chart ChartID
	// Sources are the live reads of the release spec's valuesFrom entries,
	// in their order; read only while the trigger is wanted.
	Sources []SourceValue
	// Attempts are the failed attempts recorded for the release spec's
	// release (read only for a release spec with remediation retries; nil
	// when none are recorded).
	Attempts *Attempts
	// Err is a failure to read any of it: the release spec then fails and
	// nothing is done for it.
	Err error
}

// Step is one decided action for one release: a line of `autox plan`, and
// what a reconcile then does.
type Step struct {
	Action      Action `json:"action"`
	Spec        string `json:"spec"`
	ReleaseSpec string `json:"releaseSpec"`
	Release     string `json:"release"`
	Namespace   string `json:"namespace"`
	Reason      string `json:"reason"`
	// Revision is the release's current revision, 0 when there is none.
	Revision int `json:"revision,omitempty"`
	// Object is namespace/name of the selector spec's object the release
	// serves, "" for a named spec.
	Object string `json:"object,omitempty"`
	// ServiceAccount is the account, in Namespace, that the step's Helm
	// operation runs as (config.RunsAs); "" for autox's own identity.
	ServiceAccount string `json:"serviceAccount,omitempty"`
	// ChartPinned and ChartVerified say whether the desired chart is pinned
	// by a digest and has its provenance checked.
	ChartPinned   bool `json:"chartPinned,omitempty"`
	ChartVerified bool `json:"chartVerified,omitempty"`

	// RollbackTo is the revision a rollback returns to.
	RollbackTo int `json:"-"`
	// AdoptFrom is the owner whose labels the release carries when this
	// step's release spec adopts it (AdopterOf), nil otherwise.
	AdoptFrom *format.Owner `json:"-"`
	// ReplacedBy is, on the removal of a release whose release spec now
	// wants another name or namespace, that release spec's id when its step
	// installs the new release: the new one must load and render (a dry
	// run) before the old one is removed.
	ReplacedBy string `json:"-"`
	// Desired is what an install, upgrade or reinstall makes.
	Desired *Desired `json:"-"`
	// Hide redacts the values of this release (desired, current, last
	// deployed) from every text its operation produces.
	Hide *redact.Redactor `json:"-"`

	// The release policies that shaped the step (policies.go).
	//
	// Pending is what a suspended, waiting or exhausted step would do
	// without what holds it; Suspended says what suspends it ("spec",
	// "releaseSpec"); Policies are the release spec's policies and its
	// remediation state; After are the release specs whose steps in this
	// plan must succeed before this one starts.
	Pending   Action    `json:"pending,omitempty"`
	Suspended string    `json:"suspended,omitempty"`
	Policies  *Policies `json:"policies,omitempty"`
	After     []string  `json:"after,omitempty"`

	// state is the release's state as classified; removal marks the leading
	// steps of releases no release spec wants.
	state   ReleaseState
	removal bool
	// moved marks the removal of a release whose release spec still exists
	// and wants another name or namespace (see replacements).
	moved bool
}

// LeadingRemovals is how many steps at the start of steps are uninstalls
// that wait for no other step: the removals a plan puts before its release
// specs' steps. An uninstall ordered after another one (dependsOn, Step.After)
// runs with the steps it is ordered with.
func LeadingRemovals(steps []Step) int {
	n := 0
	for n < len(steps) && steps[n].Action == ActionUninstall && len(steps[n].After) == 0 {
		n++
	}
	return n
}

// Changes reports whether the step would make a Helm write.
func (s Step) Changes() bool {
	switch s.Action {
	case ActionNone, ActionConflict, ActionWait, ActionSuspended, ActionExhausted:
		return false
	}
	return true
}

// Desired is the release a step makes.
type Desired struct {
	Values       map[string]interface{}
	ChartName    string
	ChartVersion string
	// Digest identifies chart and values for the quiet pass.
	Digest string
	// Revision is the revision the operation creates.
	Revision int
}

// Failure is a release spec that could not be decided; nothing is done for it.
type Failure struct {
	ReleaseSpec, Release, Namespace string
	// Err says why, with the release's values redacted.
	Err error
}

// Plan is the decision for one spec: steps in the order they are applied
// (removals first, then release specs by id), the release specs that could
// not be decided, and Incomplete when the spec's releases could not all be
// seen (a removed spec with releases in an unreadable namespace).
type Plan struct {
	Steps      []Step
	Failed     []Failure
	Incomplete error
	// Trigger is the trigger's state and why (TriggerSpecRemoved for a removed spec).
	Trigger       TriggerState
	TriggerReason string
}

// decide plans one spec from its observation before the policies that
// hold or order its steps (Decide).
func decide(o Observation) Plan {
	var res Plan
	spec := o.Config
	state, triggerReason := TriggerOf(o)
	res.Trigger, res.TriggerReason = state, triggerReason

	// Releases of this spec that no release spec wants under that name and
	// namespace: the release spec was removed, renamed or moved. One that
	// the config hands over to another owner is that owner's to adopt.
	for _, rel := range o.Current {
		var rs *config.ReleaseSpec
		if spec != nil {
			rs = spec.ReleaseSpecs[rel.ReleaseSpec]
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
		relState, stateReason, _ := ClassifyRelease(rel, rel.Owner(), nil, o.Now, StaleAfterFor(rs, o.StaleAfter))
		action := ActionFor(TriggerSpecRemoved, relState, config.OnChangeUpgrade)
		if action == ActionWait {
			reason = stateReason
		}
		res.Steps = append(res.Steps, Step{Action: action, Spec: o.Spec, ReleaseSpec: rel.ReleaseSpec, Release: rel.Name,
			Namespace: rel.Namespace, Reason: reason, Revision: rel.Revision, Object: releaseObject(rel), Hide: redactorOf(nil, rel, nil, nil),
			state: relState, removal: true, moved: rs != nil, ServiceAccount: config.RunsAs(spec, rs, o.DefaultServiceAccount)})
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
		ServiceAccount: config.RunsAs(o.Config, rs, o.DefaultServiceAccount), ChartPinned: rs.Chart.Pinned(), ChartVerified: rs.Chart.Verify}
	if rel != nil {
		step.Revision = rel.Revision
		step.RollbackTo = rel.LastDeployedRevision
	}

	var want *Want
	if !state.Wanted() {
		step.Hide = redactorOf(rs, rel, ro.Sources, nil)
	} else {
		merged, err := MergeValues(rs, ro.Sources, o.Config.Trigger, o.Trigger.Labels)
		// What the release gets is what its operation may quote.
		step.Hide = redactorOf(rs, rel, ro.Sources, merged.Values)
		if err != nil {
			return step, err
		}
		values := merged.Values
		want = &Want{ChartName: ro.Chart.Name, ChartVersion: ro.Chart.Version, Values: values, From: merged.From}
		digest, err := format.Digest(ro.Chart.Name, ro.Chart.Version, values)
		if err != nil {
			return step, fmt.Errorf("cannot digest the desired values: %w", err)
		}
		step.Desired = &Desired{Values: values, ChartName: ro.Chart.Name, ChartVersion: ro.Chart.Version, Digest: digest, Revision: 1}
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
	relState, relReason, err := ClassifyRelease(rel, owner, want, o.Now, StaleAfterFor(rs, o.StaleAfter))
	if err != nil {
		return step, err
	}
	step.Action = ActionFor(state, relState, rs.OnChange)
	step.state, step.Policies = relState, policiesOf(rs)
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

// releaseObject names the object a release's labels name ("" for none).
func releaseObject(rel *format.Release) string {
	return format.Object{Namespace: rel.ObjectNamespace, Name: rel.ObjectName}.String()
}

// Wants reports whether release spec rs (nil: none) wants the release of
// that namespace and name. It is the one answer to "is this the release
// this release spec makes".
func Wants(rs *config.ReleaseSpec, namespace, name string) bool {
	return rs != nil && rs.Namespace == namespace && rs.ReleaseName == name
}

// WantedBy reports whether cfg has a release spec that wants this release,
// judged from its record. A selector spec's release is wanted when its
// object labels name an object the spec can select and its name is the one
// the release spec renders for that object; when the label holds a long
// name's hash the name cannot be rendered, and the object's own reconcile
// decides (true here).
func WantedBy(cfg *config.Config, r format.Record) bool {
	s := cfg.Specs[r.Spec]
	if s == nil {
		return false
	}
	rs := s.ReleaseSpecs[r.ReleaseSpec]
	if rs == nil {
		return false
	}
	if !s.Trigger.IsSelector() {
		return r.ObjectName == "" && Wants(rs, r.Namespace, r.Name)
	}
	if r.ObjectName == "" || !cfg.Covers(s.Trigger, r.ObjectNamespace) {
		return false
	}
	if !format.ObjectLabelIsName(r.ObjectName) {
		return true
	}
	forObj, err := s.ForObject(r.Spec, r.ObjectNamespace, r.ObjectName)
	return err == nil && Wants(forObj.ReleaseSpecs[r.ReleaseSpec], r.Namespace, r.Name)
}

// OrphanSpecs returns, sorted, the names of specs that have releases cfg does
// not want by spec or release spec id: removed specs, and specs with removed,
// renamed or moved release specs. A release cfg hands over to another owner
// (AdopterOfRecord) is no orphan: that owner's reconcile adopts it.
func OrphanSpecs(cfg *config.Config, recs []format.Record) []string {
	seen := map[string]bool{}
	var out []string
	for _, r := range recs {
		if seen[r.Spec] || WantedBy(cfg, r) {
			continue
		}
		if _, handedOver := AdopterOfRecord(cfg, r); handedOver {
			continue
		}
		seen[r.Spec] = true
		out = append(out, r.Spec)
	}
	sort.Strings(out)
	return out
}

// redactorOf hides the values of a release spec (nil: none), of what its
// values sources hold (a Secret's whatever their type), of the merged values
// it wants (nil: not merged), and of a release (nil: none), its latest and
// its last deployed revision: an operation on it may quote any of them. The
// `autox` key is left out: it names the trigger, which messages must show.
func redactorOf(rs *config.ReleaseSpec, rel *format.Release, sources []SourceValue, desired map[string]interface{}) *redact.Redactor {
	var values []map[string]interface{}
	if rs != nil {
		values = append(values, rs.Values)
	}
	fromSources, fromSecrets := sourceSecrets(sources)
	values = append(values, fromSources...)
	if desired != nil {
		values = append(values, format.UserValues(desired))
	}
	if rel != nil {
		values = append(values, format.UserValues(rel.Values), format.UserValues(rel.DeployedValues))
	}
	return redact.Build(values, fromSecrets)
}

// unwantedUndecodable is the error of the key's undecodable releases that
// no release spec wants (of a removed spec or release spec): they would be
// uninstalled if they could be read, so the key is incomplete until then.
// Those a release spec wants fail that release spec instead.
func unwantedUndecodable(o Observation) error {
	keys := make([]string, 0, len(o.Undecodable))
	for k := range o.Undecodable {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var errs []error
	for _, k := range keys {
		if o.Config != nil && wantedName(o.Config, k) {
			continue
		}
		errs = append(errs, o.Undecodable[k])
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("releases of the spec that cannot be read are left as they are: %w", errors.Join(errs...))
}

// wantedName reports whether a release spec of spec wants the release
// "namespace/name".
func wantedName(spec *config.Spec, key string) bool {
	for _, rs := range spec.ReleaseSpecs {
		if rs.Namespace+"/"+rs.ReleaseName == key {
			return true
		}
	}
	return false
}

// unreadError joins the causes of unreadable namespaces, in a stable order.
func unreadError(unread map[string]error) error {
	names := make([]string, 0, len(unread))
	for ns := range unread {
		names = append(names, ns)
	}
	sort.Strings(names)
	errs := make([]error, 0, len(names))
	for _, ns := range names {
		errs = append(errs, fmt.Errorf("namespace %s: %w", ns, unread[ns]))
	}
	return errors.Join(errs...)
}
