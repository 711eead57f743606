// Package config holds autox's desired state: the v1 config file types, strict
// loading, defaulting, validation and the diff between two accepted configs.
// Nothing here touches a cluster; a *Config that Load returns is complete and
// valid, so the rest of autox never re-checks it.
package config

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/autox-dev/autox/internal/format"
)

// DefaultTriggerLabel is the label a trigger must carry when the spec names none.
const DefaultTriggerLabel = "app.kubernetes.io/version"

// DefaultMaxObjects bounds the objects one selector spec serves when the spec
// sets no maxObjects: a selector that matches far more than intended must not
// install a release set for every object of a cluster.
const DefaultMaxObjects = 100

// DefaultSelectorReleaseName is the releaseName template of a selector spec's
// release specs that set none. It must name the object, since every matching
// object gets its own releases.
const DefaultSelectorReleaseName = "{{.Name}}-{{.ReleaseSpec}}"

// Values of ReleaseSpec.OnChange.
const (
	OnChangeUpgrade   = "upgrade"
	OnChangeReinstall = "reinstall"
)

// InjectedValuesKey is the top-level values key autox fills in itself; users
// must not set it.
const InjectedValuesKey = format.InjectedValuesKey

// Config is one whole config file, defaulted and validated. A loaded Config
// is never modified, by anyone: a reload makes a new one, and what is
// derived from one (per-object specs, the passes' remembered digests,
// plan.Digests) stays true for as long as the pointer is held.
type Config struct {
	// Namespaces are the namespaces whose autox releases this instance manages.
	Namespaces []string `json:"namespaces"`
	// Specs maps a spec name to its spec. An empty map means "no releases".
	Specs map[string]*Spec `json:"specs"`

	// Dir is the directory of the config file; chart paths are relative to it.
	Dir string `json:"-"`
}

// Spec ties one trigger object, or every object a selector matches, to the
// releases that run while it is wanted.
type Spec struct {
	Trigger      Trigger                 `json:"trigger"`
	ReleaseSpecs map[string]*ReleaseSpec `json:"releaseSpecs"`
	// MaxObjects is an accepted alias of Trigger.MaxObjects, because the bound
	// reads as a property of the spec as much as of its trigger. Load moves it
	// to Trigger.MaxObjects and leaves this 0, so there is one place to read.
	MaxObjects int `json:"maxObjects,omitempty"`
	// ServiceAccountName is the service account, in each release's
	// namespace, that the Helm operations of the spec's releases run as
	// (impersonated); a release spec's own wins. "" leaves it to the release
	// spec, then to --default-service-account, then to autox's own identity
	// (see RunsAs).
	ServiceAccountName string `json:"serviceAccountName,omitempty"`
	// Suspend freezes the spec: autox makes no Helm write for any of its
	// releases, whatever its trigger does, and keeps reporting (releasepolicy.go).
	Suspend bool `json:"suspend,omitempty"`
	// ServerSideApply is the default of its release specs' ServerSideApply.
	ServerSideApply *bool `json:"serverSideApply,omitempty"`
	// Drift is the default of its release specs' Drift.
	Drift *Drift `json:"drift,omitempty"`
}

// Trigger names the Kubernetes objects whose labels decide a spec's releases:
// one object by name, or every object a label selector matches.
type Trigger struct {
	Group    string `json:"group,omitempty"`
	Version  string `json:"version"`
	Resource string `json:"resource"`
	// Name is the one trigger object of a named trigger. Exactly one of Name
	// and Selector is set in a config; ForObject sets both.
	Name string `json:"name,omitempty"`
	// Namespace is the trigger object's namespace. A selector trigger may omit
	// it: then it matches objects in every managed namespace.
	Namespace string `json:"namespace,omitempty"`
	// Selector makes a selector trigger: every object it matches gets its own
	// releases. Never empty in a valid config (it would match everything).
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
	// MaxObjects bounds the objects a selector spec serves; defaulted to
	// DefaultMaxObjects for a selector trigger, 0 for a named one.
	MaxObjects int `json:"maxObjects,omitempty"`
	// Labels must all be present and non-empty on the object for its releases
	// to be wanted. Omitted means [DefaultTriggerLabel]; an explicit empty list
	// means the object's existence is enough.
	Labels []string `json:"labels,omitempty"`

	// selector is Selector parsed once by validation, so that Matches neither
	// parses per object nor fails. Diff ignores it: it is derived from Selector.
	selector labels.Selector
}

// ReleaseSpec is one Helm chart with values, run while its spec's trigger is wanted.
type ReleaseSpec struct {
	Chart Chart `json:"chart"`
	// ReleaseName is the Helm release name; in a selector spec it is a
	// template that RenderReleaseName renders per object (see ForObject).
	ReleaseName string `json:"releaseName,omitempty"`
	// Namespace is the release's namespace. In a selector spec without a
	// trigger namespace it may stay "": each object's namespace, by ForObject.
	Namespace string `json:"namespace,omitempty"`
	OnChange  string `json:"onChange,omitempty"`
	// Values are the user's chart values; they may hold secrets and are never logged.
	Values map[string]interface{} `json:"values,omitempty"`
	// ValuesFrom are Secrets and ConfigMaps in the release's namespace whose
	// content goes into the values, in order, under Values (see ValuesFrom).
	ValuesFrom []ValuesFrom `json:"valuesFrom,omitempty"`
	// ServiceAccountName is the service account, in the release's
	// namespace, that the release's Helm operations run as; it wins over
	// the spec's (see RunsAs).
	ServiceAccountName string `json:"serviceAccountName,omitempty"`

	// The release policies (releasepolicy.go): how autox runs the release's Helm
	// operations. None of them is part of the release format: they are in
	// neither the digest nor the injected values, so changing one writes
	// nothing by itself.
	Suspend      bool         `json:"suspend,omitempty"`
	Timeout      string       `json:"timeout,omitempty"`
	Wait         bool         `json:"wait,omitempty"`
	WaitForJobs  bool         `json:"waitForJobs,omitempty"`
	DisableHooks bool         `json:"disableHooks,omitempty"`
	CRDs         string       `json:"crds,omitempty"`
	MaxHistory   int          `json:"maxHistory,omitempty"`
	Remediation  *Remediation `json:"remediation,omitempty"`
	DependsOn    []string     `json:"dependsOn,omitempty"`
	// ServerSideApply, when set, makes installs, upgrades and rollbacks
	// apply server-side (true) or client-side (false); nil: installs apply
	// client-side, upgrades and rollbacks as the release was last applied.
	// Defaulted from the spec's.
	ServerSideApply *bool `json:"serverSideApply,omitempty"`
	// Drift is whether the release's objects are checked for changes made
	// behind autox's back, and corrected (drift.go); nil: not checked.
	// Defaulted from the spec's (the same value).
	Drift *Drift `json:"drift,omitempty"`
}

// Chart says where a chart comes from: a local Path, or Repo+Name+Version;
// and how far it is trusted: Digest pins its content, Verify asks for a
// valid provenance signature (see chart.go).
type Chart struct {
	Repo    string `json:"repo,omitempty"`
	Name    string `json:"name,omitempty"`
	Version string `json:"version,omitempty"`
	Path    string `json:"path,omitempty"`
	// Digest pins the chart's content: "sha256:<64 hex digits>", the OCI
	// manifest digest of an oci:// chart, else the sha256 of the .tgz
	// archive. "" pins nothing.
	Digest string `json:"digest,omitempty"`
	// Verify checks the chart's provenance file (.prov) against a keyring,
	// as `helm install --verify` does.
	Verify bool `json:"verify,omitempty"`
	// Keyring is the Secret holding the keyring Verify checks with; nil
	// means the --chart-keyring file.
	Keyring *Keyring `json:"keyring,omitempty"`
	// PlainHTTP pulls an oci:// chart over plain HTTP, as `helm
	// --plain-http` does: for a registry without TLS (in the cluster).
	// Like Digest and Verify it is how the chart is fetched, not what the
	// release runs: it is in no release's digest.
	PlainHTTP bool `json:"plainHTTP,omitempty"`
}

// SpecNames returns the spec names in a stable (sorted) order.
func (c *Config) SpecNames() []string {
	return sortedKeys(c.Specs)
}

// ReleaseSpecIDs returns the release spec ids of s in sorted order.
func (s *Spec) ReleaseSpecIDs() []string {
	return sortedKeys(s.ReleaseSpecs)
}

// Manages reports whether ns is one of the managed namespaces.
func (c *Config) Manages(ns string) bool {
	for _, n := range c.Namespaces {
		if n == ns {
			return true
		}
	}
	return false
}
