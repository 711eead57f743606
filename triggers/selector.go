package triggers

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/helmops"
	"github.com/autox-dev/autox/triggers/decide"
)

// Queue keys. A named spec, a selector spec's sweep and a removed spec are
// keyed by the spec's name; one object of a selector spec by
// spec/namespace/name. Spec names, namespaces and object names hold no
// "/", so a key parses back unambiguously. Every key is reconciled by one
// worker at a time, so two reconciles of one object never overlap.

// ObjectKey is the queue key of one object of a selector spec.
func ObjectKey(spec string, o decide.Object) string {
	return spec + "/" + o.Namespace + "/" + o.Name
}

// parseKey splits a queue key into its spec and, for an object key, the object.
func parseKey(key string) (spec string, obj decide.Object) {
	parts := strings.SplitN(key, "/", 3)
	if len(parts) != 3 {
		return key, decide.Object{}
	}
	return parts[0], decide.Object{Namespace: parts[1], Name: parts[2]}
}

// specOf is the spec name of a queue key.
func specOf(key string) string {
	spec, _ := parseKey(key)
	return spec
}

// memberships are, per selector spec, the objects it served in its last
// listing, sorted (decide.SortObjects): what a reconcile of one object
// admits it by, up to maxObjects, without listing again.
type memberships struct {
	mu sync.Mutex
	m  map[string]membership
}

type membership struct {
	// cfg is the config the listing was judged under: a new config may
	// select other objects or set another bound.
	cfg     *config.Config
	objects []decide.Object
}

func (ms *memberships) set(cfg *config.Config, spec string, objs []decide.Object) {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	if ms.m == nil {
		ms.m = map[string]membership{}
	}
	ms.m[spec] = membership{cfg: cfg, objects: objs}
}

func (ms *memberships) get(cfg *config.Config, spec string) ([]decide.Object, bool) {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	m, ok := ms.m[spec]
	if !ok || m.cfg != cfg {
		return nil, false
	}
	return m.objects, true
}

// claimIndex returns the claim index of cfg, built once per config.
func (r *Reconciler) claimIndex(cfg *config.Config) *decide.ClaimIndex {
	if idx := r.claims.Load(); idx != nil && idx.Config() == cfg {
		return idx
	}
	idx := decide.NewClaimIndex(cfg)
	r.claims.Store(idx)
	return idx
}

// members turns one live listing of a selector spec's objects into the
// objects it serves: those it selects with every trigger label set, and
// that no other spec claims, sorted.
func members(cfg *config.Config, idx *decide.ClaimIndex, spec *config.Spec, listed map[decide.Object]decide.Trigger) []decide.Object {
	t := spec.Trigger
	var out []decide.Object
	for o, obs := range listed {
		if st, _ := decide.Evaluate(t, obs); !st.Wanted() {
			continue
		}
		if len(idx.Claimants(t.Group, t.Resource, o, obs.Labels)) > 1 {
			continue // in conflict: served by no spec
		}
		out = append(out, o)
	}
	decide.SortObjects(out)
	return out
}

// listObjects lists a selector spec's objects live: one LIST per namespace
// it covers, with the selector. Any failure fails the whole listing;
// nothing is taken for absent.
func (r *Reconciler) listObjects(ctx context.Context, cfg *config.Config, spec *config.Spec) (map[decide.Object]decide.Trigger, error) {
	keys := keysFor(cfg, spec.Trigger)
	if len(keys) == 0 {
		return nil, fmt.Errorf("cannot list the objects of %s: the selector cannot be used", Describe(spec.Trigger))
	}
	out := map[decide.Object]decide.Trigger{}
	for _, k := range keys {
		objs, err := r.opts.Triggers.List(ctx, k)
		if err != nil {
			return nil, err
		}
		for name, obs := range objs {
			out[decide.Object{Namespace: k.Namespace, Name: name}] = obs
		}
	}
	return out, nil
}

// overLimit tells whether a wanted object is past its spec's maxObjects.
// The last listing admits it when it is among the first maxObjects there;
// otherwise (not listed yet, or past the bound in a listing that may be
// old) the objects are listed again, and only that fresh listing can put
// it past the bound.
func (r *Reconciler) overLimit(ctx context.Context, cfg *config.Config, specName string, obj decide.Object) (bool, error) {
	spec := cfg.Specs[specName]
	max := spec.Trigger.MaxObjects
	if objs, ok := r.members.get(cfg, specName); ok {
		if admitted, member := decide.Admitted(objs, max, obj); member && admitted {
			return false, nil
		}
	}
	listed, err := r.listObjects(ctx, cfg, spec)
	if err != nil {
		return false, fmt.Errorf("cannot tell whether %s is within maxObjects of spec %s: %w", obj, specName, err)
	}
	objs := members(cfg, r.claimIndex(cfg), spec, listed)
	r.members.set(cfg, specName, objs)
	admitted, member := decide.Admitted(objs, max, obj)
	if !member {
		return false, fmt.Errorf("object %s of spec %s changed between its read and the listing that followed; trying again", obj, specName)
	}
	return !admitted, nil
}

// selectorObjects are the objects a sweep or a plan of a selector spec
// looks at: every object its live listing returns, and every object one of
// its releases names (a deleted object's releases are found this way; its
// own reconcile confirms the deletion by name). Releases of the spec that
// name no object were made before it had a selector: they are returned as
// unattributed. The listing also renews the spec's membership.
func (r *Reconciler) selectorObjects(ctx context.Context, specName string) (objs []decide.Object, unattributed []*helmops.Release, err error) {
	cfg := r.opts.State.Config()
	spec := cfg.Specs[specName]
	listed, err := r.listObjects(ctx, cfg, spec)
	if err != nil {
		return nil, nil, err
	}
	r.members.set(cfg, specName, members(cfg, r.claimIndex(cfg), spec, listed))
	// Releases in a namespace that cannot be read are not seen: their
	// objects' own reconciles report that namespace, and nothing there is
	// taken for absent.
	rels, err := r.opts.Helm.SpecReleases(ctx, r.opts.State.GCNamespaces(), specName)
	if err != nil && helmops.FailedNamespaces(err) == nil {
		return nil, nil, fmt.Errorf("cannot read releases of spec %s: %w", specName, err)
	}
	seen := map[decide.Object]bool{}
	for o := range listed {
		seen[o] = true
	}
	for _, rel := range rels {
		o := rel.TriggerObject()
		switch {
		case o.IsZero():
			unattributed = append(unattributed, rel)
		case o.Name == rel.ObjectName && !decide.ObjectLabelIsName(o.Name):
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
	decide.SortObjects(objs)
	return objs, unattributed, nil
}
