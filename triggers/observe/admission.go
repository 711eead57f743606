package observe

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

// Admissions are, per selector spec, the objects it serves within
// maxObjects (plan.Admit) as last computed from a live listing and the
// release records: what a reconcile of one object admits it by without
// listing again. A new object takes a free place at once; an object that
// leaves marks the admission stale, so the next object refused looks again.
type Admissions struct {
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

// Identity names what an admission depends on in a spec's trigger.
func Identity(cfg *config.Config, t config.Trigger) string {
	var b strings.Builder
	for _, k := range KeysFor(cfg, t) {
		fmt.Fprintf(&b, "%s|%s|%s;", k.GVR, k.Namespace, k.Selector)
	}
	fmt.Fprintf(&b, "%q|%d", t.Labels, t.MaxObjects)
	return b.String()
}

// Set records the admission of a spec under identity.
func (as *Admissions) Set(spec, identity string, admitted map[format.Object]bool, max int) {
	as.mu.Lock()
	defer as.mu.Unlock()
	if as.m == nil {
		as.m = map[string]*admission{}
	}
	as.m[spec] = &admission{identity: identity, admitted: admitted, max: max}
}

// Admit reports whether o is served: admitted already, or new while there is
// room, which it then takes. known is false when there is no admission for
// this identity; stale when a served object left since it was computed.
func (as *Admissions) Admit(spec, identity string, o format.Object) (ok, known, stale bool) {
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

// Served returns the objects admitted for a spec under identity; known is
// false when there is no such admission.
func (as *Admissions) Served(spec, identity string) (objs []format.Object, known bool) {
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

// Leave gives up the place of an object that is no longer served.
func (as *Admissions) Leave(spec string, o format.Object) {
	as.mu.Lock()
	defer as.mu.Unlock()
	if a := as.m[spec]; a != nil && a.admitted[o] {
		delete(a.admitted, o)
		a.stale = true
	}
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

// Admit computes and keeps a selector spec's admission from a listing and
// the objects its records name (plan.AdmitListed): an object admitted before
// keeps its place while it is wanted, its install may be under way and not
// yet in the records read.
func (ob *Observer) Admit(cfg *config.Config, specName string, listed map[format.Object]plan.TriggerRead, withReleases map[format.Object]bool) map[format.Object]bool {
	spec := cfg.Specs[specName]
	id := Identity(cfg, spec.Trigger)
	before, _ := ob.admissions.Served(specName, id)
	admitted := plan.AdmitListed(ob.Claims(cfg), spec, listed, before, withReleases)
	ob.admissions.Set(specName, id, admitted, spec.Trigger.MaxObjects)
	return admitted
}

// listObjects lists a selector spec's objects live: one LIST per namespace
// it covers, with the selector. Any failure fails the whole listing;
// nothing is taken for absent.
func (ob *Observer) listObjects(ctx context.Context, cfg *config.Config, spec *config.Spec) (map[format.Object]plan.TriggerRead, error) {
	keys := KeysFor(cfg, spec.Trigger)
	if len(keys) == 0 {
		return nil, fmt.Errorf("cannot list the objects of %s: the selector cannot be used", Describe(spec.Trigger))
	}
	out := map[format.Object]plan.TriggerRead{}
	for _, k := range keys {
		objs, err := ob.opts.Triggers.List(ctx, k)
		if err != nil {
			return nil, err
		}
		for name, obs := range objs {
			out[format.Object{Namespace: k.Namespace, Name: name}] = obs
		}
	}
	return out, nil
}

// specObjects returns what the sweep needs of a selector spec's releases:
// which objects they name, and whole releases where the labels do not
// tell (releases naming no object, made before the spec had a selector,
// and long object names, whose whole name is in the values). From record
// metadata (the index, where there is one) when every release names its
// object in full: the sweep of a spec with thousands of objects then reads
// no release record (a release whose newest record does not decode but
// whose labels name its object is its object's: that object's reconcile
// reads it and fails). Releases in a namespace that cannot be read are not
// seen: their objects' own reconciles report that namespace, and nothing
// there is taken for absent. undecodable are the spec's releases read whole
// whose newest record does not decode (helmops.FailedReleases).
func (ob *Observer) specObjects(ctx context.Context, specName string) (rels []*format.Release, undecodable map[string]error, err error) {
	if ob.opts.Records != nil {
		recs, err := ob.opts.Records.Managed(ctx, ob.opts.GCNamespaces())
		if err != nil && helmops.FailedNamespaces(err) == nil {
			return nil, nil, fmt.Errorf("cannot read releases of spec %s: %w", specName, err)
		}
		var out []*format.Release
		whole := true
		for _, r := range recs {
			if r.Spec != specName {
				continue
			}
			if r.ObjectName == "" || !format.ObjectLabelIsName(r.ObjectName) {
				whole = false
				break
			}
			out = append(out, &format.Release{Record: r})
		}
		if whole {
			return out, nil, nil
		}
	}
	rels, err = ob.opts.Releases.SpecReleases(ctx, ob.opts.GCNamespaces(), specName)
	undecodable = helmops.FailedReleases(err)
	if err != nil && helmops.FailedNamespaces(err) == nil && undecodable == nil {
		return nil, nil, fmt.Errorf("cannot read releases of spec %s: %w", specName, err)
	}
	return rels, undecodable, nil
}

// overLimit tells whether a wanted object without releases is past its
// spec's maxObjects (an object with releases never is: the bound never
// takes them away). The last admission answers; without one, or when it
// refuses the object after a served object left, the objects and the
// release records are listed again, and that fresh admission answers.
func (ob *Observer) overLimit(ctx context.Context, cfg *config.Config, specName string, obj format.Object) (bool, error) {
	spec := cfg.Specs[specName]
	id := Identity(cfg, spec.Trigger)
	if ok, known, stale := ob.admissions.Admit(specName, id, obj); known && (ok || !stale) {
		return !ok, nil
	}
	if ob.opts.Records == nil {
		return false, fmt.Errorf("cannot tell whether %s is within maxObjects of spec %s: no release records reader", obj, specName)
	}
	listed, err := ob.listObjects(ctx, cfg, spec)
	if err != nil {
		return false, fmt.Errorf("cannot tell whether %s is within maxObjects of spec %s: %w", obj, specName, err)
	}
	recs, err := ob.opts.Records.Managed(ctx, ob.opts.GCNamespaces())
	if err != nil {
		return false, fmt.Errorf("cannot tell whether %s is within maxObjects of spec %s: %w", obj, specName, err)
	}
	ob.Admit(cfg, specName, listed, recordObjects(recs, specName))
	ok, _, _ := ob.admissions.Admit(specName, id, obj)
	return !ok, nil
}

// SelectorObjects are the objects a sweep or a plan of a selector spec
// looks at: every object its live listing returns, and every object one of
// its releases names (a deleted object's releases are found this way; its
// own reconcile confirms the deletion by name). Releases of the spec that
// name no object were made before it had a selector: they are returned as
// the observation of the unattributed (Unattributed), with the spec's
// releases whose newest record cannot be decoded, which are not known to
// name an object and keep that observation incomplete.
func (ob *Observer) SelectorObjects(ctx context.Context, cfg *config.Config, specName string) (objs []format.Object, unattributed *plan.Observation, err error) {
	spec := cfg.Specs[specName]
	listed, err := ob.listObjects(ctx, cfg, spec)
	if err != nil {
		return nil, nil, err
	}
	rels, undecodable, err := ob.specObjects(ctx, specName)
	if err != nil {
		return nil, nil, err
	}
	var unattributedRels []*format.Release
	withReleases := map[format.Object]bool{}
	for _, rel := range rels {
		if rel.ObjectName != "" {
			withReleases[format.Object{Namespace: rel.ObjectNamespace, Name: rel.ObjectName}] = true
		}
	}
	ob.Admit(cfg, specName, listed, withReleases)
	seen := map[format.Object]bool{}
	for o := range listed {
		seen[o] = true
	}
	for _, rel := range rels {
		o := rel.TriggerObject()
		switch {
		case o.IsZero():
			unattributedRels = append(unattributedRels, rel)
		case o.Name == rel.ObjectName && !format.ObjectLabelIsName(o.Name):
			// A long name whose values do not give it back: its release
			// cannot be tied to an object, and is left alone.
			ob.opts.Log.Warn().Str("spec", specName).Str("release", rel.Namespace+"/"+rel.Name).
				Msg("release names an object autox cannot read by name; leaving it alone")
		default:
			seen[o] = true
		}
	}
	for o := range seen {
		objs = append(objs, o)
	}
	plan.SortObjects(objs)
	return objs, ob.Unattributed(cfg, specName, unattributedRels, undecodable), nil
}
