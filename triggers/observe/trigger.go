package observe

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/metadata"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/internal/apistatus"
	"github.com/autox-dev/autox/internal/pages"
	"github.com/autox-dev/autox/triggers/plan"
)

// GVR returns the group/version/resource a trigger names.
func GVR(t config.Trigger) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: t.Group, Version: t.Version, Resource: t.Resource}
}

// TriggerReader reads trigger objects live from the API server. It reads
// metadata only: labels are all autox needs, and any resource, built-in or
// custom, serves metadata.
type TriggerReader struct {
	Client metadata.Interface
	// Mapper, if set, names the object's kind so that Events can be attached to it.
	Mapper meta.RESTMapper
	// PageSize is the page size of List (0: one response; --list-page-size).
	PageSize int64
}

// Get reads one trigger: the decision's view of the object, and a reference
// to it for Kubernetes Events (nil when unknown). The API server's NotFound
// naming the object (apistatus.NotFound) is Found=false; every other
// failure, including a 404 because the resource is not served at all and a
// 404 that a proxy or gateway answered, is an error, because only a
// confirmed absence may lead to an uninstall.
func (r TriggerReader) Get(ctx context.Context, t config.Trigger) (plan.TriggerRead, *corev1.ObjectReference, error) {
	obj, err := r.Client.Resource(GVR(t)).Namespace(t.Namespace).Get(ctx, t.Name, metav1.GetOptions{})
	if err == nil {
		return plan.TriggerRead{Found: true, Labels: obj.Labels, Version: obj.ResourceVersion, UID: string(obj.UID)}, r.Reference(t, string(obj.UID)), nil
	}
	if apistatus.NotFound(err, t.Name) {
		return plan.TriggerRead{}, nil, nil
	}
	return plan.TriggerRead{}, nil, fmt.Errorf("cannot read trigger %s: %w", Describe(t), err)
}

// Reference names a trigger object of that uid for Kubernetes Events (nil
// when its kind is unknown).
func (r TriggerReader) Reference(t config.Trigger, uid string) *corev1.ObjectReference {
	if r.Mapper == nil {
		return nil
	}
	gvk, err := r.Mapper.KindFor(GVR(t))
	if err != nil {
		return nil
	}
	return &corev1.ObjectReference{Kind: gvk.Kind, APIVersion: gvk.GroupVersion().String(), Name: t.Name, Namespace: t.Namespace, UID: types.UID(uid)}
}

// Describe names a trigger for logs and errors, kubectl style.
func Describe(t config.Trigger) string {
	if t.Name == "" && t.IsSelector() {
		return fmt.Sprintf("%s selected by %s (%s)", resourceName(t), metav1.FormatLabelSelector(t.Selector), t.Version)
	}
	return fmt.Sprintf("%s/%s in namespace %s (%s)", resourceName(t), t.Name, t.Namespace, t.Version)
}

func resourceName(t config.Trigger) string {
	if t.Group != "" {
		return t.Resource + "." + t.Group
	}
	return t.Resource
}

// List reads every trigger object of one (resource, namespace, selector)
// live, in one request (or PageSize per page, one consistent list: the
// pages share the first one's resourceVersion). It asks for no
// resourceVersion, so the API server answers as of now (a quorum read),
// never from a watch cache that may lag: what a periodic pass hands
// each spec instead of a GET per trigger.
func (r TriggerReader) List(ctx context.Context, k ListKey) (map[string]plan.TriggerRead, error) {
	items, err := pages.Metadata(ctx, r.Client.Resource(k.GVR).Namespace(k.Namespace), metav1.ListOptions{LabelSelector: k.Selector}, r.PageSize)
	if err != nil {
		if k.Selector != "" {
			return nil, fmt.Errorf("cannot list %s in namespace %s with selector %s: %w", k.GVR.String(), k.Namespace, k.Selector, err)
		}
		return nil, fmt.Errorf("cannot list %s in namespace %s: %w", k.GVR.String(), k.Namespace, err)
	}
	objs := make(map[string]plan.TriggerRead, len(items))
	for _, item := range items {
		objs[item.Name] = plan.TriggerRead{Found: true, Labels: item.Labels, Version: item.ResourceVersion, UID: string(item.UID)}
	}
	return objs, nil
}

// ListKey is one (resource, namespace, label selector) watched and
// listed; several triggers share it. Selector is "" for named triggers:
// their informer sees every object of the namespace. Name is set for a
// values source only: its informer watches that one object.
type ListKey struct {
	GVR       schema.GroupVersionResource
	Namespace string
	Selector  string
	Name      string
}

// KeyFor is the one place that says which (resource, namespace) a named
// trigger is in.
func KeyFor(t config.Trigger) ListKey {
	return ListKey{GVR: GVR(t), Namespace: t.Namespace}
}

// KeysFor are the (resource, namespace, selector) a trigger's objects are
// listed and watched by: the named trigger's one, or one per namespace a
// selector trigger covers. A selector that cannot be formatted (validation
// rules that out) gets none: listing without it would select everything.
func KeysFor(cfg *config.Config, t config.Trigger) []ListKey {
	if !t.IsSelector() {
		return []ListKey{KeyFor(t)}
	}
	sel, err := metav1.LabelSelectorAsSelector(t.Selector)
	if err != nil || sel.Empty() {
		return nil
	}
	var out []ListKey
	for _, ns := range cfg.TriggerNamespaces(t) {
		out = append(out, ListKey{GVR: GVR(t), Namespace: ns, Selector: sel.String()})
	}
	return out
}
