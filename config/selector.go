package config

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"text/template"
	"text/template/parse"

	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Release names longer than maxReleaseName (Helm's limit) are cut to
// hashPrefix characters, "-" and hashDigits hex digits of the sha256 of the
// whole name: the name stays unique per object and is the same on every run,
// so a restart finds the releases it made (DESIGN §2).
const (
	maxReleaseName = 53
	hashPrefix     = 40
	hashDigits     = 12
)

// maxRenderedName bounds what a releaseName template may write, so that a
// template such as {{printf "%0999999d" 0}} costs an error, not memory.
const maxRenderedName = 4096

// IsSelector reports whether t is a selector trigger (every matching object)
// rather than a named one.
func (t Trigger) IsSelector() bool {
	return t.Selector != nil
}

// Matches reports whether the selector of t matches an object with these
// labels; it is false for a named trigger. A Trigger built by hand rather than
// loaded is parsed here; a selector that does not parse matches nothing.
func (t Trigger) Matches(objectLabels map[string]string) bool {
	if t.Selector == nil {
		return false
	}
	sel := t.selector
	if sel == nil {
		var err error
		if sel, err = metav1.LabelSelectorAsSelector(t.Selector); err != nil {
			return false
		}
	}
	// An empty selector parses to "everything"; validation rejects it, and a
	// hand-built one must not match every object either.
	if sel.Empty() {
		return false
	}
	return sel.Matches(labels.Set(objectLabels))
}

// TriggerNamespaces returns the namespaces whose objects trigger t can be:
// [t.Namespace] when set, else every managed namespace in config order. The
// slice is a copy; callers may keep or change it.
func (c *Config) TriggerNamespaces(t Trigger) []string {
	if t.Namespace != "" {
		return []string{t.Namespace}
	}
	return append([]string(nil), c.Namespaces...)
}

// Selects reports whether the object (namespace, labels) is one of the
// objects of selector trigger t. Group and resource are the caller's to
// compare: it knows which informer or list the object came from.
func (c *Config) Selects(t Trigger, namespace string, objectLabels map[string]string) bool {
	return t.IsSelector() && c.Covers(t, namespace) && t.Matches(objectLabels)
}

// Covers reports whether namespace is one of TriggerNamespaces(t): whether
// an object there can be one of t's at all.
func (c *Config) Covers(t Trigger, namespace string) bool {
	if t.Namespace != "" {
		return t.Namespace == namespace
	}
	return slices.Contains(c.Namespaces, namespace)
}

// RenderReleaseName renders a selector spec's releaseName template for one
// object. The template sees .Spec, .ReleaseSpec, .Name and .Namespace (the
// object's); text/template's built-in functions only. A result over 53
// characters becomes its first 40 characters, "-", and the first 12 hex digits
// of the sha256 of the whole result. The error names the release spec's YAML
// path, the object and what to change.
func RenderReleaseName(tmpl, spec, releaseSpec, namespace, name string) (string, error) {
	out, err := renderReleaseName(tmpl, spec, releaseSpec, namespace, name)
	if err != nil {
		return "", fmt.Errorf("specs.%s.releaseSpecs.%s.releaseName: %w", spec, releaseSpec, err)
	}
	return out, nil
}

// renderReleaseName is RenderReleaseName without the YAML path, for
// validation, whose problems carry the path already.
func renderReleaseName(tmpl, spec, releaseSpec, namespace, name string) (string, error) {
	t, err := parseReleaseName(tmpl)
	if err != nil {
		return "", err
	}
	data := map[string]string{"Spec": spec, "ReleaseSpec": releaseSpec, "Namespace": namespace, "Name": name}
	w := &boundedWriter{}
	if err := t.Execute(w, data); err != nil {
		return "", fmt.Errorf("template %q cannot be rendered for object %s/%s: %w; use only .Spec, .ReleaseSpec, .Name and .Namespace", tmpl, namespace, name, err)
	}
	full := w.b.String()
	out := full
	if len(out) > maxReleaseName {
		sum := sha256.Sum256([]byte(full))
		out = full[:hashPrefix] + "-" + hex.EncodeToString(sum[:])[:hashDigits]
	}
	if err := chartutil.ValidateReleaseName(out); err != nil {
		return "", fmt.Errorf("template %q gives %q for object %s/%s, not a valid Helm release name (%w); write a template that gives lower-case letters, digits, '-' and '.', starting and ending with a letter or digit", tmpl, out, namespace, name, err)
	}
	return out, nil
}

// parseReleaseName parses a releaseName template. missingkey=error turns a
// misspelt field such as .name into an error instead of "<no value>".
// {{define}} and {{block}} are refused: a name needs no sub-templates, and a
// template that calls itself would recurse 100,000 levels deep before
// text/template stops it.
func parseReleaseName(tmpl string) (*template.Template, error) {
	t, err := template.New("releaseName").Option("missingkey=error").Parse(tmpl)
	if err != nil {
		return nil, fmt.Errorf("template %q does not parse (%w); write a Go template such as %q", tmpl, err, DefaultSelectorReleaseName)
	}
	if len(t.Templates()) > 1 {
		return nil, fmt.Errorf("template %q defines templates ({{define}} or {{block}}), which a release name does not need; write a single template such as %q", tmpl, DefaultSelectorReleaseName)
	}
	return t, nil
}

// usesName reports whether a parsed releaseName template refers to the
// object's name (.Name or $.Name) in its parse tree. Without it two objects
// would get the same release names. A substring test would accept
// {{/* .Name */}} or {{.Names}}.
func usesName(t *template.Template) bool {
	var walk func(n parse.Node) bool
	walk = func(n parse.Node) bool {
		switch n := n.(type) {
		case *parse.FieldNode:
			return len(n.Ident) == 1 && n.Ident[0] == "Name"
		case *parse.VariableNode:
			return len(n.Ident) == 2 && n.Ident[0] == "$" && n.Ident[1] == "Name"
		case *parse.ListNode:
			if n == nil {
				return false
			}
			for _, c := range n.Nodes {
				if walk(c) {
					return true
				}
			}
		case *parse.ActionNode:
			return walk(n.Pipe)
		case *parse.PipeNode:
			if n == nil {
				return false
			}
			for _, c := range n.Cmds {
				if walk(c) {
					return true
				}
			}
		case *parse.CommandNode:
			for _, a := range n.Args {
				if walk(a) {
					return true
				}
			}
		case *parse.ChainNode:
			return walk(n.Node)
		case *parse.IfNode:
			return walk(n.Pipe) || walk(n.List) || walk(n.ElseList)
		case *parse.RangeNode:
			return walk(n.Pipe) || walk(n.List) || walk(n.ElseList)
		case *parse.WithNode:
			return walk(n.Pipe) || walk(n.List) || walk(n.ElseList)
		}
		return false
	}
	return t.Tree != nil && walk(t.Tree.Root)
}

// boundedWriter collects a rendered name and fails past maxRenderedName bytes.
type boundedWriter struct {
	b strings.Builder
}

var errNameTooLong = errors.New("the template writes more than 4096 characters")

func (w *boundedWriter) Write(p []byte) (int, error) {
	if w.b.Len()+len(p) > maxRenderedName {
		return 0, errNameTooLong
	}
	return w.b.Write(p)
}

// ForObject returns the spec as it applies to one object of selector spec s:
// a copy whose Trigger names the object (Name, Namespace; Selector, MaxObjects
// and Labels kept) and whose release specs carry the rendered release name and
// a namespace (the release spec's own, else the object's). The result can go
// where a named spec goes. Values maps are shared with s and must not be
// modified. The error names the spec, the release spec and the object.
func (s *Spec) ForObject(specName, namespace, name string) (*Spec, error) {
	if !s.Trigger.IsSelector() {
		return nil, fmt.Errorf("spec %q has a named trigger, not a selector: it has no per-object form", specName)
	}
	if namespace == "" || name == "" {
		return nil, fmt.Errorf("spec %q: object %s/%s needs both a namespace and a name", specName, namespace, name)
	}
	out := &Spec{Trigger: s.Trigger, ReleaseSpecs: make(map[string]*ReleaseSpec, len(s.ReleaseSpecs)), ServiceAccountName: s.ServiceAccountName, Suspend: s.Suspend}
	out.Trigger.Name, out.Trigger.Namespace = name, namespace
	out.Trigger.Labels = append([]string(nil), s.Trigger.Labels...)
	if s.Trigger.Labels != nil && out.Trigger.Labels == nil {
		out.Trigger.Labels = []string{} // an explicit empty list keeps its meaning
	}
	for _, id := range s.ReleaseSpecIDs() {
		rs := s.ReleaseSpecs[id]
		if rs == nil {
			return nil, fmt.Errorf("spec %q, release spec %q: no release spec", specName, id)
		}
		rn, err := RenderReleaseName(rs.ReleaseName, specName, id, namespace, name)
		if err != nil {
			return nil, fmt.Errorf("spec %q, release spec %q, object %s/%s: %w", specName, id, namespace, name, err)
		}
		c := *rs
		c.ReleaseName = rn
		if c.Namespace == "" {
			c.Namespace = namespace
		}
		c.Chart.Keyring = keyringIn(rs.Chart.Keyring, c.Namespace)
		out.ReleaseSpecs[id] = &c
	}
	return out, nil
}
