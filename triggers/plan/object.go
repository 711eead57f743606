package plan

import (
	"sort"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/internal/format"
)

// Admit returns the objects a selector spec serves within its bound max,
// from wanted, the objects it selects with every trigger label set and no
// other claimant: every one that has releases already (the bound never takes
// releases away, so a lowered bound or a new object earlier in the order
// changes nothing for them), then those without, in namespace/name order,
// while fewer than max are served.
func Admit(wanted []format.Object, hasReleases func(format.Object) bool, max int) map[format.Object]bool {
	admitted := map[format.Object]bool{}
	var rest []format.Object
	for _, o := range wanted {
		if hasReleases(o) {
			admitted[o] = true
		} else {
			rest = append(rest, o)
		}
	}
	SortObjects(rest)
	for _, o := range rest {
		if len(admitted) >= max {
			break
		}
		admitted[o] = true
	}
	return admitted
}

// SortObjects sorts objects by namespace, then name: the order in which a
// selector spec's objects are admitted up to maxObjects.
func SortObjects(objs []format.Object) {
	sort.Slice(objs, func(i, j int) bool { return objectLess(objs[i], objs[j]) })
}

func objectLess(a, b format.Object) bool {
	if a.Namespace != b.Namespace {
		return a.Namespace < b.Namespace
	}
	return a.Name < b.Name
}

// ClaimIndex answers Claimants for one config without looking at every
// spec: a pass asks it for every listed object.
type ClaimIndex struct {
	cfg       *config.Config
	named     map[claimKey][]string
	selectors map[[2]string][]string // group, resource -> selector specs
}

type claimKey struct{ group, resource, namespace, name string }

// NewClaimIndex indexes the triggers of cfg.
func NewClaimIndex(cfg *config.Config) *ClaimIndex {
	idx := &ClaimIndex{cfg: cfg, named: map[claimKey][]string{}, selectors: map[[2]string][]string{}}
	for _, name := range cfg.SpecNames() {
		t := cfg.Specs[name].Trigger
		if t.IsSelector() {
			gr := [2]string{t.Group, t.Resource}
			idx.selectors[gr] = append(idx.selectors[gr], name)
			continue
		}
		k := claimKey{t.Group, t.Resource, t.Namespace, t.Name}
		idx.named[k] = append(idx.named[k], name)
	}
	return idx
}

// Config is the config indexed.
func (x *ClaimIndex) Config() *config.Config { return x.cfg }

// Claimants returns, sorted, the specs that claim one object of a resource
// (group, resource; the API version does not make another object): the
// named specs whose trigger it is and the selector specs that select it with
// these labels. More than one is a conflict: one trigger object, one spec.
func (x *ClaimIndex) Claimants(group, resource string, o format.Object, labels map[string]string) []string {
	out := append([]string{}, x.named[claimKey{group, resource, o.Namespace, o.Name}]...)
	for _, name := range x.selectors[[2]string{group, resource}] {
		if x.cfg.Selects(x.cfg.Specs[name].Trigger, o.Namespace, labels) {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// WantedObjects turns one live listing of a selector spec's objects into
// those it wants: selected with every trigger label set, and claimed by no
// other spec.
func WantedObjects(idx *ClaimIndex, spec *config.Spec, listed map[format.Object]TriggerRead) []format.Object {
	t := spec.Trigger
	var out []format.Object
	for o, obs := range listed {
		if st, _ := Evaluate(t, obs); !st.Wanted() {
			continue
		}
		if len(idx.Claimants(t.Group, t.Resource, o, obs.Labels)) > 1 {
			continue // in conflict: served by no spec
		}
		out = append(out, o)
	}
	return out
}
