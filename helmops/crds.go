package helmops

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"time"

	"helm.sh/helm/v4/pkg/action"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/kube"
	releaseutil "helm.sh/helm/v4/pkg/release/v1/util"
	"helm.sh/helm/v4/pkg/storage/driver"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/cli-runtime/pkg/resource"
	"sigs.k8s.io/yaml"
)

// crdEstablished bounds the wait for applied CRDs to be served, as Helm's
// own install of a chart's CRDs does.
const crdEstablished = time.Minute

// applyCRDs creates the CustomResourceDefinitions of ch's crds/ directories
// (its dependencies' included) that do not exist, and with replace replaces
// those that do by the chart's, then waits until the API server serves what
// it changed. Helm leaves CRDs alone on upgrade and never replaces one on
// install (HIP-0011: a CRD change can lose data); the crds policy asks for
// it explicitly. A CRD is never deleted, here or by an uninstall.
func (m *Manager) applyCRDs(cfg *action.Configuration, ch *chart.Chart, replace bool) error {
	var changed kube.ResourceList
	for _, crd := range ch.CRDObjects() {
		infos, err := cfg.KubeClient.Build(bytes.NewReader(crd.File.Data), false)
		if err != nil {
			return fmt.Errorf("cannot read the CustomResourceDefinitions of %s: %w", crd.Filename, err)
		}
		for _, info := range infos {
			helper := resource.NewHelper(info.Client, info.Mapping)
			// A CRD written is a write of the operation (nowrite.go); one
			// that exists and is left alone is none.
			_, err := helper.Create(info.Namespace, true, info.Object)
			if !apierrors.IsAlreadyExists(err) || replace {
				writesOf(cfg).note()
			}
			switch {
			case err == nil:
			case apierrors.IsAlreadyExists(err) && replace:
				if _, err := helper.Replace(info.Namespace, info.Name, true, info.Object); err != nil {
					return fmt.Errorf("cannot replace CustomResourceDefinition %s: %w", info.Name, err)
				}
			case apierrors.IsAlreadyExists(err):
				continue
			default:
				return fmt.Errorf("cannot create CustomResourceDefinition %s: %w", info.Name, err)
			}
			changed = append(changed, info)
		}
	}
	if len(changed) == 0 {
		return nil
	}
	// Helm 3's wait until they are served (Helm 4's legacy waiter).
	waiter, err := cfg.KubeClient.GetWaiter(kube.LegacyStrategy)
	if err != nil {
		return fmt.Errorf("cannot wait for the chart's CustomResourceDefinitions: %w", err)
	}
	if err := waiter.Wait(changed, crdEstablished); err != nil {
		return fmt.Errorf("the chart's CustomResourceDefinitions are not served yet: %w", err)
	}
	m.forgetAPIs()
	return nil
}

// forgetAPIs makes the next operations discover the cluster's APIs anew:
// after CRDs changed, a chart that uses them must be mapped and rendered
// against them (.Capabilities), not against what was cached before.
func (m *Manager) forgetAPIs() {
	m.forgetCapabilities()
	if m.discovery.init() == nil {
		meta.MaybeResetRESTMapper(m.discovery.mapper)
	}
}

// learnCRDs is called after an install, upgrade or rollback that applied
// manifest: when it holds CustomResourceDefinitions (a chart's templates,
// which Helm applies as any object and never waits for without wait), it
// waits until the API server serves them, bounded by crdEstablished, and
// makes the next operations discover the APIs anew, so that a release
// depending on this one maps and renders its objects of those kinds at once
// rather than once the cached discovery expires. The operation itself is
// done: a CRD not served in time is logged, and the next build that misses
// its kind refreshes discovery once more (kubeClient.Build).
func (m *Manager) learnCRDs(cfg *action.Configuration, namespace, name, manifest string) {
	crds := crdManifests(manifest)
	if crds == "" {
		return
	}
	defer m.forgetAPIs()
	log := m.opts.Log.With().Str("namespace", namespace).Str("release", name).Logger()
	infos, err := cfg.KubeClient.Build(strings.NewReader(crds), false)
	if err != nil {
		log.Warn().Err(err).Msg("cannot read the release's CustomResourceDefinitions: not waiting until they are served")
		return
	}
	waiter, err := cfg.KubeClient.GetWaiter(kube.LegacyStrategy)
	if err == nil {
		err = waiter.Wait(infos, crdEstablished)
	}
	if err != nil {
		log.Warn().Err(err).Msg("the release's CustomResourceDefinitions are not served yet")
	}
}

// crdManifests are the documents of manifest that are
// CustomResourceDefinitions, joined as one stream; "" for none.
func crdManifests(manifest string) string {
	var crds []string
	for _, doc := range releaseutil.SplitManifests(manifest) {
		var head struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if yaml.Unmarshal([]byte(doc), &head) != nil {
			continue
		}
		if head.Kind == "CustomResourceDefinition" && strings.HasPrefix(head.APIVersion, "apiextensions.k8s.io/") {
			crds = append(crds, doc)
		}
	}
	return strings.Join(crds, "\n---\n")
}

// isNoMatch says that err is, or holds, a REST mapping's "no matches for
// kind" (a kind the mapper does not know: a CRD created since it read
// discovery).
func isNoMatch(err error) bool {
	if err == nil {
		return false
	}
	if meta.IsNoMatchError(err) {
		return true
	}
	var agg utilerrors.Aggregate
	if errors.As(err, &agg) {
		for _, e := range agg.Errors() {
			if isNoMatch(e) {
				return true
			}
		}
	}
	if u := errors.Unwrap(err); u != nil {
		return isNoMatch(u)
	}
	return false
}

// nameFree is Helm's check that an install may use release name, which it
// makes before its first write: records (a storage driver) hold no
// revision of it.
func nameFree(records driver.Driver, name string) error {
	found, err := records.Query(map[string]string{"name": name, "owner": "helm"})
	switch {
	case errors.Is(err, driver.ErrReleaseNotFound):
		return nil
	case err != nil:
		return fmt.Errorf("cannot read whether the release name %s is in use: %w", name, err)
	case len(found) > 0:
		return fmt.Errorf("cannot re-use a name that is still in use: release %s has %d revisions; its CustomResourceDefinitions were not written", name, len(found))
	}
	return nil
}
