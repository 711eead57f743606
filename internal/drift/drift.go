// Package drift decides, for one object of a release, whether it drifted
// from what the release's manifest says and how to put it back: a pure
// engine (no client, no I/O, the clock passed in). Its input is the
// object as the manifest has it, the result of a server-side-apply dry run
// of it (as the release's identity, field manager format.FieldManager) and
// the live object with its managedFields; helmops does the reads and the
// writes (helmops/drift.go).
//
// Only the fields the manifest sets are compared — the apply's field set,
// read from the dry run's managedFields — never status, never a field only
// others added. A correction is an RFC 6902 JSON patch of exactly the
// drifted fields, with the live object's resourceVersion as precondition,
// checked before it is returned never to touch an ignored path or its
// parents, nor any field outside the drifted ones.
package drift

import (
	"bytes"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/internal/format"
)

// Release names the release an object belongs to.
type Release struct {
	Namespace, Name string
}

// ObjectRef names one object of a release.
type ObjectRef struct {
	Group, Version, Kind, Namespace, Name string
}

// String is "Kind.group/namespace/name", for messages.
func (o ObjectRef) String() string {
	k := o.Kind
	if o.Group != "" {
		k += "." + o.Group
	}
	if o.Namespace == "" {
		return k + "/" + o.Name
	}
	return k + "/" + o.Namespace + "/" + o.Name
}

// RefOf is the ObjectRef of u.
func RefOf(u *unstructured.Unstructured) ObjectRef {
	gvk := u.GroupVersionKind()
	return ObjectRef{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind, Namespace: u.GetNamespace(), Name: u.GetName()}
}

// Input is what one check of one object knows.
type Input struct {
	Release Release
	// Desired is the object as the dry run sent it: the manifest's, with
	// Helm's ownership marks.
	Desired *unstructured.Unstructured
	// DryRun is the dry run's result: the live object with Desired
	// applied, as the release's identity. It may be nil when Live is.
	DryRun *unstructured.Unstructured
	// Live is the object as it is, with managedFields; nil: missing.
	Live *unstructured.Unstructured
	// Mode is config.DriftWarn or config.DriftCorrect.
	Mode string
	// Suspended: the release is reported, never written.
	Suspended bool
	Rules     *Rules
	Memory    *Memory
	Now       time.Time
}

// FieldState is what a drifted field is.
type FieldState string

const (
	// Drifted: the field differs from the manifest, and someone else
	// wrote it (or removed it).
	Drifted FieldState = "drifted"
	// Unstable: the field differs although autox wrote it last — a
	// mutating webhook or the server's defaulting changes it on each
	// write. Never corrected: an ignore rule is the cure.
	Unstable FieldState = "unstable"
	// Contested: the field was corrected Memory.Limit times within the
	// window and drifted again; never corrected until the window passed.
	Contested FieldState = "contested"
	// Overlaps: the field holds an ignored path (an atomic value with an
	// ignored part): writing it would write the ignored path. Reported only.
	Overlaps FieldState = "overlaps-ignored"
)

// Field is one drifted field. It carries no value: reports stay free of
// values and Secret data.
type Field struct {
	// Path is the field's JSON pointer in the live object (in the dry run
	// when the live object lacks it).
	Path  string
	State FieldState
	// Managers own the field in the live object now: who wrote it (none
	// when it was removed).
	Managers []string
}

// Reasons an object's drift is not corrected.
const (
	ReasonWarn         = "mode warn"
	ReasonSuspended    = "release suspended"
	ReasonKind         = "kind never corrected" // Jobs, Pods, CRDs
	ReasonOtherRelease = "names another release"
	ReasonUnmarked     = "not marked as the release's (no " + annotationReleaseName + " annotation)"
	ReasonOptedOut     = "opted out (" + format.AnnotationDrift + ": " + format.DriftDisabled + ")"
)

// Result is the check of one object.
type Result struct {
	Object ObjectRef
	// Ignored: an ignore rule with the path "" matches the whole object.
	Ignored bool
	// Missing: the object does not exist.
	Missing bool
	// Fields are the drifted fields, sorted by path.
	Fields []Field
	// NotCorrected says why the object's drift is not corrected ("" when
	// it is, or when there is none); a field's own state may also keep it.
	NotCorrected string
	// Correction is what puts the object back; nil when nothing is
	// written. It holds values (a Secret's data too): never log or print
	// it; it is left out of the Result's JSON.
	Correction *Correction `json:"-"`
}

// Drifted reports whether the object drifted at all.
func (r Result) Drifted() bool { return r.Missing || len(r.Fields) > 0 }

// Correction is one write that puts an object back.
type Correction struct {
	// Create, when set, is the missing object to create.
	Create *unstructured.Unstructured `json:"-"`
	// Patch, when Create is nil, is an RFC 6902 JSON patch of the live
	// object: it sets metadata.resourceVersion to the one read (the API
	// server refuses it with a Conflict when the object changed since),
	// then replaces or adds each drifted field.
	Patch []byte `json:"-"`
	// Paths are the fields it writes (Memory.Corrected's), "" for a create.
	Paths []string
}

// Check compares one object. An error says the input does not allow a
// comparison (a dry run without the apply's managed fields); it never
// comes with a correction.
func Check(in Input) (Result, error) {
	if in.Desired == nil {
		return Result{}, errors.New("no desired object")
	}
	res := Result{Object: RefOf(in.Desired)}
	gvk := in.Desired.GroupVersionKind()
	rules := in.Rules.forObject(gvk, in.Desired.GetNamespace(), in.Desired.GetName(), in.Desired.GetLabels())
	for _, r := range rules {
		if r.whole {
			res.Ignored = true
			return res, nil
		}
	}
	res.NotCorrected = notCorrected(in, gvk)
	if in.Live == nil {
		res.Missing = true
		if res.NotCorrected == "" && in.Memory.contested(in.Release, res.Object, "", in.Now) {
			res.NotCorrected = string(Contested)
		}
		if res.NotCorrected == "" {
			c := in.Desired.DeepCopy()
			c.SetResourceVersion("")
			c.SetManagedFields(nil)
			res.Correction = &Correction{Create: c, Paths: []string{""}}
		}
		return res, nil
	}
	if in.DryRun == nil {
		return res, errors.New("no dry run result for a live object")
	}
	applied, err := appliedSet(in.DryRun)
	if err != nil {
		return res, err
	}
	owners, err := ownersOf(in.Live)
	if err != nil {
		return res, err
	}
	live, dry := in.Live.Object, in.DryRun.Object
	secret := gvk.Group == "" && gvk.Kind == "Secret"
	var fix []fieldpath.Path
	var fixPaths []string
	applied.Leaves().Iterate(func(p fieldpath.Path) {
		if !compared(p) {
			return
		}
		dv, dtoks, dn := resolve(dry, p)
		if dn != len(p) {
			return // the apply set names it, the result lacks it: nothing to compare
		}
		lv, ltoks, ln := resolve(live, p)
		if ln == len(p) && equal(dv, lv) {
			return
		}
		// A field the live object lacks has no owner, whatever a stale
		// entry says: someone removed it.
		f := Field{Path: pointer(dtoks)}
		if ln == len(p) {
			f.Path, f.Managers = pointer(ltoks), owners.of(p)
		}
		state, ignored := classify(in, res.Object, rules, f, dtoks, ltoks, ln == len(p))
		if ignored {
			return
		}
		if secret {
			f.Path = hideSecretKey(f.Path)
		}
		f.State = state
		res.Fields = append(res.Fields, f)
		if state == Drifted {
			fix = append(fix, p.Copy())
			fixPaths = append(fixPaths, f.Path)
		}
	})
	sort.SliceStable(res.Fields, func(i, j int) bool { return res.Fields[i].Path < res.Fields[j].Path })
	fixPaths = unique(fixPaths)
	if res.NotCorrected != "" || len(fix) == 0 {
		return res, nil
	}
	patch, err := buildPatch(in, fix, rules)
	if err != nil {
		if secret {
			err = errors.New("the patch failed its checks (the Secret's paths are not shown)")
		}
		return res, fmt.Errorf("no correction of %s: %w", res.Object, err)
	}
	res.Correction = &Correction{Patch: patch, Paths: fixPaths}
	return res, nil
}

// SecretKeyHidden stands for the key in the reported path of a Secret's
// data or stringData field: a Secret's keys are not shown either.
const SecretKeyHidden = "(hidden)"

// hideSecretKey is ptr, a path of a Secret, with the key of data or
// stringData hidden.
func hideSecretKey(ptr string) string {
	for _, top := range []string{"/data/", "/stringData/"} {
		if strings.HasPrefix(ptr, top) {
			return top + SecretKeyHidden
		}
	}
	return ptr
}

// unique is sorted ss without repeats.
func unique(ss []string) []string {
	sort.Strings(ss)
	out := ss[:0]
	for i, s := range ss {
		if i == 0 || s != ss[i-1] {
			out = append(out, s)
		}
	}
	return out
}

// notCorrected says why nothing of the object is written, "" when its
// drift may be corrected.
func notCorrected(in Input, gvk schema.GroupVersionKind) string {
	switch {
	case gvk.Group == "batch" && gvk.Kind == "Job", gvk.Group == "" && gvk.Kind == "Pod",
		gvk.Group == "apiextensions.k8s.io" && gvk.Kind == "CustomResourceDefinition":
		return ReasonKind
	case format.DriftOptedOut(in.Desired.GetAnnotations()) || (in.Live != nil && format.DriftOptedOut(in.Live.GetAnnotations())):
		return ReasonOptedOut
	case in.Live != nil && namesAnotherRelease(in.Live.GetAnnotations(), in.Release):
		return ReasonOtherRelease
	case in.Live != nil && in.Live.GetAnnotations()[annotationReleaseName] == "":
		// Helm marks every object it writes: one without the mark may be
		// someone's own object of the same name, which a correction would
		// take over. Helm itself refuses to adopt such an object.
		return ReasonUnmarked
	case in.Suspended:
		return ReasonSuspended
	case in.Mode != config.DriftCorrect:
		return ReasonWarn
	}
	return ""
}

// Helm's ownership marks on a release's objects.
const (
	annotationReleaseName      = "meta.helm.sh/release-name"
	annotationReleaseNamespace = "meta.helm.sh/release-namespace"
)

func namesAnotherRelease(a map[string]string, r Release) bool {
	if n, ok := a[annotationReleaseName]; ok && n != r.Name {
		return true
	}
	if ns, ok := a[annotationReleaseNamespace]; ok && ns != r.Namespace {
		return true
	}
	return false
}

// compared reports whether a field of the apply's set is compared: never
// status, and of metadata only labels and annotations (name, namespace
// and the rest are the object's identity or the server's).
func compared(p fieldpath.Path) bool {
	if len(p) == 0 || p[0].FieldName == nil {
		return false
	}
	switch *p[0].FieldName {
	case "status", "apiVersion", "kind":
		return false
	case "metadata":
		return len(p) > 2 && p[1].FieldName != nil && (*p[1].FieldName == "labels" || *p[1].FieldName == "annotations")
	}
	return true
}

// classify decides a differing field's state, or that it is ignored.
func classify(in Input, obj ObjectRef, rules []rule, f Field, dtoks, ltoks []string, inLive bool) (FieldState, bool) {
	overlaps := false
	for _, r := range rules {
		for _, m := range f.Managers {
			if r.managers[m] {
				return "", true
			}
		}
		for _, ig := range r.paths {
			if under(dtoks, ig) || (inLive && under(ltoks, ig)) {
				return "", true
			}
			if under(ig, dtoks) || (inLive && under(ig, ltoks)) {
				overlaps = true
			}
		}
	}
	switch {
	case overlaps:
		return Overlaps, false
	case len(f.Managers) > 0 && onlyAutox(f.Managers):
		return Unstable, false
	case in.Memory.contested(in.Release, obj, f.Path, in.Now):
		return Contested, false
	}
	return Drifted, false
}

func onlyAutox(managers []string) bool {
	for _, m := range managers {
		if m != format.FieldManager {
			return false
		}
	}
	return true
}

// appliedSet is the field set of the dry run's apply: the fields the
// manifest sets, as the server's schema keys them.
func appliedSet(dry *unstructured.Unstructured) (*fieldpath.Set, error) {
	for _, e := range dry.GetManagedFields() {
		if e.Manager == format.FieldManager && e.Operation == metav1.ManagedFieldsOperationApply && e.Subresource == "" && e.FieldsV1 != nil {
			s := &fieldpath.Set{}
			if err := s.FromJSON(bytes.NewReader(e.FieldsV1.Raw)); err != nil {
				return nil, fmt.Errorf("cannot read the dry run's managed fields: %w", err)
			}
			return s, nil
		}
	}
	return nil, fmt.Errorf("the dry run's result has no managed fields of %s (Apply): nothing to compare with", format.FieldManager)
}

// owners are the live object's managedFields, parsed.
type owners []struct {
	manager string
	set     *fieldpath.Set
}

func ownersOf(live *unstructured.Unstructured) (owners, error) {
	var out owners
	for _, e := range live.GetManagedFields() {
		if e.FieldsV1 == nil {
			continue
		}
		s := &fieldpath.Set{}
		if err := s.FromJSON(bytes.NewReader(e.FieldsV1.Raw)); err != nil {
			return nil, fmt.Errorf("cannot read the live object's managed fields of %s: %w", e.Manager, err)
		}
		out = append(out, struct {
			manager string
			set     *fieldpath.Set
		}{e.Manager, s})
	}
	return out, nil
}

// of are the managers that own p, sorted, each once.
func (o owners) of(p fieldpath.Path) []string {
	seen := map[string]bool{}
	var out []string
	for _, e := range o {
		if e.set.Has(p) && !seen[e.manager] {
			seen[e.manager] = true
			out = append(out, e.manager)
		}
	}
	sort.Strings(out)
	return out
}
