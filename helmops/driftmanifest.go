package helmops

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"

	releaseutil "helm.sh/helm/v4/pkg/release/v1/util"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// The desired objects of a drift check: a release manifest's documents as
// Helm applied them.

// manifestObjects are the objects of a release manifest, in Helm's install
// order, each with the marks Helm puts on the objects it writes (not in
// the manifest): so a removed mark is drift, and the dry run applies what
// Helm applied.
func manifestObjects(manifest string, t DriftTarget) ([]*unstructured.Unstructured, error) {
	docs := releaseutil.SplitManifests(manifest)
	var out []*unstructured.Unstructured
	for _, k := range sortedManifestKeys(docs) {
		m := map[string]interface{}{}
		if err := yaml.Unmarshal([]byte(docs[k]), &m); err != nil {
			return nil, fmt.Errorf("a manifest document does not parse: %w", err)
		}
		if len(m) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: m}
		if u.GetKind() == "" || u.GetName() == "" {
			return nil, errors.New("a manifest document has no kind or name")
		}
		l := u.GetLabels()
		if l == nil {
			l = map[string]string{}
		}
		l["app.kubernetes.io/managed-by"] = "Helm"
		u.SetLabels(l)
		a := u.GetAnnotations()
		if a == nil {
			a = map[string]string{}
		}
		a["meta.helm.sh/release-name"], a["meta.helm.sh/release-namespace"] = t.Name, t.Namespace
		u.SetAnnotations(a)
		if err := secretStringData(u); err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	return out, nil
}

// secretStringData moves a Secret's stringData into its data, as the API
// server stores it: stringData is write-only, so a dry run's result has
// none to compare, and drift of those keys would go unseen (k8s #108008).
func secretStringData(u *unstructured.Unstructured) error {
	if u.GetKind() != "Secret" || u.GroupVersionKind().Group != "" {
		return nil
	}
	sd, found, err := unstructured.NestedMap(u.Object, "stringData")
	if err != nil || !found {
		return err
	}
	data, _, err := unstructured.NestedMap(u.Object, "data")
	if err != nil {
		return err
	}
	if data == nil {
		data = map[string]interface{}{}
	}
	for k, v := range sd {
		s, ok := v.(string)
		if !ok {
			return fmt.Errorf("a stringData value of Secret %s is not a string", u.GetName())
		}
		data[k] = base64.StdEncoding.EncodeToString([]byte(s)) // stringData wins, as on the server
	}
	unstructured.RemoveNestedField(u.Object, "stringData")
	return unstructured.SetNestedMap(u.Object, data, "data")
}

// sortedManifestKeys are SplitManifests' keys (manifest-0, manifest-1, …)
// in document order.
func sortedManifestKeys(docs map[string]string) []string {
	keys := make([]string, len(docs))
	i := 0
	for k := range docs {
		keys[i] = k
		i++
	}
	num := func(k string) int {
		n, _ := strconv.Atoi(strings.TrimPrefix(k, "manifest-"))
		return n
	}
	for a := 1; a < len(keys); a++ {
		for b := a; b > 0 && num(keys[b]) < num(keys[b-1]); b-- {
			keys[b], keys[b-1] = keys[b-1], keys[b]
		}
	}
	return keys
}
