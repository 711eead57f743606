package drift

import (
	"fmt"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/autox-dev/autox/config"
)

// Rules are a release's ignore rules, compiled once.
type Rules struct {
	rules []rule
}

type rule struct {
	paths    [][]string // pointer tokens; an empty one is the whole object
	whole    bool
	managers map[string]bool
	target   *config.DriftTarget
	selector labels.Selector // nil: any labels
}

// Compile compiles the ignore rules of a drift policy (nil: none). A
// config that Load accepted always compiles; an error names the rule.
func Compile(d *config.Drift) (*Rules, error) {
	rs := &Rules{}
	if d == nil {
		return rs, nil
	}
	for i, ir := range d.Ignore {
		r := rule{target: ir.Target, managers: map[string]bool{}}
		for _, p := range ir.Paths {
			if p == "" {
				r.whole = true
				continue
			}
			r.paths = append(r.paths, tokens(p))
		}
		for _, m := range ir.Managers {
			r.managers[m] = true
		}
		if ir.Target != nil && ir.Target.LabelSelector != "" {
			sel, err := labels.Parse(ir.Target.LabelSelector)
			if err != nil {
				return nil, fmt.Errorf("ignore rule %d: label selector: %w", i, err)
			}
			r.selector = sel
		}
		rs.rules = append(rs.rules, r)
	}
	return rs, nil
}

// forObject are the rules whose target matches an object of that kind,
// namespace, name and manifest labels.
func (rs *Rules) forObject(gvk schema.GroupVersionKind, namespace, name string, lbls map[string]string) []rule {
	if rs == nil {
		return nil
	}
	var out []rule
	for _, r := range rs.rules {
		if t := r.target; t != nil {
			group := t.Group
			if group == "core" {
				group = ""
			}
			if (t.Group != "" && group != gvk.Group) || (t.Kind != "" && t.Kind != gvk.Kind) ||
				(t.Name != "" && t.Name != name) || (t.Namespace != "" && t.Namespace != namespace) {
				continue
			}
			if r.selector != nil && !r.selector.Matches(labels.Set(lbls)) {
				continue
			}
		}
		out = append(out, r)
	}
	return out
}
