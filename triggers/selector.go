package triggers

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/helmops"
	"github.com/autox-dev/autox/internal/format"
	"github.com/autox-dev/autox/triggers/plan"
)

// Queue keys. A named spec, a selector spec's sweep and a removed spec are
// keyed by the spec's name; one object of a selector spec by
// spec/namespace/name. Spec names, namespaces and object names hold no
// "/", so a key parses back unambiguously. Every key is reconciled by one
// worker at a time, so two reconciles of one object never overlap.

// ObjectKey is the queue key of one object of a selector spec.
func ObjectKey(spec string, o format.Object) string {
	return spec + "/" + o.Namespace + "/" + o.Name
}

// parseKey splits a queue key into its spec and, for an object key, the object.
func parseKey(key string) (spec string, obj format.Object) {
	parts := strings.SplitN(key, "/", 3)
	if len(parts) != 3 {
		return key, format.Object{}
	}
	return parts[0], format.Object{Namespace: parts[1], Name: parts[2]}
}

// specOf is the spec name of a queue key.
func specOf(key string) string {
	spec, _ := parseKey(key)
	return spec
}

// admissions are, per selector spec, the objects it serves within
// maxObjects (plan.Admit) as last computed from a live listing and the
// release records: what a reconcile of one object admits it by without
// listing again. A new object takes a free place at once; an object that
// leaves marks the admission stale, so the next object refused looks again.
type admissions struct {
	mu sync.Mutex
	m  map[string]*admission
}

type admission struct {
	// identity is the trigger it was computed for: another selector,
	// namespaces, labels or bound make it void.
	identity string
	admitted map[format.Object]bool
	max      int
	stale    bool
}

// admissionIdentity names what an admission depends on in a spec's trigger.
func admissionIdentity(cfg *config.Config, t config.Trigger) string {
	var b strings.Builder
	for _, k := range keysFor(cfg, t) {
		fmt.Fprintf(&b, "%s|%s|%s;", k.GVR, k.Namespace, k.Selector)
	}
	fmt.Fprintf(&b, "%q|%d", t.Labels, t.MaxObjects)
	return b.String()
}

func (as *admissions) set(spec, identity string, admitted map[format.Object]bool, max int) {
	as.mu.Lock()
	defer as.mu.Unlock()
	if as.m == nil {
		as.m = map[string]*admission{}
	}
	as.m[spec] = &admission{identity: identity, admitted: admitted, max: max}
}

// admit reports whether o is served: admitted already, or new while there is
// room, which it then takes. known is false when there is no admission for
// this identity; stale when a served object left since it was computed.
func (as *admissions) admit(spec, identity string, o format.Object) (ok, known, stale bool) {
	as.mu.Lock()
	defer as.mu.Unlock()
	a := as.m[spec]
	if a == nil || a.identity != identity {
		return false, false, false
	}
	if a.admitted[o] {
		return true, true, a.stale
	}
	if len(a.admitted) < a.max {
		a.admitted[o] = true
		return true, true, a.stale
	}
	return false, true, a.stale
}

// served returns the objects admitted for a spec under identity; known is
// false when there is no such admission.
func (as *admissions) served(spec, identity string) (objs []format.Object, known bool) {
	as.mu.Lock()
	defer as.mu.Unlock()
	a := as.m[spec]
	if a == nil || a.identity != identity {
		return nil, false
	}
	for o := range a.admitted {
		objs = append(objs, o)
	}
	return objs, true
}

// leave gives up the place of an object that is no longer served.
func (as *admissions) leave(spec string, o format.Object) {
	as.mu.Lock()
	defer as.mu.Unlock()
	if a := as.m[spec]; a != nil && a.admitted[o] {
		delete(a.admitted, o)
		a.stale = true
	}
}

// specLocks keep the keys of one spec apart: the reconciles of its objects
// may run together (each object's key is reconciled by one worker at a
// time), but not beside one of the spec's own key (a named or removed
// spec's reconcile, a sweep), which may act on any of the spec's releases.
type specLocks struct{ m sync.Map } // spec name -> *sync.RWMutex

func (l *specLocks) of(spec string) *sync.RWMutex {
	v, _ := l.m.LoadOrStore(spec, &sync.RWMutex{})
	return v.(*sync.RWMutex)
}

// claimIndex returns the claim index of cfg, built once per config.
func (r *Reconciler) claimIndex(cfg *config.Config) *plan.ClaimIndex {
	if idx := r.claims.Load(); idx != nil && idx.Config() == cfg {
		return idx
	}
	idx := plan.NewClaimIndex(cfg)
	r.claims.Store(idx)
	return idx
}

// wantedObjects turns one live listing of a selector spec's objects into
// those it wants: selected with every trigger label set, and claimed by no
// other spec.
func wantedObjects(idx *plan.ClaimIndex, spec *config.Spec, listed map[format.Object]plan.TriggerRead) []format.Object {
	t := spec.Trigger
	var out []format.Object
	for o, obs := range listed {
		if st, _ := plan.Evaluate(t, obs); !st.Wanted() {
			continue
		}
		if len(idx.Claimants(t.Group, t.Resource, o, obs.Labels)) > 1 {
			continue // in conflict: served by no spec
		}
		out = append(out, o)
	}
	return out
}

// recordObjects are the objects (in their label form, see
// format.ObjectLabel) that a spec's release records name.
func recordObjects(recs []format.Record, spec string) map[format.Object]bool {
	out := map[format.Object]bool{}
	for _, r := range recs {
		if r.Spec == spec && r.ObjectName != "" {
			out[format.Object{Namespace: r.ObjectNamespace, Name: r.ObjectName}] = true
		}
	}
	return out
}

// admit computes and keeps a selector spec's admission from a listing and
// the objects its records name.
func (r *Reconciler) admit(cfg *config.Config, specName string, listed map[format.Object]plan.TriggerRead, withReleases map[format.Object]bool) map[format.Object]bool {
	spec := cfg.Specs[specName]
	id := admissionIdentity(cfg, spec.Trigger)
	// An object admitted before keeps its place while it is wanted: its
	// install may be under way, not yet in the records read.
	before, _ := r.admissions.served(specName, id)
	kept := make(map[format.Object]bool, len(before))
	for _, o := range before {
		kept[o] = true
	}
	has := func(o format.Object) bool {
		return kept[o] || withReleases[format.Object{Namespace: o.Namespace, Name: format.ObjectLabel(o.Name)}]
	}
	admitted := plan.Admit(wantedObjects(r.claimIndex(cfg), spec, listed), has, spec.Trigger.MaxObjects)
	r.admissions.set(specName, id, admitted, spec.Trigger.MaxObjects)
	return admitted
}

// listObjects lists a selector spec's objects live: one LIST per namespace
// it covers, with the selector. Any failure fails the whole listing;
// nothing is taken for absent.
func (r *Reconciler) listObjects(ctx context.Context, cfg *config.Config, spec *config.Spec) (map[format.Object]plan.TriggerRead, error) {
	keys := keysFor(cfg, spec.Trigger)
	if len(keys) == 0 {
		return nil, fmt.Errorf("cannot list the objects of %s: the selector cannot be used", Describe(spec.Trigger))
	}
	out := map[format.Object]plan.TriggerRead{}
	for _, k := range keys {
		objs, err := r.opts.Triggers.List(ctx, k)
		if err != nil {
			return nil, err
		}
		for name, obs := range objs {
			out[format.Object{Namespace: k.Namespace, Name: name}] = obs
		}
	}
	return out, nil
}

// overLimit tells whether a wanted object without releases is past its
// spec's maxObjects (an object with releases never is: the bound never
// takes them away). The last admission answers; without one, or when it
// refuses the object after a served object left, the objects and the
// release records are listed again, and that fresh admission answers.
func (r *Reconciler) overLimit(ctx context.Context, cfg *config.Config, specName string, obj format.Object) (bool, error) {
	spec := cfg.Specs[specName]
	id := admissionIdentity(cfg, spec.Trigger)
	if ok, known, stale := r.admissions.admit(specName, id, obj); known && (ok || !stale) {
		return !ok, nil
	}
	if r.opts.Inventory == nil {
		return false, fmt.Errorf("cannot tell whether %s is within maxObjects of spec %s: no release inventory", obj, specName)
	}
	listed, err := r.listObjects(ctx, cfg, spec)
	if err != nil {
		return false, fmt.Errorf("cannot tell whether %s is within maxObjects of spec %s: %w", obj, specName, err)
	}
	recs, err := r.opts.Inventory.Managed(ctx, r.opts.State.GCNamespaces())
	if err != nil {
		return false, fmt.Errorf("cannot tell whether %s is within maxObjects of spec %s: %w", obj, specName, err)
	}
	r.admit(cfg, specName, listed, recordObjects(recs, specName))
	ok, _, _ := r.admissions.admit(specName, id, obj)
	return !ok, nil
}

// selectorObjects are the objects a sweep or a plan of a selector spec
// looks at: every object its live listing returns, and every object one of
// its releases names (a deleted object's releases are found this way; its
// own reconcile confirms the deletion by name). Releases of the spec that
// name no object were made before it had a selector: they are returned as
// unattributed.
func (r *Reconciler) selectorObjects(ctx context.Context, cfg *config.Config, specName string) (objs []format.Object, unattributed []*format.Release, err error) {
	spec := cfg.Specs[specName]
	listed, err := r.listObjects(ctx, cfg, spec)
	if err != nil {
		return nil, nil, err
	}
	// Releases in a namespace that cannot be read are not seen: their
	// objects' own reconciles report that namespace, and nothing there is
	// taken for absent.
	rels, err := r.opts.Helm.SpecReleases(ctx, r.opts.State.GCNamespaces(), specName)
	if err != nil && helmops.FailedNamespaces(err) == nil {
		return nil, nil, fmt.Errorf("cannot read releases of spec %s: %w", specName, err)
	}
	withReleases := map[format.Object]bool{}
	for _, rel := range rels {
		if rel.ObjectName != "" {
			withReleases[format.Object{Namespace: rel.ObjectNamespace, Name: rel.ObjectName}] = true
		}
	}
	r.admit(cfg, specName, listed, withReleases)
	seen := map[format.Object]bool{}
	for o := range listed {
		seen[o] = true
	}
	for _, rel := range rels {
		o := rel.TriggerObject()
		switch {
		case o.IsZero():
			unattributed = append(unattributed, rel)
		case o.Name == rel.ObjectName && !format.ObjectLabelIsName(o.Name):
			// A long name whose values do not give it back: its release
			// cannot be tied to an object, and is left alone.
			r.opts.Log.Warn().Str("spec", specName).Str("release", rel.Namespace+"/"+rel.Name).
				Msg("release names an object autox cannot read by name; leaving it alone")
		default:
			seen[o] = true
		}
	}
	for o := range seen {
		objs = append(objs, o)
	}
	plan.SortObjects(objs)
	return objs, unattributed, nil
}
