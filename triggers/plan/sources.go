package plan

import (
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/internal/format"
	"github.com/autox-dev/autox/internal/redact"
)

// SourceValue is what a live read of one valuesFrom entry found. A read
// error other than NotFound is not an observation: the reader reports it as
// a SourceError and nothing is decided for the release spec.
type SourceValue struct {
	// Ref is the entry; Namespace is where it was read: the release's.
	Ref       config.ValuesFrom
	Namespace string
	// Found is false when the API server answered NotFound for the object.
	Found bool
	// Data is the object's content by key: a Secret's data, a ConfigMap's
	// data and binaryData. It may hold secrets: never log it.
	Data map[string]string
}

// SourceKey names one values source object: what a pass reads once, however
// many release specs share it.
type SourceKey struct{ Kind, Namespace, Name string }

// SourceRead is what a live read of one values source object found, or the
// error that stopped it (nothing is taken for absent).
type SourceRead struct {
	Found bool
	// Data is the object's content by key. It may hold secrets: never log it.
	Data map[string]string
	Err  error
}

// Sources are the reads of a pass (or of one observation), each object
// once. A key absent from the map was not read.
type Sources map[SourceKey]SourceRead

// KeysOf are the objects release spec rs reads its values from, in its
// valuesFrom order: in the release's namespace.
func KeysOf(rs *config.ReleaseSpec) []SourceKey {
	out := make([]SourceKey, 0, len(rs.ValuesFrom))
	for _, ref := range rs.ValuesFrom {
		out = append(out, SourceKey{Kind: ref.Kind, Namespace: rs.Namespace, Name: ref.Name})
	}
	return out
}

// Of returns the reads of rs's valuesFrom entries, in their order: a
// *SourceError for one that failed, and ok false when one was not read.
func (s Sources) Of(rs *config.ReleaseSpec) (values []SourceValue, ok bool, err error) {
	out := make([]SourceValue, 0, len(rs.ValuesFrom))
	for _, ref := range rs.ValuesFrom {
		r, read := s[SourceKey{Kind: ref.Kind, Namespace: rs.Namespace, Name: ref.Name}]
		if !read {
			return nil, false, nil
		}
		if r.Err != nil {
			return nil, true, NewSourceError(ref, rs.Namespace, r.Err)
		}
		out = append(out, SourceValue{Ref: ref, Namespace: rs.Namespace, Found: r.Found, Data: r.Data})
	}
	return out, true, nil
}

// SourceError is a values source that fails its release spec: missing,
// unreadable or not a YAML map. It names the reference — kind, namespace,
// name, key — and never the content.
type SourceError struct {
	Kind, Namespace, Name, Key string
	Err                        error
}

func (e *SourceError) Error() string {
	return fmt.Sprintf("values from %s %s/%s, key %s: %v", e.Kind, e.Namespace, e.Name, e.Key, e.Err)
}

func (e *SourceError) Unwrap() error { return e.Err }

// NewSourceError is the failure of one reference read in namespace.
func NewSourceError(ref config.ValuesFrom, namespace string, err error) *SourceError {
	return &SourceError{Kind: ref.Kind, Namespace: namespace, Name: ref.Name, Key: ref.Key, Err: err}
}

// Merged are the values one release gets, and which source set which path,
// so that a values diff can say where a change came from without showing it.
type Merged struct {
	Values map[string]interface{}
	// origins maps a path as ValuesDiff writes it (".a.b") to the source
	// that set it last ("Secret creds"); paths set by the inline values, or
	// by nothing, are absent.
	origins map[string]string
	// shown are the keys a values path may name: those of the inline
	// values, ConfigMaps, targetPaths and autox's own key. Nil when no
	// Secret's map is merged: every key may be named.
	shown *keyTree
}

// keyTree holds map keys by where they are: a map's keys as children, the
// keys of a list's items under "[]". all says every key below may be named.
type keyTree struct {
	kids map[string]*keyTree
	all  bool
}

func (t *keyTree) child(k string) *keyTree {
	if t.kids == nil {
		t.kids = map[string]*keyTree{}
	}
	if t.kids[k] == nil {
		t.kids[k] = &keyTree{}
	}
	return t.kids[k]
}

// add puts the keys of v (a map, a list, or a scalar with none) in t.
func (t *keyTree) add(v interface{}) {
	switch x := v.(type) {
	case map[string]interface{}:
		for k, sub := range x {
			t.child(k).add(sub)
		}
	case []interface{}:
		for _, item := range x {
			t.child("[]").add(item)
		}
	}
}

// Mask writes the path of segments (".key", "[i]", as ValuesDiff finds
// them) for a reason: a Secret's keys are as secret as its values (a map
// of API keys by user), so from the first key that no inline value,
// ConfigMap, targetPath or autox's own key names at its place, the rest
// of the path is "***".
func (m Merged) Mask(segs []string) string {
	if m.shown == nil {
		return pathString(segs)
	}
	node := m.shown
	var out strings.Builder
	for _, seg := range segs {
		if node != nil && node.all {
			out.WriteString(seg)
			continue
		}
		if strings.HasPrefix(seg, "[") {
			out.WriteString(seg)
			if node != nil {
				node = node.kids["[]"]
			}
			continue
		}
		if node == nil || node.kids[seg[1:]] == nil {
			out.WriteString("." + redact.Mask)
			break
		}
		out.WriteString(seg)
		node = node.kids[seg[1:]]
	}
	return pathString([]string{out.String()})
}

// From names the source of the value at path ("Secret creds"), or "" when
// the inline values or nothing set it. A path inside a source's value (an
// item of a list it set) counts as its; so does a map holding values of
// sources, a Secret's first: a diff there may be a Secret's value.
func (m Merged) From(path string) string {
	if o := m.origins[path]; o != "" {
		return o
	}
	for p := path; p != ""; {
		p = parentPath(p)
		if o := m.origins[p]; o != "" {
			return o
		}
	}
	var below []string
	for p := range m.origins {
		if strings.HasPrefix(p, path+".") || strings.HasPrefix(p, path+"[") {
			below = append(below, p)
		}
	}
	if len(below) == 0 {
		return ""
	}
	sort.Slice(below, func(i, j int) bool {
		si, sj := strings.HasPrefix(m.origins[below[i]], config.KindSecret+" "), strings.HasPrefix(m.origins[below[j]], config.KindSecret+" ")
		if si != sj {
			return si
		}
		return below[i] < below[j]
	})
	return m.origins[below[0]]
}

// parentPath is the path of the map or list holding path ("" for the top).
func parentPath(path string) string {
	i := strings.LastIndexAny(path, ".[")
	if i <= 0 {
		return ""
	}
	return path[:i]
}

// MergeValues builds the values of one release (DESIGN §2): each valuesFrom
// entry in order — the key's content, a YAML map, merged deeply with a later
// entry winning, or with targetPath the content as one string at that
// dotted path, maps created on the way — then the inline values merged on
// top, then the `autox` key. sources are the reads of rs.ValuesFrom in the
// same order. A required object or key that is missing, or a key that is
// not a YAML map, is a *SourceError; an optional one is skipped. Nothing
// given is modified (the config and the reads are shared). Without
// valuesFrom it is exactly DesiredValues, so digests of existing releases
// stay what they were (DESIGN §5).
func MergeValues(rs *config.ReleaseSpec, sources []SourceValue, t config.Trigger, labels map[string]string) (Merged, error) {
	if len(rs.ValuesFrom) == 0 {
		return Merged{Values: DesiredValues(rs, t, labels)}, nil
	}
	if len(sources) != len(rs.ValuesFrom) {
		return Merged{}, fmt.Errorf("%d of the %d valuesFrom entries were read", len(sources), len(rs.ValuesFrom))
	}
	out := map[string]interface{}{}
	origins := map[string]string{}
	shown, secretMap := &keyTree{}, false
	shown.add(rs.Values)
	shown.child(format.InjectedValuesKey).all = true
	for _, s := range sources {
		content, ok := s.Data[s.Ref.Key]
		switch {
		case !s.Found && s.Ref.Optional, s.Found && !ok && s.Ref.Optional:
			continue
		case !s.Found:
			return Merged{}, NewSourceError(s.Ref, s.Namespace, fmt.Errorf("%s not found (set optional: true to go on without it)", s.Ref.Kind))
		case !ok:
			return Merged{}, NewSourceError(s.Ref, s.Namespace, fmt.Errorf("the %s has no such key (set optional: true to go on without it)", s.Ref.Kind))
		}
		origin := s.Ref.Kind + " " + s.Ref.Name
		if path := s.Ref.Path(); path != nil {
			node := shown
			for _, k := range path {
				node = node.child(k)
			}
			out = setPath(out, path, content)
			own(origins, "."+strings.Join(path, "."), origin)
			continue
		}
		m, err := parseMap(content)
		if err != nil {
			var syntax yamlSyntaxError
			if s.Ref.Kind == config.KindSecret && errors.As(err, &syntax) {
				// The YAML library's messages quote what they could not
				// read; of a Secret, only where it is may be told.
				err = secretParseError(syntax.err)
			}
			return Merged{}, NewSourceError(s.Ref, s.Namespace, err)
		}
		if s.Ref.Kind == config.KindSecret {
			secretMap = true
		} else {
			shown.add(m)
		}
		out = mergeMaps(out, m)
		for _, p := range leafPaths(m, "") {
			own(origins, p, origin)
		}
	}
	out = mergeMaps(out, rs.Values)
	for _, p := range leafPaths(rs.Values, "") {
		own(origins, p, "")
	}
	// Whatever a source put under `autox` (validation keeps targetPath
	// off it), autox's own key replaces it whole.
	out[format.InjectedValuesKey] = InjectedValues(t, labels)
	for p := range origins {
		if p == "."+format.InjectedValuesKey || strings.HasPrefix(p, "."+format.InjectedValuesKey+".") {
			delete(origins, p)
		}
	}
	merged := Merged{Values: out, origins: origins}
	if secretMap {
		merged.shown = shown
	}
	return merged, nil
}

// parseMap reads a key's content as Helm reads a values file: YAML, decoded
// through JSON; empty content is an empty map. The YAML error is kept (it
// names a line, and is redacted with the source's content before anyone
// sees it).
// yamlSyntaxError is content the YAML library could not read; its message
// may quote the content.
type yamlSyntaxError struct{ err error }

func (e yamlSyntaxError) Error() string { return "not valid YAML: " + e.err.Error() }
func (e yamlSyntaxError) Unwrap() error { return e.err }

var yamlLine = regexp.MustCompile(`line \d+`)

// secretParseError is a parse error of a Secret's content without the
// content: the line it is on, if the YAML library said, and what to do.
func secretParseError(err error) error {
	where := ""
	if l := yamlLine.FindString(err.Error()); l != "" {
		where = " (" + l + ")"
	}
	return fmt.Errorf("not a valid YAML map%s; the content is not shown because it comes from a Secret", where)
}

func parseMap(content string) (map[string]interface{}, error) {
	var v interface{}
	if err := yaml.Unmarshal([]byte(content), &v); err != nil {
		return nil, yamlSyntaxError{err}
	}
	switch m := v.(type) {
	case nil:
		return map[string]interface{}{}, nil
	case map[string]interface{}:
		return m, nil
	default:
		return nil, fmt.Errorf("not a YAML map (got %s); set targetPath to use it as one string", kindOf(v))
	}
}

func kindOf(v interface{}) string {
	switch v.(type) {
	case []interface{}:
		return "a list"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case float64:
		return "a number"
	}
	return fmt.Sprintf("%T", v)
}

// mergeMaps merges b onto a the way Helm merges `-f` files: a map merges
// with a map key by key, anything else replaces. It returns a new map and
// leaves both alone.
func mergeMaps(a, b map[string]interface{}) map[string]interface{} {
	out := make(map[string]interface{}, len(a)+len(b))
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		if bm, ok := v.(map[string]interface{}); ok {
			if am, ok := out[k].(map[string]interface{}); ok {
				out[k] = mergeMaps(am, bm)
				continue
			}
		}
		out[k] = v
	}
	return out
}

// setPath returns m with value at path, copying the maps on the way and
// making maps where there are none (or where a value of another kind was).
func setPath(m map[string]interface{}, path []string, value interface{}) map[string]interface{} {
	out := make(map[string]interface{}, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	if len(path) == 1 {
		out[path[0]] = value
		return out
	}
	child, _ := out[path[0]].(map[string]interface{})
	out[path[0]] = setPath(child, path[1:], value)
	return out
}

// leafPaths are the paths of m's values that are not maps, as ValuesDiff
// writes them; an empty map counts as a value.
func leafPaths(m map[string]interface{}, prefix string) []string {
	var out []string
	for k, v := range m {
		p := prefix + "." + k
		if sub, ok := v.(map[string]interface{}); ok && len(sub) > 0 {
			out = append(out, leafPaths(sub, p)...)
			continue
		}
		out = append(out, p)
	}
	return out
}

// own records that origin ("" for the inline values) set the value at path
// last: what it replaced, above or below, is no longer anyone else's.
func own(origins map[string]string, path, origin string) {
	for p := range origins {
		if p == path || strings.HasPrefix(p, path+".") || strings.HasPrefix(p, path+"[") || strings.HasPrefix(path, p+".") {
			delete(origins, p)
		}
	}
	if origin != "" {
		origins[path] = origin
	}
}

// sourceSecrets are what the reads hold that a redactor must hide. values
// have their strings hidden: the parsed content of every ConfigMap used.
// fromSecrets are hidden whatever their type: every key of a Secret as it
// was read (a YAML error may quote a line of it; a targetPath places one
// whole) and its parsed content, numbers and booleans included. What a
// ConfigMap's targetPath places is in the merged values (redactorOf).
func sourceSecrets(sources []SourceValue) (values, fromSecrets []map[string]interface{}) {
	for _, s := range sources {
		if !s.Found {
			continue
		}
		secret := s.Ref.Kind == config.KindSecret
		if secret {
			raw := make(map[string]interface{}, len(s.Data))
			for k, v := range s.Data {
				raw[k] = v
			}
			fromSecrets = append(fromSecrets, raw)
		}
		content, ok := s.Data[s.Ref.Key]
		if !ok || s.Ref.TargetPath != "" {
			continue
		}
		m, err := parseMap(content)
		switch {
		case err != nil:
		case secret:
			fromSecrets = append(fromSecrets, m)
		default:
			values = append(values, m)
		}
	}
	return values, fromSecrets
}

// secretsOf is the redactor of Step.Secrets: the values that merged's
// Secret sources set, and what rel's current and last deployed values hold
// at those paths — the previous content of a Secret that changed since,
// which the release's current manifest may show. Values, not a Secret
// key's raw text: a line of that text ("apiKey: ...") would hide the key's
// name with its value. Without a merge (a release no release spec wants)
// it hides whatever the Secret sources read hold (sourceSecrets).
func secretsOf(rel *format.Release, sources []SourceValue, merged Merged) *redact.Redactor {
	if merged.origins == nil {
		_, fromSecrets := sourceSecrets(sources)
		return redact.Build(nil, fromSecrets)
	}
	all := []map[string]interface{}{merged.Values}
	if rel != nil {
		all = append(all, rel.Values, rel.DeployedValues)
	}
	var fromSecrets []map[string]interface{}
	for path, origin := range merged.origins {
		if !strings.HasPrefix(origin, config.KindSecret+" ") {
			continue
		}
		for _, values := range all {
			if v, ok := valueAt(values, path); ok {
				fromSecrets = append(fromSecrets, map[string]interface{}{"": v})
			}
		}
	}
	return redact.Build(nil, fromSecrets)
}

// valueAt is the value at path (".a.b", as origins writes it) of values. A
// key holding a dot cannot be told from two keys: it is tried both ways.
func valueAt(values map[string]interface{}, path string) (interface{}, bool) {
	rest := strings.TrimPrefix(path, ".")
	if v, ok := values[rest]; ok {
		return v, true
	}
	for i := 0; i < len(rest); i++ {
		if rest[i] != '.' {
			continue
		}
		sub, ok := values[rest[:i]].(map[string]interface{})
		if !ok {
			continue
		}
		if v, ok := valueAt(sub, rest[i:]); ok {
			return v, true
		}
	}
	return nil, false
}
