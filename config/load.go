package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"

	yamlv2 "go.yaml.in/yaml/v2"
	"sigs.k8s.io/yaml"
)

// Problem is one thing wrong with a config file, at a YAML path such as
// specs.httpbin.releaseSpecs.iter8.chart.version.
type Problem struct {
	Path    string
	Message string
}

func (p Problem) String() string {
	if p.Path == "" {
		return p.Message
	}
	return p.Path + ": " + p.Message
}

// Error is every problem found in one config file. Load returns it so that a
// user fixes all of them in one edit.
type Error struct {
	// File is the config file's path, or "" when parsing bytes.
	File     string
	Problems []Problem
}

func (e *Error) Error() string {
	var b strings.Builder
	if e.File != "" {
		fmt.Fprintf(&b, "invalid config %s:", e.File)
	} else {
		b.WriteString("invalid config:")
	}
	for _, p := range e.Problems {
		b.WriteString("\n  ")
		b.WriteString(p.String())
	}
	return b.String()
}

// Lines returns one "<yaml path>: <message>" line per problem.
func (e *Error) Lines() []string {
	out := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		out[i] = p.String()
	}
	return out
}

// Load reads, decodes, defaults and validates the config file at path. A
// returned *Config is valid; otherwise the error is an *Error listing every
// problem, or an I/O error.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read config file: %w", err)
	}
	return ParseFile(path, data)
}

// ParseFile is Load for content already read from path: errors name the file
// and chart paths are relative to its directory.
func ParseFile(path string, data []byte) (*Config, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("cannot resolve config file path: %w", err)
	}
	cfg, err := Parse(data, filepath.Dir(abs))
	var cerr *Error
	if errors.As(err, &cerr) {
		cerr.File = path
	}
	return cfg, err
}

// Parse decodes, defaults and validates config bytes. dir is the directory that
// relative chart paths are resolved against.
func Parse(data []byte, dir string) (*Config, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, &Error{Problems: []Problem{{Message: "the file is empty; it needs at least `namespaces` and `specs` (use `specs: {}` for no releases)"}}}
	}
	// YAMLToJSONStrict rejects duplicate keys, which plain YAML would silently
	// resolve to the last one.
	js, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, &Error{Problems: []Problem{{Message: fmt.Sprintf("not valid YAML: %v", err)}}}
	}
	var tree interface{}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	if err := dec.Decode(&tree); err != nil {
		return nil, &Error{Problems: []Problem{{Message: fmt.Sprintf("not valid YAML: %v", err)}}}
	}
	if tree == nil {
		return nil, &Error{Problems: []Problem{{Message: "the file holds no document; it needs at least `namespaces` and `specs` (use `specs: {}` for no releases)"}}}
	}

	// The shape check walks the generic tree against the Go types first, so that
	// every unknown field and every YAML 1.1 surprise (unquoted yes, on, 1.10)
	// is reported with its path instead of encoding/json's first error only.
	if _, ok := tree.(map[string]interface{}); !ok {
		return nil, &Error{Problems: []Problem{{Message: fmt.Sprintf("the file must be a YAML map with `namespaces` and `specs`, got %s", describe(tree))}}}
	}
	var problems []Problem
	if mayHaveNonStringKeys(tree) {
		checkKeys(data, &problems)
	}
	checkShape(tree, reflect.TypeOf(Config{}), location{}, &problems)
	if m, ok := tree.(map[string]interface{}); ok {
		if _, has := m["specs"]; !has {
			problems = append(problems, Problem{"specs", "required (use `specs: {}` for no releases)"})
		}
		if _, has := m["namespaces"]; !has {
			problems = append(problems, Problem{"namespaces", "required: list the namespaces autox manages releases in"})
		}
	}
	if len(problems) > 0 {
		sortProblems(problems)
		return nil, &Error{Problems: problems}
	}

	cfg := &Config{}
	if err := json.Unmarshal(js, cfg); err != nil {
		// checkShape accepted the tree, so this is a bug, not bad input; still
		// report it as a problem instead of panicking.
		return nil, &Error{Problems: []Problem{{Message: fmt.Sprintf("cannot decode: %v", err)}}}
	}
	cfg.Dir = dir
	applyDefaults(cfg)
	if problems := validate(cfg); len(problems) > 0 {
		return nil, &Error{Problems: problems}
	}
	return cfg, nil
}

// mayHaveNonStringKeys reports whether tree, the file as JSON, has a key
// (outside values, as checkKeys) that a YAML key read as something other
// than a string becomes in the conversion to JSON: true, false, a number,
// .inf, -.inf or .nan. Only then does checkKeys need to parse the YAML
// again — for a file of 10,000 specs, a third of its load.
func mayHaveNonStringKeys(tree interface{}) bool {
	switch v := tree.(type) {
	case map[string]interface{}:
		for k, child := range v {
			switch k {
			case "true", "false", ".inf", "-.inf", ".nan":
				return true
			case "values":
				continue
			}
			if _, err := strconv.ParseFloat(k, 64); err == nil {
				return true
			}
			if mayHaveNonStringKeys(child) {
				return true
			}
		}
	case []interface{}:
		for _, child := range v {
			if mayHaveNonStringKeys(child) {
				return true
			}
		}
	}
	return false
}

// checkKeys reports map keys that YAML 1.1 reads as something other than a
// string: an unquoted `y`, `no` or `on` as a spec or release spec id silently
// becomes "true" or "false" once converted to JSON. Values are left to Helm's
// own rules, as DESIGN §2 says.
func checkKeys(data []byte, problems *[]Problem) {
	var raw interface{}
	if err := yamlv2.Unmarshal(data, &raw); err != nil {
		return // the JSON conversion reports syntax errors
	}
	var walk func(node interface{}, path string)
	walk = func(node interface{}, path string) {
		switch v := node.(type) {
		case map[interface{}]interface{}:
			for k, child := range v {
				ks, ok := k.(string)
				if !ok {
					*problems = append(*problems, Problem{path, fmt.Sprintf("the key %v is read as a %T, not a string: YAML reads unquoted y/n/yes/no/on/off/true/false and numbers that way; quote the key", k, k)})
					continue
				}
				if ks == "values" {
					continue
				}
				walk(child, join(path, ks))
			}
		case []interface{}:
			for i, child := range v {
				walk(child, index(path, i))
			}
		}
	}
	walk(raw, "")
}

var rawMapType = reflect.TypeOf(map[string]interface{}{})

// structFields are a struct type's JSON field names and types, in field order.
type structFields struct {
	types map[string]reflect.Type
	names []string
}

// fieldsOf caches structFields by type: a file of 10,000 specs has tens of
// thousands of struct nodes, and reading the tags for each took a quarter of
// the file's load time.
var fieldsOf sync.Map // reflect.Type → *structFields

// jsonFields returns the JSON field names of struct type typ, by name and
// in field order.
func jsonFields(typ reflect.Type) (map[string]reflect.Type, []string) {
	if f, ok := fieldsOf.Load(typ); ok {
		return f.(*structFields).types, f.(*structFields).names
	}
	f := &structFields{types: map[string]reflect.Type{}}
	for i := 0; i < typ.NumField(); i++ {
		field := typ.Field(i)
		name, _, _ := strings.Cut(field.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		f.types[name] = field.Type
		f.names = append(f.names, name)
	}
	fieldsOf.Store(typ, f)
	return f.types, f.names
}

// noValue lists the places where a key given with no value (YAML null) is an
// error instead of "omitted", each with what to write instead. A file cut
// short right after `specs:` reads as `specs: null`: taken for "no specs", it
// would uninstall every release. Places are YAML paths with * for a map key
// and [] for a list item. Elsewhere null means omitted: `values:` is no
// values, and an optional string with a default (group, releaseName,
// namespace, onChange) gets its default.
var noValue = map[string]string{
	"namespaces":                                      "list the namespaces autox manages releases in, e.g. `namespaces: [default]`",
	"namespaces[]":                                    "write a namespace name, or remove the empty list item",
	"specs":                                           "write the specs as a map, or `specs: {}` for no releases",
	"specs.*":                                         "write the spec as a map with `trigger` and `releaseSpecs`, or remove it",
	"specs.*.trigger":                                 "write the trigger object as a map with `version`, `resource`, `name` and `namespace` (or a `selector` instead of `name`, for every matching object)",
	"specs.*.trigger.version":                         "write the API version, e.g. `version: v1`",
	"specs.*.trigger.resource":                        "write the plural resource name, e.g. `resource: deployments`",
	"specs.*.trigger.name":                            "write the trigger object's name",
	"specs.*.trigger.namespace":                       "write the trigger object's namespace (a selector trigger may omit the key: every managed namespace)",
	"specs.*.trigger.selector":                        "write `matchLabels` and/or `matchExpressions`, or remove the key and use `name`",
	"specs.*.trigger.selector.matchLabels.*":          "write the label value, quoted (\"\" for an empty one)",
	"specs.*.trigger.selector.matchExpressions[]":     "write a map with `key`, `operator` and (for In and NotIn) `values`, or remove the empty list item",
	"specs.*.trigger.selector.matchExpressions[].key": "write a label key",
	"specs.*.trigger.selector.matchExpressions[].operator": "write In, NotIn, Exists or DoesNotExist",
	"specs.*.trigger.selector.matchExpressions[].values[]": "write a label value, quoted (\"\" for an empty one), or remove the empty list item",
	"specs.*.trigger.labels":                               "write a list of label keys, `labels: []` if the object's existence is enough, or omit the key for the default [" + DefaultTriggerLabel + "]",
	"specs.*.trigger.labels[]":                             "write a label key, or remove the empty list item",
	"specs.*.releaseSpecs":                                 "write the release specs as a map from id to release spec",
	"specs.*.releaseSpecs.*":                               "write the release spec as a map with at least `chart`, or remove it",
	"specs.*.releaseSpecs.*.chart":                         "write `path` (a chart directory or .tgz relative to the config file), or `repo` with `name` and `version`",
	"specs.*.releaseSpecs.*.chart.repo":                    "write an http(s):// or oci:// URL, or remove the key and use `path`",
	"specs.*.releaseSpecs.*.chart.name":                    "write the chart's name in its repository",
	"specs.*.releaseSpecs.*.chart.version":                 "write the exact chart version, quoted if it looks like a number (e.g. \"1.10\")",
	"specs.*.releaseSpecs.*.chart.path":                    "write a chart directory or .tgz relative to the config file, or remove the key and use `repo`",
	"specs.*.releaseSpecs.*.dependsOn[]":                   "write the id of a release spec of this spec, or remove the empty list item",
	// A pin or an identity that a template left empty must not silently
	// become "none": no pin, or autox's own (wider) identity.
	"specs.*.releaseSpecs.*.chart.digest":             "write the chart's digest, sha256:<64 hex digits>, or remove the key",
	"specs.*.releaseSpecs.*.chart.keyring":            "write `secretName` (and optionally `key`) of the keyring Secret, or remove the key for the --chart-keyring file",
	"specs.*.releaseSpecs.*.chart.keyring.secretName": "write the name of the Secret holding the keyring",
	"specs.*.serviceAccountName":                      serviceAccountHint,
	"specs.*.releaseSpecs.*.serviceAccountName":       serviceAccountHint,
}

const serviceAccountHint = "write the name of a service account in the release's namespace, or remove the key (the release then runs as the spec's account, --default-service-account, or autox's own identity)"

// nonEmpty lists the string places where "" is an error rather than
// "omitted", for the same reason as noValue's entries for them.
var nonEmpty = map[string]string{
	"specs.*.releaseSpecs.*.chart.digest":       "write the chart's digest, sha256:<64 hex digits>, or remove the key",
	"specs.*.serviceAccountName":                serviceAccountHint,
	"specs.*.releaseSpecs.*.serviceAccountName": serviceAccountHint,
}

// positive lists the integer places whose value must be at least 1. A 0
// written out is reported here, because after decoding it cannot be told from
// an omitted key, which gets the default.
var positive = map[string]string{
	"specs.*.maxObjects":                "omit it for the default " + strconv.Itoa(DefaultMaxObjects),
	"specs.*.trigger.maxObjects":        "omit it for the default " + strconv.Itoa(DefaultMaxObjects),
	"specs.*.releaseSpecs.*.maxHistory": "omit it for the default of --max-history",
}

// location is where checkShape stands in the tree: the YAML path that a
// problem names, and the place in the schema that noValue is keyed by.
type location struct {
	path, place string
}

func (l location) field(name string) location {
	return location{join(l.path, name), join(l.place, name)}
}

func (l location) key(k string) location {
	return location{join(l.path, k), join(l.place, "*")}
}

func (l location) item(i int) location {
	return location{index(l.path, i), l.place + "[]"}
}

// checkShape reports where the decoded YAML tree does not fit typ.
func checkShape(node interface{}, typ reflect.Type, at location, problems *[]Problem) {
	for typ.Kind() == reflect.Ptr {
		typ = typ.Elem()
	}
	add := func(msg string) { *problems = append(*problems, Problem{at.path, msg}) }
	if node == nil {
		if hint, required := noValue[at.place]; required {
			add("has no value; " + hint)
		}
		return
	}
	if typ == rawMapType {
		if _, ok := node.(map[string]interface{}); !ok {
			add(fmt.Sprintf("must be a map, got %s", describe(node)))
		}
		return
	}
	switch typ.Kind() {
	case reflect.Struct:
		m, ok := node.(map[string]interface{})
		if !ok {
			add(fmt.Sprintf("must be a map, got %s", describe(node)))
			return
		}
		fields, names := jsonFields(typ)
		for _, k := range sortedKeys(m) {
			ft, ok := fields[k]
			if !ok {
				*problems = append(*problems, Problem{join(at.path, k), fmt.Sprintf("unknown field; known fields here: %s", strings.Join(names, ", "))})
				continue
			}
			checkShape(m[k], ft, at.field(k), problems)
		}
	case reflect.Map:
		m, ok := node.(map[string]interface{})
		if !ok {
			add(fmt.Sprintf("must be a map, got %s", describe(node)))
			return
		}
		for _, k := range sortedKeys(m) {
			checkShape(m[k], typ.Elem(), at.key(k), problems)
		}
	case reflect.Slice:
		l, ok := node.([]interface{})
		if !ok {
			add(fmt.Sprintf("must be a list, got %s", describe(node)))
			return
		}
		for i, v := range l {
			checkShape(v, typ.Elem(), at.item(i), problems)
		}
	case reflect.Int:
		num, ok := node.(json.Number)
		if !ok {
			add(fmt.Sprintf("must be a whole number, got %s", describe(node)))
			return
		}
		n, err := strconv.ParseInt(string(num), 10, strconv.IntSize)
		if err != nil {
			add(fmt.Sprintf("must be a whole number such as 100, got %s", num))
			return
		}
		if hint, ok := positive[at.place]; ok && n < 1 {
			add(fmt.Sprintf("must be at least 1, got %d; %s", n, hint))
		}
	case reflect.String:
		switch v := node.(type) {
		case string:
			if hint, ok := nonEmpty[at.place]; ok && v == "" {
				add("is empty; " + hint)
			}
		case bool:
			add(fmt.Sprintf("must be a string, got the boolean %v: YAML reads unquoted yes/no/on/off/y/n/true/false as booleans; quote the value", v))
		case json.Number:
			add(fmt.Sprintf("must be a string, got the number %s: YAML reads unquoted numbers such as 1.10 as numbers (1.1); quote the value", v))
		default:
			add(fmt.Sprintf("must be a string, got %s", describe(node)))
		}
	case reflect.Bool:
		if _, ok := node.(bool); !ok {
			add(fmt.Sprintf("must be true or false, got %s", describe(node)))
		}
	}
}

func describe(node interface{}) string {
	switch v := node.(type) {
	case map[string]interface{}:
		return "a map"
	case []interface{}:
		return "a list"
	case string:
		return "a string"
	case bool:
		return fmt.Sprintf("the boolean %v", v)
	case json.Number:
		return fmt.Sprintf("the number %s", v)
	default:
		return fmt.Sprintf("%T", node)
	}
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func index(path string, i int) string {
	return fmt.Sprintf("%s[%d]", path, i)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func sortProblems(p []Problem) {
	sort.SliceStable(p, func(i, j int) bool { return p[i].Path < p[j].Path })
}
