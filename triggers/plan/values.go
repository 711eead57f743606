package plan

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"sort"
)

// ValuesDiff compares two values maps the way DESIGN §3 asks: both sides go
// through a JSON round trip (so YAML- and Helm-decoded types compare alike),
// a nil map equals an empty one, and numbers compare by value (1 == 1.0).
// It returns "" when they are equal, else the path of the first difference,
// e.g. ".tasks[1]" — a path only, never a value, because values may be secret.
func ValuesDiff(desired, actual map[string]interface{}) (string, error) {
	a, err := normalise(desired)
	if err != nil {
		return "", fmt.Errorf("cannot normalise desired values: %w", err)
	}
	b, err := normalise(actual)
	if err != nil {
		return "", fmt.Errorf("cannot normalise release values: %w", err)
	}
	return firstDifference(a, b, ""), nil
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

func firstDifference(a, b interface{}, path string) string {
	here := path
	if here == "" {
		here = "."
	}
	switch av := a.(type) {
	case map[string]interface{}:
		bv, ok := b.(map[string]interface{})
		if !ok {
			return here
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
				return path + "." + k
			}
			if d := firstDifference(x, y, path+"."+k); d != "" {
				return d
			}
		}
		return ""
	case []interface{}:
		bv, ok := b.([]interface{})
		if !ok {
			return here
		}
		for i := 0; i < len(av) && i < len(bv); i++ {
			if d := firstDifference(av[i], bv[i], fmt.Sprintf("%s[%d]", path, i)); d != "" {
				return d
			}
		}
		if len(av) != len(bv) {
			n := len(av)
			if len(bv) < n {
				n = len(bv)
			}
			return fmt.Sprintf("%s[%d]", path, n)
		}
		return ""
	case json.Number:
		bv, ok := b.(json.Number)
		if !ok || !numbersEqual(av, bv) {
			return here
		}
		return ""
	default: // string, bool, nil
		if a != b {
			return here
		}
		return ""
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
