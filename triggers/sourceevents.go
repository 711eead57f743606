package triggers

import (
	"slices"
	"time"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/triggers/observe"
)

// sourceUser is a queue key that uses a values source: a named spec, or a
// selector spec — whose objects in objectNamespace, when the release
// namespace is the object's (perObject), or else all of them by its sweep.
type sourceUser struct {
	spec            string
	perObject       bool
	objectNamespace string
}

// sourceInformerKeys are the values sources cfg references, one informer
// key each: an informer per object, with a field selector on its name, so
// that RBAC can name the objects (resourceNames) and nothing else is watched.
// For a selector spec, every namespace it covers where its release spec may
// live; sourceUsers says who uses each. Of those, the ones a spec of shard
// sh uses (nil: every one).
func sourceInformerKeys(cfg *config.Config, sh *Shard) []observe.ListKey {
	users := sourceUsers(cfg)
	keys := make([]observe.ListKey, 0, len(users))
	for k, us := range users {
		if slices.ContainsFunc(us, func(u sourceUser) bool { return sh.watchesSpec(cfg, u.spec) }) {
			keys = append(keys, k)
		}
	}
	return keys
}

// sourceUsers maps each values source informer to the keys it concerns.
func sourceUsers(cfg *config.Config) map[observe.ListKey][]sourceUser {
	out := map[observe.ListKey][]sourceUser{}
	add := func(rs *config.ReleaseSpec, u sourceUser) {
		for _, ref := range rs.ValuesFrom {
			k := observe.ListKey{GVR: observe.SourceGVR(ref.Kind), Namespace: rs.Namespace, Name: ref.Name}
			if !slices.Contains(out[k], u) {
				out[k] = append(out[k], u)
			}
		}
	}
	for _, name := range cfg.SpecNames() {
		spec := cfg.Specs[name]
		if !spec.Trigger.IsSelector() {
			for _, id := range spec.ReleaseSpecIDs() {
				add(spec.ReleaseSpecs[id], sourceUser{spec: name})
			}
			continue
		}
		// The release namespace of a selector spec may be the object's:
		// ask the config what it is in each namespace the spec covers. When
		// it is the object's everywhere, an event concerns the objects of
		// its namespace only; otherwise every object, by the sweep.
		covered := cfg.TriggerNamespaces(spec.Trigger)
		resolved := map[string]map[string]*config.ReleaseSpec{} // id -> object namespace -> release spec
		for _, ns := range covered {
			forObj, err := spec.ForObject(name, ns, "values-source-probe")
			if err != nil {
				continue
			}
			for id, rs := range forObj.ReleaseSpecs {
				if resolved[id] == nil {
					resolved[id] = map[string]*config.ReleaseSpec{}
				}
				resolved[id][ns] = rs
			}
		}
		for _, id := range spec.ReleaseSpecIDs() {
			perObject := len(resolved[id]) > 0
			for ns, rs := range resolved[id] {
				perObject = perObject && rs.Namespace == ns
			}
			for _, ns := range covered {
				rs := resolved[id][ns]
				if rs == nil {
					continue
				}
				u := sourceUser{spec: name}
				if perObject {
					u = sourceUser{spec: name, perObject: true, objectNamespace: ns}
				}
				add(rs, u)
			}
		}
	}
	return out
}

// onSourceEvent queues, after the coalescing delay, the keys that use a
// values source that was created, changed or deleted. The delay lets the
// changes of one commit (several Secrets written in a row) reach one
// reconcile: a key already waiting keeps its earlier time, so it runs once
// and reads them all. The event is a hint: the reconcile reads live.
func (c *Controller) onSourceEvent(k observe.ListKey, _, _ string) {
	idx := c.index.Load()
	cfg := c.Config()
	for _, u := range idx.sources[k] {
		if !u.perObject {
			c.addOwned(u.spec, c.opts.ValuesCoalesce)
			continue
		}
		spec := cfg.Specs[u.spec]
		if spec == nil {
			continue
		}
		objs, known := c.rec.Observer().Admissions().Served(u.spec, observe.Identity(cfg, spec.Trigger))
		if !known {
			c.addOwned(u.spec, c.opts.ValuesCoalesce) // the sweep finds them
			continue
		}
		for _, o := range objs {
			if o.Namespace == u.objectNamespace {
				c.addOwned(ObjectKey(u.spec, o), c.opts.ValuesCoalesce)
			}
		}
	}
}

// defaultValuesCoalesce is --values-coalesce's default.
const defaultValuesCoalesce = 2 * time.Second
