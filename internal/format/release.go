package format

import (
	"time"

	"helm.sh/helm/v4/pkg/release/common"
)

// Owner is who a release belongs to: an instance's release spec of a spec,
// and for a selector spec the object it serves.
type Owner struct {
	Spec, ReleaseSpec, Instance string
	Object                      Object
}

// Release is one release as Helm's records describe it: its newest revision,
// and what earlier revisions tell. helmops reads it; the plan decides from it.
type Release struct {
	Name      string
	Namespace string
	// Spec and ReleaseSpec come from the autox labels; both are "" when the
	// release is not autox's.
	Spec        string
	ReleaseSpec string
	// Instance is the autox instance label; DefaultInstance for an autox
	// release without one, "" for a release that is not autox's (InstanceOf).
	Instance string
	// ObjectNamespace and ObjectName are the object labels of a selector
	// spec's release (see ObjectLabel), both "" for a named spec's.
	ObjectNamespace, ObjectName string

	Revision     int
	Status       common.Status
	ChartName    string
	ChartVersion string
	// Values are the user-supplied values of the latest revision. Never log them.
	Values map[string]interface{}
	// DeployedValues are the values of revision LastDeployedRevision when
	// that is not the latest revision (nil otherwise). An operation that goes
	// back to it (a rollback, an upgrade after a failure) may quote them, so
	// they are redacted too. Never log them.
	DeployedValues map[string]interface{}
	// Updated is Helm's LastDeployed of the latest revision, for display. It
	// is not the age of a lock: a client uninstalling a release leaves the
	// time of the release's last deploy there.
	Updated time.Time
	// Modified is when the latest revision's storage record was last
	// written, which is what the age of a pending or uninstalling release is
	// measured from. Zero means unknown, not infinitely old: such a release
	// is treated as locked.
	Modified      time.Time
	FirstDeployed time.Time
	// DeployedBefore is true when an earlier revision reached deployed.
	DeployedBefore bool
	// LastDeployedRevision is the newest revision that reached deployed, or 0.
	LastDeployedRevision int
}

// Managed reports whether the release carries both of autox's labels; a
// release with only one of them was not made by autox.
func (r *Release) Managed() bool { return r.Spec != "" && r.ReleaseSpec != "" }

// OwnedBy reports whether the release is autox's and belongs to that instance.
func (r *Release) OwnedBy(instance string) bool { return r.Managed() && r.Instance == instance }

// Owner is the owner the release's labels name; its object is as labelled
// (a long name in its hashed form).
func (r *Release) Owner() Owner {
	return Owner{Spec: r.Spec, ReleaseSpec: r.ReleaseSpec, Instance: r.Instance,
		Object: Object{Namespace: r.ObjectNamespace, Name: r.ObjectName}}
}

// LabelledObject is the object the release's labels name, as labelled
// (zero for a named spec's release).
func (r *Release) LabelledObject() Object {
	return Object{Namespace: r.ObjectNamespace, Name: r.ObjectName}
}

// TriggerObject is the object a selector spec's release serves (zero for a
// named spec's): from its object labels, and for a long name, whose label
// holds only a prefix and a hash, the whole name from the `autox.trigger`
// values autox injected, if it gives that label.
func (r *Release) TriggerObject() Object {
	o := r.LabelledObject()
	if o.IsZero() || ObjectLabelIsName(r.ObjectName) {
		return o
	}
	if name := InjectedTriggerName(r.Values); name != "" && ObjectLabel(name) == r.ObjectName {
		o.Name = name
	}
	return o
}

// Record is an autox release as its storage records' labels describe it,
// without decoding the release itself: what a quiet pass reads.
type Record struct {
	Name        string
	Namespace   string
	Spec        string
	ReleaseSpec string
	// Instance follows the same defaulting as Release.Instance.
	Instance string
	// ObjectNamespace and ObjectName as for Release.
	ObjectNamespace, ObjectName string
	Revision                    int
	Status                      string
	// Digest and AutoxRevision are autox's digest and revision labels
	// ("" and 0 when absent).
	Digest        string
	AutoxRevision int
}

// LabelledObject is the object the record's labels name, as labelled.
func (r Record) LabelledObject() Object {
	return Object{Namespace: r.ObjectNamespace, Name: r.ObjectName}
}
