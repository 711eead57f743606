package drift

import (
	"fmt"
	"strconv"

	"encoding/json"
)

// verify applies ops to a copy of live and checks the invariants of a
// correction on the result: no operation is at, below or above an
// ignored path that exists in the live object, and every leaf that
// differs is at or below an operation's path. A violation is a bug in the
// patch, refused rather than sent.
func verify(live map[string]interface{}, ops []jsonOp, rules []rule) error {
	patched, err := copyJSON(live)
	if err != nil {
		return err
	}
	var written [][]string
	for _, op := range ops {
		toks := tokens(op.Path)
		for _, r := range rules {
			for _, ig := range r.paths {
				if under(toks, ig) {
					return fmt.Errorf("the patch writes %s, which an ignore rule names", op.Path)
				}
				if under(ig, toks) && exists(live, ig) {
					return fmt.Errorf("the patch writes %s, a parent of the ignored %s", op.Path, pointer(ig))
				}
			}
		}
		at, err := apply(patched, op, toks)
		if err != nil {
			return fmt.Errorf("the patch does not apply to the live object: %w", err)
		}
		written = append(written, at)
	}
	before, after := map[string]interface{}{}, map[string]interface{}{}
	flatten(live, nil, before)
	flatten(patched, nil, after)
	check := func(ptr string) error {
		toks := tokens(ptr)
		for _, w := range written {
			if under(toks, w) {
				return nil
			}
		}
		return fmt.Errorf("the patch would change %s, which it must not", ptr)
	}
	for ptr, v := range before {
		if w, ok := after[ptr]; !ok || !equal(v, w) {
			if err := check(ptr); err != nil {
				return err
			}
		}
	}
	for ptr := range after {
		if _, ok := before[ptr]; !ok {
			if err := check(ptr); err != nil {
				return err
			}
		}
	}
	return nil
}

// exists reports whether the pointer tokens resolve in obj.
func exists(obj interface{}, toks []string) bool {
	cur := obj
	for _, t := range toks {
		switch x := cur.(type) {
		case map[string]interface{}:
			v, ok := x[t]
			if !ok {
				return false
			}
			cur = v
		case []interface{}:
			i, err := strconv.Atoi(t)
			if err != nil || i < 0 || i >= len(x) {
				return false
			}
			cur = x[i]
		default:
			return false
		}
	}
	return true
}

// apply carries out one replace or add on obj, in place, and returns the
// pointer tokens it wrote (an appended element's index for "-").
func apply(obj map[string]interface{}, op jsonOp, toks []string) ([]string, error) {
	if len(toks) == 0 {
		return nil, fmt.Errorf("%s of the whole object", op.Op)
	}
	var parent interface{} = obj
	for _, t := range toks[:len(toks)-1] {
		switch x := parent.(type) {
		case map[string]interface{}:
			v, ok := x[t]
			if !ok {
				return nil, fmt.Errorf("%s: no %q", op.Path, t)
			}
			parent = v
		case []interface{}:
			i, err := strconv.Atoi(t)
			if err != nil || i < 0 || i >= len(x) {
				return nil, fmt.Errorf("%s: no index %q", op.Path, t)
			}
			parent = x[i]
		default:
			return nil, fmt.Errorf("%s: %q is below a value", op.Path, t)
		}
	}
	last := toks[len(toks)-1]
	val, err := copyJSON(op.Value)
	if err != nil {
		return nil, err
	}
	switch x := parent.(type) {
	case map[string]interface{}:
		if _, ok := x[last]; !ok && op.Op == "replace" {
			return nil, fmt.Errorf("%s: replace of a missing field", op.Path)
		}
		x[last] = val
		return toks, nil
	case []interface{}:
		if op.Op == "add" && last == "-" {
			// The list is a value of its parent: re-set it there.
			out := append(toks[:len(toks)-1:len(toks)-1], strconv.Itoa(len(x)))
			return out, setAt(obj, toks[:len(toks)-1], append(x, val))
		}
		i, err := strconv.Atoi(last)
		if err != nil || i < 0 || i >= len(x) || op.Op != "replace" {
			return nil, fmt.Errorf("%s: unsupported list operation", op.Path)
		}
		x[i] = val
		return toks, nil
	}
	return nil, fmt.Errorf("%s: the parent is a value", op.Path)
}

// setAt sets the value at pointer tokens toks (which resolve) of obj.
func setAt(obj map[string]interface{}, toks []string, v interface{}) error {
	if len(toks) == 0 {
		return fmt.Errorf("cannot set the whole object")
	}
	var parent interface{} = obj
	for _, t := range toks[:len(toks)-1] {
		switch x := parent.(type) {
		case map[string]interface{}:
			parent = x[t]
		case []interface{}:
			i, _ := strconv.Atoi(t)
			parent = x[i]
		}
	}
	last := toks[len(toks)-1]
	switch x := parent.(type) {
	case map[string]interface{}:
		x[last] = v
	case []interface{}:
		i, _ := strconv.Atoi(last)
		x[i] = v
	default:
		return fmt.Errorf("cannot set %s", pointer(toks))
	}
	return nil
}

// copyJSON is a deep copy of v as JSON has it (numbers as float64 or
// int64 alike compare equal).
func copyJSON[T any](v T) (T, error) {
	var out T
	js, err := json.Marshal(v)
	if err != nil {
		return out, fmt.Errorf("cannot copy: %w", err)
	}
	if err := json.Unmarshal(js, &out); err != nil {
		return out, fmt.Errorf("cannot copy: %w", err)
	}
	return out, nil
}
