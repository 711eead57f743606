package plan

import (
	"encoding/json"

	chart "helm.sh/helm/v4/pkg/chart/v2"
	corev1 "k8s.io/api/core/v1"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/internal/format"
	"github.com/autox-dev/autox/internal/redact"
)

// Plan is the decision for one spec: steps in the order they are applied
// (removals first, then release specs by id), the release specs that could
// not be decided, and Incomplete when the spec's releases could not all be
// seen (a removed spec with releases in an unreadable namespace). It
// carries everything applying it needs: nothing is decided or looked up
// again on the way to Helm.
type Plan struct {
	Steps      []Step
	Failed     []Failure
	Incomplete error
	// Spec and Object are whose plan it is (Object zero for a named spec);
	// Ref is the trigger object its Events go on, nil when there is none.
	Spec   string
	Object format.Object
	Ref    *corev1.ObjectReference
	// Trigger is the trigger's state and why (TriggerSpecRemoved for a removed spec).
	Trigger       TriggerState
	TriggerReason string
}

// Step is one decided action for one release: a line of `autox plan`, and
// what a reconcile then does, with all it needs to do it.
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
	// ChartPlainHTTP says that the chart is pulled from its OCI registry
	// over plain HTTP, without TLS (chart.plainHTTP).
	ChartPlainHTTP bool `json:"chartPlainHTTP,omitempty"`

	// State is the release's state as classified, with its release spec's
	// own timeout: what the step was decided from.
	State ReleaseState `json:"-"`
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
	// Secrets hides only what comes from the release spec's Secret sources
	// (valuesFrom Secret): their content as read now, and what the
	// release's current values hold at the paths they set. `autox plan
	// --diff` masks it in the manifests it shows, whose other values a
	// reviewer must see.
	Secrets *redact.Redactor `json:"-"`

	// What the release policies made of the step (decide.go).
	//
	// Policy is how its operation runs: its release spec's policy (the
	// defaults for a release no release spec wants). Pending is what a
	// suspended, waiting or exhausted step would do without what holds it;
	// Suspended says what suspends it ("spec", "releaseSpec"); Unrecorded
	// says it waits for its namespace to be recorded (ManagedNamespaces);
	// Retries is where its bounded attempts stand (nil: not bounded);
	// After are the release specs whose steps in this plan must succeed
	// before this one starts.
	Policy     config.Policy `json:"-"`
	Pending    Action        `json:"pending,omitempty"`
	Suspended  string        `json:"suspended,omitempty"`
	Unrecorded bool          `json:"-"`
	Retries    *Retries      `json:"-"`
	After      []string      `json:"after,omitempty"`

	// removal marks the leading steps of releases no release spec wants.
	removal bool
	// moved marks the removal of a release whose release spec still exists
	// and wants another name or namespace (see replacements).
	moved bool
}

// Changes reports whether the step would make a Helm write.
func (s Step) Changes() bool {
	switch s.Action {
	case ActionNone, ActionConflict, ActionWait, ActionSuspended, ActionExhausted:
		return false
	}
	return true
}

// Desired is the release an install, upgrade or reinstall makes: chart and
// values, and what identifies them.
type Desired struct {
	Values       map[string]interface{}
	ChartName    string
	ChartVersion string
	// From names the source of a values path ("Secret creds"), or "" (the
	// inline values); nil for none. A diff reason names it, never the value.
	From func(path string) string
	// Mask writes a values path (its segments) for a reason, a Secret's
	// keys masked (Merged.Mask); nil writes it whole.
	Mask func(segs []string) string
	// Digest identifies chart and values for the quiet pass.
	Digest string
	// Revision is the revision the operation creates.
	Revision int
	// Source is where the chart comes from; Loaded is the chart as the
	// observation loaded it (a local chart), nil when the operation fetches
	// it (a repository chart the decision could name without it).
	Source config.Chart
	Loaded *chart.Chart
}

// Failure is a release spec that could not be decided; nothing is done for it.
type Failure struct {
	ReleaseSpec, Release, Namespace string
	// Err says why, with the release's values redacted.
	Err error
}

// MarshalJSON is a step as `autox plan -o json` prints it: with the
// policies its release spec sets, as the config writes them, and where its
// bounded attempts stand (a release spec that sets none shows none, so the
// plan of a config without policies stays as it was).
func (s Step) MarshalJSON() ([]byte, error) {
	type fields Step // the fields, without this method
	type remediation struct {
		Retries   int    `json:"retries"`
		OnFailure string `json:"onFailure"`
		Failures  int    `json:"failures"`
		Exhausted bool   `json:"exhausted,omitempty"`
		Remedied  bool   `json:"remedied,omitempty"`
	}
	type policies struct {
		Timeout      string       `json:"timeout,omitempty"`
		Wait         bool         `json:"wait,omitempty"`
		WaitForJobs  bool         `json:"waitForJobs,omitempty"`
		DisableHooks bool         `json:"disableHooks,omitempty"`
		CRDs         string       `json:"crds,omitempty"`
		MaxHistory   int          `json:"maxHistory,omitempty"`
		DependsOn    []string     `json:"dependsOn,omitempty"`
		Remediation  *remediation `json:"remediation,omitempty"`
		// ServerSideApply is shown when the release spec (or its spec) sets it.
		ServerSideApply *bool `json:"serverSideApply,omitempty"`
	}
	var shown *policies
	if rs := s.Policy.Written(); rs != nil {
		p := policies{Timeout: rs.Timeout, Wait: rs.Wait, WaitForJobs: rs.WaitForJobs, DisableHooks: rs.DisableHooks,
			CRDs: rs.CRDs, MaxHistory: rs.MaxHistory, DependsOn: rs.DependsOn, ServerSideApply: rs.ServerSideApply}
		if retries, limited := s.Policy.Retries(); limited {
			p.Remediation = &remediation{Retries: retries, OnFailure: s.Policy.Remediation.OnFailure}
			if s.Retries != nil {
				p.Remediation.Failures, p.Remediation.Exhausted, p.Remediation.Remedied = s.Retries.Failures, s.Retries.Exhausted, s.Retries.Remedied
			}
		}
		if p.Timeout != "" || p.Wait || p.WaitForJobs || p.DisableHooks || p.CRDs != "" || p.MaxHistory != 0 ||
			len(p.DependsOn) != 0 || p.Remediation != nil || p.ServerSideApply != nil {
			shown = &p
		}
	}
	return json.Marshal(struct {
		fields
		Policies *policies `json:"policies,omitempty"`
		After    []string  `json:"after,omitempty"`
	}{fields(s), shown, s.After})
}
