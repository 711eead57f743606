package drift

import (
	"strconv"
	"strings"

	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/value"
)

// Paths: a field of the apply's field set is a fieldpath.Path (field
// names, list-map keys, set values, indices), which needs no schema to be
// found in an object; a JSON pointer names the same field by the indices
// of one object, for ignore rules, reports and the patch.

// resolve walks p in obj. It returns the value at p, the pointer tokens of
// the elements it resolved, and how many elements it resolved: len(p)
// when the field is there.
func resolve(obj interface{}, p fieldpath.Path) (interface{}, []string, int) {
	cur := obj
	toks := make([]string, 0, len(p))
	for i, pe := range p {
		next, tok, ok := step(cur, pe)
		if !ok {
			return nil, toks, i
		}
		cur = next
		toks = append(toks, tok)
	}
	return cur, toks, len(p)
}

// step resolves one path element in cur.
func step(cur interface{}, pe fieldpath.PathElement) (interface{}, string, bool) {
	switch {
	case pe.FieldName != nil:
		m, ok := cur.(map[string]interface{})
		if !ok {
			return nil, "", false
		}
		v, ok := m[*pe.FieldName]
		return v, *pe.FieldName, ok
	default:
		l, ok := cur.([]interface{})
		if !ok {
			return nil, "", false
		}
		for i, e := range l {
			if matches(pe, i, e) {
				return e, strconv.Itoa(i), true
			}
		}
		return nil, "", false
	}
}

// matches reports whether list element e at index i is the one pe names.
func matches(pe fieldpath.PathElement, i int, e interface{}) bool {
	switch {
	case pe.Key != nil:
		m, ok := e.(map[string]interface{})
		if !ok {
			return false
		}
		for _, f := range *pe.Key {
			v, has := m[f.Name]
			if !has || !value.Equals(f.Value, value.NewValueInterface(v)) {
				return false
			}
		}
		return true
	case pe.Value != nil:
		return value.Equals(*pe.Value, value.NewValueInterface(e))
	case pe.Index != nil:
		return *pe.Index == i
	}
	return false
}

// equal compares two values of unstructured objects; 1 and 1.0 are equal.
func equal(a, b interface{}) bool {
	return value.Equals(value.NewValueInterface(a), value.NewValueInterface(b))
}

// pointer is the RFC 6901 pointer of tokens.
func pointer(toks []string) string {
	var b strings.Builder
	for _, t := range toks {
		b.WriteByte('/')
		b.WriteString(strings.NewReplacer("~", "~0", "/", "~1").Replace(t))
	}
	return b.String()
}

// tokens splits an RFC 6901 pointer; "" (the whole object) has none.
func tokens(ptr string) []string {
	if ptr == "" {
		return nil
	}
	parts := strings.Split(strings.TrimPrefix(ptr, "/"), "/")
	for i, p := range parts {
		parts[i] = strings.NewReplacer("~1", "/", "~0", "~").Replace(p)
	}
	return parts
}

// under reports whether tokens p are at or below tokens prefix.
func under(p, prefix []string) bool {
	if len(prefix) > len(p) {
		return false
	}
	for i := range prefix {
		if p[i] != prefix[i] {
			return false
		}
	}
	return true
}

// prune is the part of v that set s names, for a field the live object
// lacks: only the fields of the apply's set that are to be written.
func prune(v interface{}, s *fieldpath.Set) interface{} {
	if s == nil || (s.Members.Size() == 0 && s.Children.Size() == 0) {
		return v
	}
	switch x := v.(type) {
	case map[string]interface{}:
		out := map[string]interface{}{}
		s.Members.Iterate(func(pe fieldpath.PathElement) {
			if pe.FieldName != nil {
				if fv, ok := x[*pe.FieldName]; ok {
					out[*pe.FieldName] = fv
				}
			}
		})
		s.Children.Iterate(func(pe fieldpath.PathElement) {
			if pe.FieldName != nil {
				if fv, ok := x[*pe.FieldName]; ok {
					cs, _ := s.Children.Get(pe)
					out[*pe.FieldName] = prune(fv, cs)
				}
			}
		})
		return out
	case []interface{}:
		out := []interface{}{}
		for i, e := range x {
			var keep bool
			var sub *fieldpath.Set
			s.Children.Iterate(func(pe fieldpath.PathElement) {
				if !keep && matches(pe, i, e) {
					keep = true
					sub, _ = s.Children.Get(pe)
				}
			})
			if !keep {
				s.Members.Iterate(func(pe fieldpath.PathElement) {
					if !keep && matches(pe, i, e) {
						keep = true
					}
				})
			}
			if keep {
				out = append(out, prune(e, sub))
			}
		}
		return out
	}
	return v
}

// flatten maps every leaf of v (a scalar, null, an empty map or list) to
// its pointer tokens, joined by "/" escaped as a pointer.
func flatten(v interface{}, toks []string, out map[string]interface{}) {
	switch x := v.(type) {
	case map[string]interface{}:
		if len(x) == 0 {
			out[pointer(toks)] = x
			return
		}
		for k, e := range x {
			flatten(e, append(toks[:len(toks):len(toks)], k), out)
		}
	case []interface{}:
		if len(x) == 0 {
			out[pointer(toks)] = x
			return
		}
		for i, e := range x {
			flatten(e, append(toks[:len(toks):len(toks)], strconv.Itoa(i)), out)
		}
	default:
		out[pointer(toks)] = v
	}
}
