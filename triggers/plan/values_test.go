package plan

import "testing"

func TestValuesDiff(t *testing.T) {
	cases := []struct {
		name       string
		desired    map[string]interface{}
		actual     map[string]interface{}
		wantPathAt string
	}{
		{"nil equals empty", nil, map[string]interface{}{}, ""},
		{"int equals float", map[string]interface{}{"n": 1}, map[string]interface{}{"n": 1.0}, ""},
		{"int64 equals float64", map[string]interface{}{"n": int64(3)}, map[string]interface{}{"n": float64(3)}, ""},
		{"big ints differ", map[string]interface{}{"n": int64(9007199254740993)}, map[string]interface{}{"n": int64(9007199254740992)}, ".n"},
		{"typed vs generic", map[string]interface{}{"l": []string{"a", "b"}}, map[string]interface{}{"l": []interface{}{"a", "b"}}, ""},
		{"list element", map[string]interface{}{"tasks": []interface{}{"ready", "http"}}, map[string]interface{}{"tasks": []interface{}{"ready", "grpc"}}, ".tasks[1]"},
		{"list length", map[string]interface{}{"tasks": []interface{}{"ready"}}, map[string]interface{}{"tasks": []interface{}{"ready", "http"}}, ".tasks[1]"},
		{"missing key", map[string]interface{}{"a": 1, "b": 2}, map[string]interface{}{"a": 1}, ".b"},
		{"extra key", map[string]interface{}{"a": 1}, map[string]interface{}{"a": 1, "z": 2}, ".z"},
		{"nested", map[string]interface{}{"a": map[string]interface{}{"b": "x"}}, map[string]interface{}{"a": map[string]interface{}{"b": "y"}}, ".a.b"},
		{"string vs number", map[string]interface{}{"v": "1"}, map[string]interface{}{"v": 1}, ".v"},
		{"null vs empty map nested", map[string]interface{}{"a": nil}, map[string]interface{}{"a": map[string]interface{}{}}, ".a"},
		{"bool", map[string]interface{}{"on": true}, map[string]interface{}{"on": false}, ".on"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ValuesDiff(tc.desired, tc.actual)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.wantPathAt {
				t.Errorf("ValuesDiff = %q, want %q", got, tc.wantPathAt)
			}
		})
	}
}
