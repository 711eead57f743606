// Package redact hides the secret strings of Helm values in text before it is
// logged, put in an Event or returned as an error (DESIGN §5). Values may hold
// secrets and autox cannot tell which, so every string value of 4 or more
// characters counts as one. The package is pure: no I/O, no clock.
package redact

import (
	"bytes"
	"encoding/json"
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
func New(values ...map[string]interface{}) *Redactor {
	secrets := map[string]bool{}
	for _, v := range values {
		collect(reflect.ValueOf(v), secrets)
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

// collect adds the string leaves of v to secrets. Reflection rather than a
// type switch: values arrive as map[string]interface{}, but also as named
// map types (Helm's chartutil.Values), []string or map[string]string.
func collect(v reflect.Value, secrets map[string]bool) {
	switch v.Kind() {
	case reflect.Interface, reflect.Pointer:
		if !v.IsNil() {
			collect(v.Elem(), secrets)
		}
	case reflect.Map:
		it := v.MapRange()
		for it.Next() {
			collect(it.Value(), secrets)
		}
	case reflect.Slice, reflect.Array:
		if v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.Uint8 {
			return // []byte is not a value YAML or JSON decoding produces
		}
		for i := 0; i < v.Len(); i++ {
			collect(v.Index(i), secrets)
		}
	case reflect.String:
		addSecret(v.String(), secrets)
	}
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
