package drift

import (
	"encoding/json"
	"fmt"

	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// jsonOp is one RFC 6902 operation.
type jsonOp struct {
	Op    string      `json:"op"`
	Path  string      `json:"path"`
	Value interface{} `json:"value"`
}

// buildPatch is the JSON patch that writes the fields fix of the dry run
// into the live object, verified (verify) before it is returned.
func buildPatch(in Input, fix []fieldpath.Path, rules []rule) ([]byte, error) {
	live, dry := in.Live.Object, in.DryRun.Object
	ops := []jsonOp{{Op: "replace", Path: "/metadata/resourceVersion", Value: in.Live.GetResourceVersion()}}
	type missing struct {
		parent []string // pointer tokens of the live parent
		at     fieldpath.Path
		under  []fieldpath.Path // the fields to write, relative to at
	}
	var order []string
	groups := map[string]*missing{}
	for _, p := range fix {
		dv, _, _ := resolve(dry, p)
		_, ltoks, n := resolve(live, p)
		if n == len(p) {
			ops = append(ops, jsonOp{Op: "replace", Path: pointer(ltoks), Value: dv})
			continue
		}
		at := p[:n+1]
		k := at.String()
		g := groups[k]
		if g == nil {
			g = &missing{parent: ltoks, at: at.Copy()}
			groups[k] = g
			order = append(order, k)
		}
		if rel := p[n+1:]; len(rel) > 0 {
			g.under = append(g.under, rel.Copy())
		}
	}
	for _, k := range order {
		g := groups[k]
		v, _, n := resolve(dry, g.at)
		if n != len(g.at) {
			return nil, fmt.Errorf("field %s is not in the dry run", g.at)
		}
		if len(g.under) > 0 {
			v = prune(v, fieldpath.NewSet(g.under...))
		}
		last := g.at[len(g.at)-1]
		path := append(g.parent[:len(g.parent):len(g.parent)], "-")
		if last.FieldName != nil {
			path[len(path)-1] = *last.FieldName
		}
		ops = append(ops, jsonOp{Op: "add", Path: pointer(path), Value: v})
	}
	if err := verify(live, ops, rules); err != nil {
		return nil, err
	}
	return json.Marshal(ops)
}
