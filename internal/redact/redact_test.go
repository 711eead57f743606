package redact

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"testing"
)

// namedValues stands for Helm's chartutil.Values, a named map type.
type namedValues map[string]interface{}

func TestString(t *testing.T) {
	values := map[string]interface{}{
		"password": "hunter22",
		"short":    "abc",
		"number":   12345,
		"flag":     true,
		"nested": map[string]interface{}{
			"list":        []interface{}{"first-item", map[string]interface{}{"deep": "deep-secret"}},
			"keyIsPublic": "x",
		},
		"strings":   []string{"from-a-string-slice"},
		"stringMap": map[string]string{"k": "from-a-string-map"},
		"named":     namedValues{"n": "from-a-named-map"},
		"quote":     `say "hi"`,
		"backslash": `C:\dir\file`,
		"newline":   "line one\nline two",
		"unicode":   "pässwörd",
		"html":      "<tok&en>",
		"long":      "password-with-pass-inside",
		"inner":     "pass",
		"left":      "abcd",
		"right":     "cdefgh",
		"pem":       "-----BEGIN KEY-----\nMIIEabcdefgh\n-----END KEY-----",
		"repeat":    "abab",
	}
	r := New(values)
	q := func(s string) string { return fmt.Sprintf("%q", s) }
	js := func(s string) string { b, _ := json.Marshal(s); return string(b) }

	checkStrings(t, r, []stringCase{
		{"plain", "token hunter22 here", "token *** here"},
		{"twice", "hunter22/hunter22", "***/***"},
		{"short strings stay", "abc is short", "abc is short"},
		{"numbers and bools stay", "12345 true", "12345 true"},
		{"map keys stay", "nested keyIsPublic stringMap", "nested keyIsPublic stringMap"},
		{"nested list", "first-item deep-secret", "*** ***"},
		{"string slice and map", "from-a-string-slice from-a-string-map", "*** ***"},
		{"named map type", "from-a-named-map", "***"},
		{"go quoted", "Invalid value: " + q(`say "hi"`), "Invalid value: \"***\""},
		{"go quoted backslash", "Invalid value: " + q(`C:\dir\file`), "Invalid value: \"***\""},
		{"go quoted newline", "Invalid value: " + q("line one\nline two"), "Invalid value: \"***\""},
		{"go quoted ascii", fmt.Sprintf("%+q", "pässwörd"), "\"***\""},
		{"raw unicode", "pässwörd", "***"},
		{"json", `{"v":` + js(`say "hi"`) + `}`, `{"v":"***"}`},
		{"json html escaped", `{"v":` + js("<tok&en>") + `}`, `{"v":"***"}`},
		{"json unicode escaped", `"p\u00e4ssw\u00f6rd"`, `"***"`},
		{"quoted twice", q("error: " + q(`say "hi"`)), q("error: \"***\"")},
		{"json of go quoted", js("msg " + q("line one\nline two")), js("msg \"***\"")},
		{"longer secret first", "password-with-pass-inside", "***"},
		{"inner alone", "a pass b", "a *** b"},
		{"overlapping secrets", "abcdefgh", "***"},
		{"overlapping occurrences of one secret", "x ababab", "x ***"},
		{"one line of a multi-line value", "yaml: line 2: MIIEabcdefgh", "yaml: line 2: ***"},
		{"nothing to hide", "all fine", "all fine"},
		{"empty", "", ""},
	})
}

type stringCase struct{ name, in, want string }

// checkStrings runs r.String on each case's input.
func checkStrings(t *testing.T, r *Redactor, cases []stringCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := r.String(tc.in); got != tc.want {
				t.Errorf("String(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestNilAndEmpty(t *testing.T) {
	var r *Redactor
	if got := r.String("hunter22"); got != "hunter22" {
		t.Errorf("nil Redactor String = %q", got)
	}
	err := errors.New("hunter22")
	if got := r.Error(err); got != err {
		t.Errorf("nil Redactor Error = %v", got)
	}
	if New().String("hunter22") != "hunter22" || New(nil).String("x hunter22") != "x hunter22" {
		t.Error("a Redactor of no values must hide nothing")
	}
	if New(map[string]interface{}{"a": "hunter22"}).Error(nil) != nil {
		t.Error("Error(nil) must be nil")
	}
}

func TestError(t *testing.T) {
	r := New(map[string]interface{}{"password": "hunter22"})
	inner := &fs.PathError{Op: "open", Path: "/secret/hunter22", Err: fs.ErrNotExist}
	err := fmt.Errorf("cannot read: %w", inner)

	got := r.Error(err)
	if strings.Contains(got.Error(), "hunter22") || got.Error() != "cannot read: open /secret/***: file does not exist" {
		t.Errorf("Error() = %q", got.Error())
	}
	if !errors.Is(got, fs.ErrNotExist) {
		t.Error("errors.Is must see through the redaction")
	}
	var pe *fs.PathError
	if !errors.As(got, &pe) || pe != inner {
		t.Error("errors.As must see through the redaction")
	}
	if errors.Unwrap(got) != err {
		t.Error("Unwrap must return the original error")
	}

	plain := errors.New("nothing secret")
	if r.Error(plain) != plain {
		t.Error("an error with nothing to hide is returned as it is")
	}
}

// TestBuildHidesEveryValueOfASecret: values from a Secret are hidden
// whatever their type, in each text form a message prints them in, once
// that has MinLength characters; the other values keep the string rule.
func TestBuildHidesEveryValueOfASecret(t *testing.T) {
	var fromJSON map[string]interface{}
	if err := json.Unmarshal([]byte(`{"big": 1000000, "exact": 9007199254740993}`), &fromJSON); err != nil {
		t.Fatal(err)
	}
	r := Build([]map[string]interface{}{{"inlineNumber": 67890, "inlineFlag": false, "inlineText": "inline-text"}},
		[]map[string]interface{}{
			{"pin": 54321, "negative": int64(-4711), "unsigned": uint16(8080), "ratio": 3.25, "small": 123, "flag": true,
				"list": []interface{}{float32(2.5e9)}, "nested": map[string]interface{}{"port": float64(31337)}, "nothing": nil,
				"number": json.Number("424242"), "text": "from-a-secret"},
			fromJSON,
		})
	checkStrings(t, r, []stringCase{
		{"an int", "pin 54321 refused", "pin *** refused"},
		{"a negative int", "value -4711", "value ***"},
		{"an unsigned int", "port 8080", "port ***"},
		{"a float with a fraction", "ratio 3.25", "ratio ***"},
		{"a float in a map", `{"port":31337}`, `{"port":***}`},
		{"a float32 in a list", "2.5e+09 or 2500000000", "*** or ***"},
		{"a big number, %v and decimal", "1e+06 and 1000000", "*** and ***"},
		{"a json.Number", "424242", "***"},
		{"a boolean", "enabled: true", "enabled: ***"},
		{"a boolean in a word", "untrue", "un***"},
		{"a string", `"from-a-secret"`, `"***"`},
		{"shorter than MinLength", "small 123", "small 123"},
		{"not from a Secret: only strings", "67890 false inline-text", "67890 false ***"},
		{"null hides nothing", "null <nil>", "null <nil>"},
	})
	// 9007199254740993 is no float64: JSON decoding rounds it, and what a
	// message prints is the rounded number.
	if got := r.String("9007199254740992"); got != "***" {
		t.Errorf("the decoded big number is not hidden: %q", got)
	}
}
