package cli

import (
	"fmt"
	"strings"

	"github.com/autox-dev/autox/helmops"
)

// What `autox plan` and `autox list --drift` show of a release's drift:
// one shape and one decision of its state (driftOf), so that the two
// commands agree. It names objects and paths only, never a value: the
// check's report holds none (a Secret's keys are hidden in its paths) and
// its errors are redacted of the release's values.

// States of a releaseDrift.
const (
	// driftUnchecked: no check was made (the release is not deployed, or
	// the plan changes it); Reason says why. The table shows "-".
	driftUnchecked = "unchecked"
	// driftOff: the release's drift mode is off.
	driftOff = "off"
	// driftNone: every object was checked and none drifted.
	driftNone = "none"
	// driftDrifted: some object's fields differ from the manifest.
	driftDrifted = "drifted"
	// driftMissing: some object is missing, and no other drifted.
	driftMissing = "missing"
	// driftError: the check failed, for the release or for some object,
	// and found no drift elsewhere; Error says why.
	driftError = "error"
)

// releaseDrift is what a read-only drift check found of one release.
type releaseDrift struct {
	State  string `json:"state"`
	Reason string `json:"reason,omitempty"`
	// Objects are the objects that drifted or are missing.
	Objects []driftedObject `json:"objects,omitempty"`
	// Error says why the release, or some of its objects, could not be
	// checked; it may come with drifted objects (the others').
	Error string `json:"error,omitempty"`
}

// driftedObject is one object that drifted: its drifted fields as JSON
// pointers (a Secret's keys hidden), or Missing.
type driftedObject struct {
	Group     string   `json:"group"`
	Kind      string   `json:"kind"`
	Namespace string   `json:"namespace,omitempty"`
	Name      string   `json:"name"`
	Missing   bool     `json:"missing,omitempty"`
	Paths     []string `json:"paths,omitempty"`
}

// String is "Kind.group/namespace/name: paths" (or ": missing").
func (o driftedObject) String() string {
	k := o.Kind
	if o.Group != "" {
		k += "." + o.Group
	}
	if o.Namespace != "" {
		k += "/" + o.Namespace
	}
	k += "/" + o.Name
	if o.Missing {
		return k + ": missing"
	}
	return k + ": " + strings.Join(o.Paths, ",")
}

// unchecked is the drift of a release no check was made of, and why.
func unchecked(reason string) *releaseDrift {
	return &releaseDrift{State: driftUnchecked, Reason: reason}
}

// driftOf decides a release's drift state from a read-only check's report
// (or the error that the release could not be checked at all). A failure
// never hides drift found in other objects: drifted or missing wins, and
// the failure is in Error.
func driftOf(rep *helmops.DriftReport, err error) *releaseDrift {
	if err != nil {
		return &releaseDrift{State: driftError, Reason: "the release could not be checked", Error: err.Error()}
	}
	d := &releaseDrift{State: driftNone, Reason: "no object drifted"}
	var failed []string
	fields, missing := 0, 0
	for _, o := range rep.Objects {
		switch {
		case o.CheckErr != nil:
			failed = append(failed, o.CheckErr.Error())
			continue
		case !o.Drifted():
			continue
		}
		ref := o.Object
		obj := driftedObject{Group: ref.Group, Kind: ref.Kind, Namespace: ref.Namespace, Name: ref.Name, Missing: o.Missing}
		if o.Missing {
			missing++
		} else {
			fields++
		}
		for _, f := range o.Fields {
			obj.Paths = append(obj.Paths, f.Path)
		}
		d.Objects = append(d.Objects, obj)
	}
	switch {
	case fields > 0:
		d.State, d.Reason = driftDrifted, fmt.Sprintf("%d object(s) drifted, %d missing", fields, missing)
	case missing > 0:
		d.State, d.Reason = driftMissing, fmt.Sprintf("%d object(s) missing", missing)
	case len(failed) > 0:
		d.State, d.Reason = driftError, fmt.Sprintf("%d object(s) could not be checked", len(failed))
	}
	if len(failed) > 0 {
		d.Error = strings.Join(failed, "; ")
	}
	return d
}

// driftColumn is the DRIFT column of a plan step or a list row: the state,
// then what drifted or why the check failed; "-" when nothing was checked.
func driftColumn(d *releaseDrift) string {
	if d == nil || d.State == driftUnchecked {
		return "-"
	}
	out := d.State
	if len(d.Objects) > 0 {
		objs := make([]string, len(d.Objects))
		for i, o := range d.Objects {
			objs[i] = o.String()
		}
		out += ": " + strings.Join(objs, "; ")
	}
	if d.State == driftError {
		out += ": " + d.Error
	}
	return out
}
