package format

import (
	"crypto/sha256"
	"encoding/hex"
)

// Object names one trigger object of a selector spec. The zero Object
// stands for "no object": the releases of a named spec carry none, since
// their spec names its one trigger.
type Object struct{ Namespace, Name string }

// IsZero reports whether o is no object.
func (o Object) IsZero() bool { return o.Name == "" }

// String is namespace/name, or "" for no object.
func (o Object) String() string {
	if o.IsZero() {
		return ""
	}
	return o.Namespace + "/" + o.Name
}

// Labelled reports whether a release's object labels (namespace, name)
// name object o; for the zero Object, whether they name none.
func (o Object) Labelled(namespace, name string) bool {
	if o.IsZero() {
		return namespace == "" && name == ""
	}
	return namespace == o.Namespace && name == ObjectLabel(o.Name)
}

// AsLabelled is o as its release labels name it: the name in its label
// form (ObjectLabel).
func (o Object) AsLabelled() Object {
	if o.IsZero() {
		return o
	}
	return Object{Namespace: o.Namespace, Name: ObjectLabel(o.Name)}
}

// maxLabelValue is the longest label value Kubernetes accepts.
const maxLabelValue = 63

// objectHashPrefix is how much of a long object name its label keeps before
// the hash: 50 + "-" + 12 hex digits is 63 characters.
const objectHashPrefix = 50

// ObjectLabel is the value of the release label that names an object: the
// name itself when it fits a label value (63 characters), otherwise its first
// 50 characters, "-" and 12 hex digits of its sha256. Object names are DNS
// subdomains, whose characters are all allowed in label values, and both
// forms start and end with a letter or digit.
func ObjectLabel(name string) string {
	if len(name) <= maxLabelValue {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	return name[:objectHashPrefix] + "-" + hex.EncodeToString(sum[:])[:12]
}

// ObjectLabelIsName reports whether an object label value certainly is the
// object's whole name, so the object can be read by it. A value of the
// hashed shape may be either; callers then find the name elsewhere.
func ObjectLabelIsName(label string) bool {
	return len(label) < maxLabelValue || label[objectHashPrefix] != '-'
}
