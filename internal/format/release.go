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

// Record is an autox release as its storage records' labels describe it,
// without decoding the release itself: its newest revision's name, owner
// and status, and autox's digest and revision labels. A quiet pass reads
// records only; a Release is a record with what its decoded revisions tell.
type Record struct {
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
	// Revision and Status are the newest revision's.
	Revision int
	Status   common.Status
	// Digest and AutoxRevision are autox's digest and revision labels
	// ("" and 0 when absent).
	Digest        string
	AutoxRevision int
}

// RecordOf is the record of release name in namespace whose newest
// revision, revision, carries labels: its storage record's labels, Helm's
// own status label included.
func RecordOf(name, namespace string, revision int, labels map[string]string) Record {
	return Record{Name: name, Namespace: namespace, Spec: labels[LabelSpec], ReleaseSpec: labels[LabelReleaseSpec], Instance: InstanceOf(labels),
		ObjectNamespace: labels[LabelObjectNamespace], ObjectName: labels[LabelObject], Revision: revision, Status: common.Status(labels["status"]),
		Digest: labels[LabelDigest], AutoxRevision: RevisionOf(labels)}
}

// Managed reports whether the release carries both of autox's labels; a
// release with only one of them was not made by autox.
func (r Record) Managed() bool { return r.Spec != "" && r.ReleaseSpec != "" }

// OwnedBy reports whether the release is autox's and belongs to that instance.
func (r Record) OwnedBy(instance string) bool { return r.Managed() && r.Instance == instance }

// Owner is the owner the release's labels name; its object is as labelled
// (a long name in its hashed form).
func (r Record) Owner() Owner {
	return Owner{Spec: r.Spec, ReleaseSpec: r.ReleaseSpec, Instance: r.Instance, Object: r.LabelledObject()}
}

// LabelledObject is the object the release's labels name, as labelled
// (zero for a named spec's release).
func (r Record) LabelledObject() Object {
	return Object{Namespace: r.ObjectNamespace, Name: r.ObjectName}
}

// Release is one release as Helm's records describe it: its newest
// revision's record, and what its decoded revisions tell. helmops reads it;
// the plan decides from it.
type Release struct {
	Record
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
