package helmops

import (
	"bytes"
	"fmt"
	"time"

	"helm.sh/helm/v4/pkg/action"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/kube"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/cli-runtime/pkg/resource"
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
			writesOf(cfg).note() // a CRD written is a write of the operation (nowrite.go)
			_, err := helper.Create(info.Namespace, true, info.Object)
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
