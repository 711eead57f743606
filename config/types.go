// Package config holds autox's desired state: the v1 config file types, strict
// loading, defaulting, validation and the diff between two accepted configs.
// Nothing here touches a cluster; a *Config that Load returns is complete and
// valid, so the rest of autox never re-checks it.
package config

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// DefaultTriggerLabel is the label a trigger must carry when the spec names none.
const DefaultTriggerLabel = "app.kubernetes.io/version"

// Values of ReleaseSpec.OnChange.
const (
	OnChangeUpgrade   = "upgrade"
	OnChangeReinstall = "reinstall"
)

// InjectedValuesKey is the top-level values key autox fills in itself; users
// must not set it.
const InjectedValuesKey = "autox"

// Config is one whole config file, defaulted and validated.
type Config struct {
	// Namespaces are the namespaces whose autox releases this instance manages.
	Namespaces []string `json:"namespaces"`
	// Specs maps a spec name to its spec. An empty map means "no releases".
	Specs map[string]*Spec `json:"specs"`

	// Dir is the directory of the config file; chart paths are relative to it.
	Dir string `json:"-"`
}

// Spec ties one trigger object to the releases that run while it is wanted.
type Spec struct {
	Trigger      Trigger                 `json:"trigger"`
	ReleaseSpecs map[string]*ReleaseSpec `json:"releaseSpecs"`
}

// Trigger names one Kubernetes object by group, version, resource, namespace and name.
type Trigger struct {
	Group     string `json:"group,omitempty"`
	Version   string `json:"version"`
	Resource  string `json:"resource"`
	Name      string `json:"name,omitempty"`
	Namespace string `json:"namespace,omitempty"`
	Selector  *metav1.LabelSelector `json:"selector,omitempty"`
	MaxObjects int `json:"maxObjects,omitempty"`
	// Labels must all be present and non-empty on the object for its releases
	// to be wanted. Omitted means [DefaultTriggerLabel]; an explicit empty list
	// means the object's existence is enough.
	Labels []string `json:"labels,omitempty"`
}

// ReleaseSpec is one Helm chart with values, run while its spec's trigger is wanted.
type ReleaseSpec struct {
	Chart       Chart  `json:"chart"`
	ReleaseName string `json:"releaseName,omitempty"`
	Namespace   string `json:"namespace,omitempty"`
	OnChange    string `json:"onChange,omitempty"`
	// Values are the user's chart values; they may hold secrets and are never logged.
	Values map[string]interface{} `json:"values,omitempty"`
	// ValuesFrom are Secrets and ConfigMaps in the release's namespace whose
	// content goes into the values, in order, under Values (see ValuesFrom).
	ValuesFrom []ValuesFrom `json:"valuesFrom,omitempty"`
}

// Chart says where a chart comes from: a local Path, or Repo+Name+Version.
type Chart struct {
	Repo    string `json:"repo,omitempty"`
	Name    string `json:"name,omitempty"`
	Version string `json:"version,omitempty"`
	Path    string `json:"path,omitempty"`
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
