package config

// TEMPORARY stand-in for the selector API a helper builds on wip-selcfg; dropped at the merge.

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"text/template"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const DefaultMaxObjects = 100
const DefaultSelectorReleaseName = "{{.Name}}-{{.ReleaseSpec}}"

func (t Trigger) IsSelector() bool { return t.Selector != nil }

func (t Trigger) Matches(l map[string]string) bool {
	if t.Selector == nil {
		return false
	}
	s, err := metav1.LabelSelectorAsSelector(t.Selector)
	if err != nil {
		return false
	}
	return s.Matches(labelSet(l))
}

type labelSet map[string]string

func (l labelSet) Has(k string) bool   { _, ok := l[k]; return ok }
func (l labelSet) Get(k string) string { return l[k] }
func (l labelSet) Lookup(k string) (string, bool) { v, ok := l[k]; return v, ok }

func (c *Config) TriggerNamespaces(t Trigger) []string {
	if t.Namespace != "" {
		return []string{t.Namespace}
	}
	return c.Namespaces
}

func (c *Config) Selects(t Trigger, namespace string, labels map[string]string) bool {
	if !t.IsSelector() {
		return false
	}
	for _, ns := range c.TriggerNamespaces(t) {
		if ns == namespace {
			return t.Matches(labels)
		}
	}
	return false
}

func RenderReleaseName(tmpl, spec, releaseSpec, namespace, name string) (string, error) {
	t, err := template.New("").Option("missingkey=error").Parse(tmpl)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	if err := t.Execute(&b, map[string]string{"Spec": spec, "ReleaseSpec": releaseSpec, "Name": name, "Namespace": namespace}); err != nil {
		return "", err
	}
	out := b.String()
	if len(out) > 53 {
		sum := sha256.Sum256([]byte(out))
		out = out[:40] + "-" + hex.EncodeToString(sum[:])[:12]
	}
	return out, nil
}

func (s *Spec) ForObject(specName, namespace, name string) (*Spec, error) {
	out := &Spec{Trigger: s.Trigger, ReleaseSpecs: map[string]*ReleaseSpec{}}
	out.Trigger.Name, out.Trigger.Namespace = name, namespace
	for id, rs := range s.ReleaseSpecs {
		c := *rs
		n, err := RenderReleaseName(rs.ReleaseName, specName, id, namespace, name)
		if err != nil {
			return nil, err
		}
		c.ReleaseName = n
		if c.Namespace == "" {
			c.Namespace = namespace
		}
		out.ReleaseSpecs[id] = &c
	}
	return out, nil
}
