package plan

import (
	"time"

	chart "helm.sh/helm/v4/pkg/chart/v2"
	corev1 "k8s.io/api/core/v1"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/internal/format"
)

// Observation is everything the decision for one spec needs, read before
// anything is decided (triggers/observe reads it).
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
	// Trigger is the live read of the spec's trigger (unused when Config is
	// nil); Ref is that object, for the Events of its plan (nil when there
	// is none).
	Trigger TriggerRead
	Ref     *corev1.ObjectReference
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
	// Policies is the spec whose release specs' policies and identities the
	// releases of Current keep when Config is nil: the selector spec of
	// Unattributed releases, whose release spec (by id) still exists — its
	// suspend, timeout, disableHooks, serviceAccountName and the rest.
	// Nil for a removed spec: it has none.
	Policies *config.Spec
	// Departed are the dependsOn of the spec's release specs that left the
	// config, by release spec id, as the last config in force that had them
	// said: their removals keep that order. Nil when none is known (a
	// process started after the change knows none).
	Departed map[string][]string
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
	// Managed is the record of managed namespaces as read (DESIGN §4): an
	// install or reinstall into a namespace it does not hold waits for it.
	// Nil when no record is kept: nothing waits.
	Managed *ManagedNamespaces
	// Now is the time of the observation.
	Now time.Time
	// Defaults are the policies of release specs that set none
	// (--helm-timeout, --max-history): each step's policy is its release
	// spec's, resolved with them (config.PolicyDefaults.Of).
	Defaults config.PolicyDefaults
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
	// Loaded is a local chart as loaded to name it (a fresh load, which its
	// operation may use once: Helm mutates what it installs); nil for a
	// repository chart, fetched only when an operation needs it.
	Chart  ChartID
	Loaded *chart.Chart
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

// ManagedNamespaces is the record of the namespaces an instance manages
// (DESIGN §4) as last read or written: a release is never installed where
// a later start could not find it.
type ManagedNamespaces struct {
	// ConfigMap is namespace/name of the record, for the reasons that name it.
	ConfigMap string
	// Namespaces are the namespaces it holds.
	Namespaces []string
	// Err is why it could not be read or written lately, nil when it could.
	Err error
}

// Holds reports whether the record holds namespace ns; a nil record holds
// every namespace (none is kept).
func (m *ManagedNamespaces) Holds(ns string) bool {
	if m == nil {
		return true
	}
	for _, n := range m.Namespaces {
		if n == ns {
			return true
		}
	}
	return false
}
