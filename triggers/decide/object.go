package decide

import (
	"crypto/sha256"
	"encoding/hex"
	"sort"

	"github.com/autox-dev/autox/config"
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

// Labelled reports whether a release's object labels (namespace, name)
// name object o; for the zero Object, whether they name none.
func (o Object) Labelled(namespace, name string) bool {
	if o.IsZero() {
		return namespace == "" && name == ""
	}
	return namespace == o.Namespace && name == ObjectLabel(o.Name)
}

// Admit returns the objects a selector spec serves within its bound max,
// from wanted, the objects it selects with every trigger label set and no
// other claimant: every one that has releases already (the bound never takes
// releases away, so a lowered bound or a new object earlier in the order
// changes nothing for them), then those without, in namespace/name order,
// while fewer than max are served.
func Admit(wanted []Object, hasReleases func(Object) bool, max int) map[Object]bool {
	admitted := map[Object]bool{}
	var rest []Object
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
func SortObjects(objs []Object) {
	sort.Slice(objs, func(i, j int) bool { return objectLess(objs[i], objs[j]) })
}

func objectLess(a, b Object) bool {
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
func (x *ClaimIndex) Claimants(group, resource string, o Object, labels map[string]string) []string {
	out := append([]string{}, x.named[claimKey{group, resource, o.Namespace, o.Name}]...)
	for _, name := range x.selectors[[2]string{group, resource}] {
		if x.cfg.Selects(x.cfg.Specs[name].Trigger, o.Namespace, labels) {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}
