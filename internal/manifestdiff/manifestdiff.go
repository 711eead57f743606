// Package manifestdiff compares two Helm release manifests object by object,
// as a reviewer reads a change: each object (keyed by apiVersion, kind,
// namespace and name) that is added, removed or changed, with a unified
// diff of its YAML. Both sides are normalized (parsed, keys sorted, Helm's
// "# Source" comments dropped) so that only what the API server would see
// differs. The data of Secret objects is never shown: it reads <redacted>,
// marked when it changes. The package is pure: no I/O, no clock.
package manifestdiff

import (
	"bytes"
	"fmt"
	"reflect"
	"regexp"
	"strings"

	"github.com/pmezard/go-difflib/difflib"
	"sigs.k8s.io/yaml"
)

// Redacted is what the data of a Secret object reads in a diff.
const Redacted = "<redacted>"

// RedactedChanged is what it reads on the new side when it changed: a
// reviewer learns that it changes, never what.
const RedactedChanged = "<redacted> (changed)"

// How an object changes.
const (
	Added   = "added"
	Removed = "removed"
	Changed = "changed"
)

// Change is one object that differs between the two manifests.
type Change struct {
	// Object names it: "apps/v1 Deployment ns/name" ("ns/" left out when
	// the manifest sets no namespace).
	Object string `json:"object"`
	// Change is Added, Removed or Changed.
	Change string `json:"change"`
	// Diff is the unified diff of its YAML, from the old to the new side.
	Diff string `json:"diff"`
}

// object is one document of a manifest, parsed.
type object struct {
	key    string
	fields map[string]interface{}
}

// documentSeparator is a YAML document separator line, as Helm joins
// a release's templates.
var documentSeparator = regexp.MustCompile(`(?m)^---[ \t]*(#.*)?$`)

// split parses manifest into its objects, keyed; empty documents (a
// template that rendered nothing) are left out. An object that occurs twice
// keeps both, the second keyed with "#2", so nothing is hidden by a
// duplicate. A document that is not YAML is an error naming only its place:
// the parser's message may quote its text, which may be secret.
func split(manifest, side string) ([]object, error) {
	var out []object
	seen := map[string]int{}
	for i, doc := range documentSeparator.Split(manifest, -1) {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		var fields map[string]interface{}
		if err := yaml.Unmarshal([]byte(doc), &fields); err != nil {
			return nil, fmt.Errorf("document %d of the %s manifest is not valid YAML", i+1, side)
		}
		if len(fields) == 0 {
			continue // only comments
		}
		k := keyOf(fields)
		seen[k]++
		if n := seen[k]; n > 1 {
			k = fmt.Sprintf("%s #%d", k, n)
		}
		out = append(out, object{key: k, fields: fields})
	}
	return out, nil
}

// keyOf names an object as a Change does.
func keyOf(fields map[string]interface{}) string {
	apiVersion, _ := fields["apiVersion"].(string)
	kind, _ := fields["kind"].(string)
	meta, _ := fields["metadata"].(map[string]interface{})
	name, _ := meta["name"].(string)
	if ns, _ := meta["namespace"].(string); ns != "" {
		name = ns + "/" + name
	}
	return strings.TrimSpace(fmt.Sprintf("%s %s %s", apiVersion, kind, name))
}

// secretFields are the fields of a Secret object that hold its data.
var secretFields = []string{"data", "stringData"}

func isSecret(fields map[string]interface{}) bool {
	apiVersion, _ := fields["apiVersion"].(string)
	kind, _ := fields["kind"].(string)
	return kind == "Secret" && (apiVersion == "v1" || apiVersion == "")
}

// redacted is fields with a Secret's data replaced by Redacted, or by
// RedactedChanged where it differs from before's (nil: nothing to compare
// with). Keys are hidden as well as values: a key can tell what a Secret
// holds. fields itself is not modified.
func redacted(fields, before map[string]interface{}) map[string]interface{} {
	if !isSecret(fields) {
		return fields
	}
	out := make(map[string]interface{}, len(fields))
	for k, v := range fields {
		out[k] = v
	}
	for _, f := range secretFields {
		v, ok := fields[f]
		if !ok {
			continue
		}
		out[f] = Redacted
		if before != nil && !reflect.DeepEqual(v, before[f]) {
			out[f] = RedactedChanged
		}
	}
	return out
}

// Compare returns the objects that differ between manifest from (the
// release as it is) and manifest to (as it would be), in the order of to's
// objects, then the removed ones in from's order. Equal manifests give
// none.
func Compare(from, to string) ([]Change, error) {
	olds, err := split(from, "current")
	if err != nil {
		return nil, err
	}
	news, err := split(to, "new")
	if err != nil {
		return nil, err
	}
	oldByKey := make(map[string]map[string]interface{}, len(olds))
	for _, o := range olds {
		oldByKey[o.key] = o.fields
	}
	var out []Change
	kept := map[string]bool{}
	for _, n := range news {
		kept[n.key] = true
		old, ok := oldByKey[n.key]
		if !ok {
			c, err := change(n.key, Added, nil, redacted(n.fields, nil))
			if err != nil {
				return nil, err
			}
			out = append(out, c)
			continue
		}
		if reflect.DeepEqual(old, n.fields) {
			continue
		}
		c, err := change(n.key, Changed, redacted(old, nil), redacted(n.fields, old))
		if err != nil {
			return nil, err
		}
		if c.Diff == "" {
			continue // differs only in how its YAML was written
		}
		out = append(out, c)
	}
	for _, o := range olds {
		if kept[o.key] {
			continue
		}
		c, err := change(o.key, Removed, redacted(o.fields, nil), nil)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// change is the Change of object key from fields old to new (nil: absent).
func change(key, how string, old, new map[string]interface{}) (Change, error) {
	a, err := text(old)
	if err != nil {
		return Change{}, fmt.Errorf("cannot print %s: %w", key, err)
	}
	b, err := text(new)
	if err != nil {
		return Change{}, fmt.Errorf("cannot print %s: %w", key, err)
	}
	from, to := "a/"+key, "b/"+key
	if old == nil {
		from = "/dev/null"
	}
	if new == nil {
		to = "/dev/null"
	}
	var buf bytes.Buffer
	err = difflib.WriteUnifiedDiff(&buf, difflib.UnifiedDiff{A: lines(a), B: lines(b),
		FromFile: from, ToFile: to, Context: 3})
	if err != nil {
		return Change{}, fmt.Errorf("cannot diff %s: %w", key, err)
	}
	return Change{Object: key, Change: how, Diff: buf.String()}, nil
}

// text is fields as YAML with sorted keys, "" for nil.
func text(fields map[string]interface{}) (string, error) {
	if fields == nil {
		return "", nil
	}
	b, err := yaml.Marshal(fields)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// lines splits s into lines that keep their "\n", none for "".
func lines(s string) []string {
	out := strings.SplitAfter(s, "\n")
	if out[len(out)-1] == "" {
		out = out[:len(out)-1]
	}
	return out
}
