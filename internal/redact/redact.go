// Package redact hides the secret values of Helm values in text before it is
// logged, put in an Event or returned as an error (DESIGN §5). Values may hold
// secrets and autox cannot tell which, so every string value of 4 or more
// characters counts as one; a value known to come from a Secret counts as one
// whatever its type (a number, a boolean), once its text has 4 or more
// characters. The package is pure: no I/O, no clock.
package redact

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"
)

// Mask is what a hidden secret becomes.
const Mask = "***"

// MinLength is the length from which a string value counts as a secret;
// shorter ones ("on", "v1", "80") would mask half of every message and hide
// nothing worth hiding.
const MinLength = 4

// Redactor hides secret strings in text: every string value (of at least 4
// characters) of the values it was made from becomes ***.
type Redactor struct {
	// forms are the secrets and the escaped forms in which error messages
	// quote them, longest first, without duplicates.
	forms []string
}

// New returns a Redactor for the string values found in values. It walks maps
// and lists recursively and collects string values of MinLength or more
// characters; map keys are not secrets (they are the chart's schema).
func New(values ...map[string]interface{}) *Redactor { return Build(values, nil) }

// Build returns a Redactor for the string values of values, as New, and for
// every value of fromSecrets whatever its type: a number or a boolean a Secret
// holds is as secret as its strings, and is hidden in each text form a
// message may print it in (12345; 1e+06 and 1000000; true) that has
// MinLength or more characters. So "true" and "false" from a Secret are
// hidden wherever they occur in the release's messages, words included: the
// price of not telling a Secret's boolean apart from the word. A null is no
// value and hides nothing.
func Build(values, fromSecrets []map[string]interface{}) *Redactor {
	secrets := map[string]bool{}
	for _, v := range values {
		collect(reflect.ValueOf(v), secrets, false)
	}
	for _, v := range fromSecrets {
		collect(reflect.ValueOf(v), secrets, true)
	}
	forms := map[string]bool{}
	for s := range secrets {
		for _, f := range quotedForms(s) {
			forms[f] = true
		}
	}
	r := &Redactor{forms: make([]string, 0, len(forms))}
	for f := range forms {
		r.forms = append(r.forms, f)
	}
	// Longest first only makes the order deterministic: String hides the
	// union of all matches, so a secret containing another is hidden whole.
	sort.Slice(r.forms, func(i, j int) bool {
		if len(r.forms[i]) != len(r.forms[j]) {
			return len(r.forms[i]) > len(r.forms[j])
		}
		return r.forms[i] < r.forms[j]
	})
	return r
}

// collect adds the string leaves of v to secrets, and with all the text
// forms of its other scalar leaves too. Reflection rather than a type switch:
// values arrive as map[string]interface{}, but also as named map types
// (Helm's chartutil.Values), []string or map[string]string, and numbers as
// float64 (JSON, YAML), int64 or json.Number (a string kind).
func collect(v reflect.Value, secrets map[string]bool, all bool) {
	switch v.Kind() {
	case reflect.Interface, reflect.Pointer:
		if !v.IsNil() {
			collect(v.Elem(), secrets, all)
		}
	case reflect.Map:
		it := v.MapRange()
		for it.Next() {
			collect(it.Value(), secrets, all)
		}
	case reflect.Slice, reflect.Array:
		if v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.Uint8 {
			return // []byte is not a value YAML or JSON decoding produces
		}
		for i := 0; i < v.Len(); i++ {
			collect(v.Index(i), secrets, all)
		}
	case reflect.String:
		addSecret(v.String(), secrets)
	case reflect.Bool:
		if all {
			addSecret(strconv.FormatBool(v.Bool()), secrets)
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if all {
			addSecret(strconv.FormatInt(v.Int(), 10), secrets)
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		if all {
			addSecret(strconv.FormatUint(v.Uint(), 10), secrets)
		}
	case reflect.Float32, reflect.Float64:
		if all {
			for _, f := range floatForms(v.Float(), v.Type().Bits()) {
				addSecret(f, secrets)
			}
		}
	}
}

// floatForms are the texts a number decoded as a float prints as: a
// template's {{ .Values.x }} and Go's %v (shortest, 1e+06), plain decimals
// (1000000), JSON and YAML (toJson, toYaml: 1e+06 or 1000000 by size).
func floatForms(f float64, bits int) []string {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return []string{strconv.FormatFloat(f, 'g', -1, bits)}
	}
	out := []string{strconv.FormatFloat(f, 'g', -1, bits), strconv.FormatFloat(f, 'f', -1, bits),
		strconv.FormatFloat(f, 'e', -1, bits)}
	if b, err := json.Marshal(f); err == nil {
		out = append(out, string(b))
	}
	return out
}

// addSecret adds s and, for a multi-line value (a key, a certificate, a
// config file), each of its lines: a YAML error or a manifest excerpt quotes
// such a value one line at a time.
func addSecret(s string, secrets map[string]bool) {
	if len(s) < MinLength {
		return
	}
	secrets[s] = true
	if !strings.Contains(s, "\n") {
		return
	}
	for _, line := range strings.Split(s, "\n") {
		if line = strings.TrimSpace(line); len(line) >= MinLength {
			secrets[line] = true
		}
	}
}

// quotedForms returns s and the forms in which messages quote it: Go's %q
// (strconv.Quote, also its ASCII-only variant), JSON (with and without HTML
// escaping), each once and twice applied, since an API error quoting a value
// is itself quoted again by the layer above (a status message inside a JSON
// body, a template error inside Helm's message). Only the inside of the quotes
// is kept, so a value quoted inside a longer quoted string matches too.
func quotedForms(s string) []string {
	out := []string{s}
	for _, once := range escapes(s) {
		out = append(out, once)
		out = append(out, escapes(once)...)
	}
	return out
}

func escapes(s string) []string {
	return []string{
		unquote(strconv.Quote(s)),
		unquote(strconv.QuoteToASCII(s)),
		unquote(jsonString(s, true)),
		unquote(jsonString(s, false)),
	}
}

func unquote(q string) string { return q[1 : len(q)-1] }

func jsonString(s string, escapeHTML bool) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(escapeHTML)
	_ = enc.Encode(s) // a string always encodes
	return strings.TrimSuffix(b.String(), "\n")
}

// String returns s with every secret hidden. Where matches overlap or touch
// (a secret containing another, two secrets side by side) their union becomes
// one Mask, so no part of a longer secret is left showing.
func (r *Redactor) String(s string) string {
	if r == nil || len(r.forms) == 0 || s == "" {
		return s
	}
	hidden := r.hiddenBytes(s)
	if hidden == nil {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		if !hidden[i] {
			b.WriteByte(s[i])
			i++
			continue
		}
		b.WriteString(Mask)
		for i < len(s) && hidden[i] {
			i++
		}
	}
	return b.String()
}

// hiddenBytes marks the bytes of s that belong to an occurrence of a secret,
// or returns nil when none occurs.
func (r *Redactor) hiddenBytes(s string) []bool {
	var hidden []bool
	for _, f := range r.forms {
		for from := 0; from <= len(s)-len(f); {
			i := strings.Index(s[from:], f)
			if i < 0 {
				break
			}
			if hidden == nil {
				hidden = make([]bool, len(s))
			}
			start := from + i
			for j := start; j < start+len(f); j++ {
				hidden[j] = true
			}
			from = start + 1
		}
	}
	return hidden
}

// Error returns err with its message redacted. The result unwraps to err, so
// errors.Is and errors.As keep working; note that a caller who digs out an
// inner error with errors.As and prints that gets the unredacted text. nil
// stays nil, and an error with nothing to hide is returned as it is.
func (r *Redactor) Error(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	hidden := r.String(msg)
	if hidden == msg {
		return err
	}
	return &redactedError{msg: hidden, err: err}
}

type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }
