package helmops

import (
	"sort"
	"sync"

	"helm.sh/helm/v4/pkg/kube"
	helmrelease "helm.sh/helm/v4/pkg/release"
	release "helm.sh/helm/v4/pkg/release/v1"
	releaseutil "helm.sh/helm/v4/pkg/release/v1/util"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// Helm 4's uninstall reads each object of the release before it deletes it
// and leaves alone, with a warning, every object that lacks Helm's marks of
// this release (the label app.kubernetes.io/managed-by=Helm, the
// annotations meta.helm.sh/release-name and -namespace) or that it cannot
// read; Helm 3 deleted what the manifest named. autox keeps Helm 4's rule —
// it never deletes an object it cannot prove the release's, nor with an
// identity wider than the release's — and says which objects were left:
// the release's objects that its manifest names and Helm did not delete
// (DESIGN §3, uninstall).

// deletions records the objects Helm's kube client was asked to delete.
type deletions struct {
	mu      sync.Mutex
	objects map[string]bool // kind/name
}

func (d *deletions) add(resources kube.ResourceList) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.objects == nil {
		d.objects = map[string]bool{}
	}
	for _, info := range resources {
		if info != nil && info.Mapping != nil {
			d.objects[info.Mapping.GroupVersionKind.Kind+"/"+info.Name] = true
		}
	}
}

// leftBehind returns, sorted as kind/name, the objects of rel's manifest
// that were not deleted and that Helm's resource policy does not keep.
func (d *deletions) leftBehind(rel *release.Release) []string {
	if rel == nil {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	for _, doc := range releaseutil.SplitManifests(rel.Manifest) {
		var head struct {
			Kind     string            `json:"kind"`
			Metadata metav1.ObjectMeta `json:"metadata"`
		}
		if err := yaml.Unmarshal([]byte(doc), &head); err != nil || head.Kind == "" || head.Metadata.Name == "" {
			continue
		}
		if head.Metadata.Annotations[kube.ResourcePolicyAnno] == kube.KeepPolicy {
			continue
		}
		if key := head.Kind + "/" + head.Metadata.Name; !d.objects[key] {
			out = append(out, key)
		}
	}
	sort.Strings(out)
	return out
}

// reportLeft logs, as a warning, the objects of an uninstalled release that
// the uninstall did not delete.
func (m *Manager) reportLeft(namespace, name string, res *helmrelease.UninstallReleaseResponse, rec *deletions) {
	if res == nil {
		return
	}
	rel, err := asV1(res.Release)
	if err != nil {
		return
	}
	if left := rec.leftBehind(rel); len(left) > 0 {
		m.opts.Log.Warn().Str("release", name).Str("namespace", namespace).Strs("objects", left).
			Msg("uninstall left objects of the release in place: they lack Helm's marks of this release (label app.kubernetes.io/managed-by=Helm, annotations meta.helm.sh/release-name and release-namespace), could not be read, or were already gone; delete them yourself if they are the release's")
	}
}
