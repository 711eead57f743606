package plan

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"sort"
	"strings"
)

// ValuesDiff compares two values maps the way DESIGN §3 asks: both sides go
// through a JSON round trip (so YAML- and Helm-decoded types compare alike),
// a nil map equals an empty one, and numbers compare by value (1 == 1.0).
// It returns "" when they are equal, else the path of the first difference,
// e.g. ".tasks[1]" — a path only, never a value, because values may be secret.
func ValuesDiff(desired, actual map[string]interface{}) (string, error) {
	segs, differ, err := valuesDiff(desired, actual)
	if err != nil || !differ {
		return "", err
	}
	return pathString(segs), nil
}

// valuesDiff is ValuesDiff with the path as its segments (".key" or
// "[i]"), so that keys holding dots or brackets are told apart when the
// path is masked (Merged.Mask).
func valuesDiff(desired, actual map[string]interface{}) (segs []string, differ bool, err error) {
	a, err := normalise(desired)
	if err != nil {
		return nil, false, fmt.Errorf("cannot normalise desired values: %w", err)
	}
	b, err := normalise(actual)
	if err != nil {
		return nil, false, fmt.Errorf("cannot normalise release values: %w", err)
	}
	segs, differ = firstDifference(a, b, nil)
	return segs, differ, nil
}

// pathString writes segments as a path: "." for the top.
func pathString(segs []string) string {
	if len(segs) == 0 {
		return "."
	}
	return strings.Join(segs, "")
}

func normalise(m map[string]interface{}) (interface{}, error) {
	if len(m) == 0 {
		return map[string]interface{}{}, nil
	}
	raw, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // keeps big integers exact; compared with big.Rat below
	var out interface{}
	if err := dec.Decode(&out); err != nil {
		return nil, err
	}
	return out, nil
}

// firstDifference returns the segments of the path (".key", "[i]") of the
// first difference of a and b below path, and whether there is one.
func firstDifference(a, b interface{}, path []string) ([]string, bool) {
	at := func(seg string) []string { return append(append(make([]string, 0, len(path)+1), path...), seg) }
	switch av := a.(type) {
	case map[string]interface{}:
		bv, ok := b.(map[string]interface{})
		if !ok {
			return path, true
		}
		keys := make([]string, 0, len(av)+len(bv))
		for k := range av {
			keys = append(keys, k)
		}
		for k := range bv {
			if _, dup := av[k]; !dup {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			x, inA := av[k]
			y, inB := bv[k]
			if inA != inB {
				return at("." + k), true
			}
			if d, differ := firstDifference(x, y, at("."+k)); differ {
				return d, true
			}
		}
		return nil, false
	case []interface{}:
		bv, ok := b.([]interface{})
		if !ok {
			return path, true
		}
		for i := 0; i < len(av) && i < len(bv); i++ {
			if d, differ := firstDifference(av[i], bv[i], at(fmt.Sprintf("[%d]", i))); differ {
				return d, true
			}
		}
		if len(av) != len(bv) {
			return at(fmt.Sprintf("[%d]", min(len(av), len(bv)))), true
		}
		return nil, false
	case json.Number:
		bv, ok := b.(json.Number)
		if !ok || !numbersEqual(av, bv) {
			return path, true
		}
		return nil, false
	default: // string, bool, nil
		if a != b {
			return path, true
		}
		return nil, false
	}
}

func numbersEqual(a, b json.Number) bool {
	if a == b {
		return true
	}
	x, ok1 := new(big.Rat).SetString(string(a))
	y, ok2 := new(big.Rat).SetString(string(b))
	return ok1 && ok2 && x.Cmp(y) == 0
}
