// Package format is autox's release format: everything autox writes on a
// Helm release, or computes to compare with what it wrote — the label keys,
// the instance a release without one belongs to, the object label of a
// selector spec's release, the digest of chart and values, and the `autox`
// values it injects — and the vocabulary of releases and records that
// helmops reads and the plan decides from. It is a leaf: it imports no
// client, no Helm action and nothing else of autox, so that every part
// reads and writes the format the same way.
//
// The format is a contract with every earlier and later version of autox
// (docs/design.md §5 and §8): users upgrade and roll back autox under
// running experiments, and a release whose labels, digest or injected
// values a new autox computes differently would be upgraded, or not be
// recognised, by it. It is pinned by the golden files under
// testdata/format/v1. A change to any of it comes with a new Version and a
// migration that makes no Helm write; never silently.
package format

import (
	"strconv"
)

// Version is the release format this package writes and reads.
const Version = "v1"

// Release labels that mark a Helm release as autox's. They are Helm release
// labels, so the storage driver also puts them on the record's Secret or
// ConfigMap, where a label selector finds them.
const (
	// LabelSpec and LabelReleaseSpec name the spec and the release spec
	// that made the release. A release needs both to be autox's.
	LabelSpec        = "autox.dev/spec"
	LabelReleaseSpec = "autox.dev/release-spec"
	// LabelInstance names the autox installation that owns the release, so
	// that two installations can manage the same namespace. A release
	// without it belongs to DefaultInstance.
	LabelInstance = "autox.dev/instance"
	// LabelObject and LabelObjectNamespace name the trigger object a
	// selector spec's release serves (ObjectLabel: the name, or a long
	// name's prefix and hash). A named spec's releases have neither.
	LabelObject          = "autox.dev/object"
	LabelObjectNamespace = "autox.dev/object-namespace"
	// LabelDigest is Digest of the chart name, version and values autox
	// installed; with LabelRevision it lets a pass tell from record
	// metadata alone that a release needs nothing.
	LabelDigest = "autox.dev/digest"
	// LabelRevision is the revision autox's own operation created. Any other
	// Helm write (a manual upgrade or rollback) creates a record whose Helm
	// revision differs, which sends the release to the full comparison.
	LabelRevision = "autox.dev/revision"
)

// DefaultInstance is the instance of an autox release without LabelInstance
// (made before instances existed), and of an autox that names none: so an
// upgrade of autox relabels nothing.
const DefaultInstance = "autox"

// InstanceOf returns the instance a release's labels name: "" when the
// release is not autox's (either spec label missing), DefaultInstance when
// autox's labels are there but the instance label is not.
func InstanceOf(labels map[string]string) string {
	if labels[LabelSpec] == "" || labels[LabelReleaseSpec] == "" {
		return ""
	}
	if i := labels[LabelInstance]; i != "" {
		return i
	}
	return DefaultInstance
}

// OwnerOfLabels is the owner a release's labels name; its object is as
// labelled (a long name in its hashed form) and its instance as InstanceOf
// says.
func OwnerOfLabels(labels map[string]string) Owner {
	return Owner{Spec: labels[LabelSpec], ReleaseSpec: labels[LabelReleaseSpec], Instance: InstanceOf(labels),
		Object: Object{Namespace: labels[LabelObjectNamespace], Name: labels[LabelObject]}}
}

// RevisionOf is the revision autox's revision label names, 0 when there is
// none (or it is not a number).
func RevisionOf(labels map[string]string) int {
	n, _ := strconv.Atoi(labels[LabelRevision])
	return n
}

// ReleaseLabels are the Helm release labels an operation writes for a
// release of owner whose object, if any, is given by its whole name. digest
// and revision go on only with a digest ("" writes neither): revision is
// the revision the operation creates.
func ReleaseLabels(owner Owner, digest string, revision int) map[string]string {
	l := map[string]string{LabelSpec: owner.Spec, LabelReleaseSpec: owner.ReleaseSpec, LabelInstance: owner.Instance}
	if !owner.Object.IsZero() {
		l[LabelObjectNamespace] = owner.Object.Namespace
		l[LabelObject] = ObjectLabel(owner.Object.Name)
	}
	if digest != "" {
		l[LabelDigest] = digest
		l[LabelRevision] = strconv.Itoa(revision)
	}
	return l
}
