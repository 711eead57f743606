package triggers

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/metadata"

	"github.com/autox-dev/autox/config"
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
}

// Observation is what a live read found: whether the object exists and its labels.
type Observation struct {
	Found  bool
	Labels map[string]string
	// Ref points at the object for Kubernetes Events; nil when unknown.
	Ref *corev1.ObjectReference
}

// Get reads one trigger. NotFound of the object itself is Found=false; every
// other failure, including a 404 because the resource is not served at all, is
// an error, because only a confirmed absence may lead to an uninstall.
func (r TriggerReader) Get(ctx context.Context, t config.Trigger) (Observation, error) {
	obj, err := r.Client.Resource(GVR(t)).Namespace(t.Namespace).Get(ctx, t.Name, metav1.GetOptions{})
	if err == nil {
		return Observation{Found: true, Labels: obj.Labels, Ref: r.reference(t, obj.UID)}, nil
	}
	if objectNotFound(err, t.Name) {
		return Observation{}, nil
	}
	return Observation{}, fmt.Errorf("cannot read trigger %s: %w", Describe(t), err)
}

func (r TriggerReader) reference(t config.Trigger, uid types.UID) *corev1.ObjectReference {
	if r.Mapper == nil {
		return nil
	}
	gvk, err := r.Mapper.KindFor(GVR(t))
	if err != nil {
		return nil
	}
	return &corev1.ObjectReference{Kind: gvk.Kind, APIVersion: gvk.GroupVersion().String(), Name: t.Name, Namespace: t.Namespace, UID: uid}
}

// objectNotFound tells "this object does not exist" from "this URL does not
// exist": the API server names the object in the details of the first only.
func objectNotFound(err error, name string) bool {
	var status apierrors.APIStatus
	if !apierrors.IsNotFound(err) || !errors.As(err, &status) {
		return false
	}
	d := status.Status().Details
	return d != nil && d.Name == name
}

// Evaluate turns an observation into a trigger state and its reason.
func Evaluate(t config.Trigger, obs Observation) (TriggerState, string) {
	if !obs.Found {
		return TriggerAbsent, "trigger not found"
	}
	var missing []string
	for _, l := range t.Labels {
		if obs.Labels[l] == "" {
			missing = append(missing, l)
		}
	}
	if len(missing) > 0 {
		return TriggerUnlabelled, "label " + strings.Join(missing, ", ") + " missing"
	}
	return TriggerWanted, "trigger labelled"
}

// Describe names a trigger for logs and errors, kubectl style.
func Describe(t config.Trigger) string {
	res := t.Resource
	if t.Group != "" {
		res += "." + t.Group
	}
	return fmt.Sprintf("%s/%s in namespace %s (%s)", res, t.Name, t.Namespace, t.Version)
}

// InjectedValues returns the `autox` values key for a wanted trigger: its
// identity and the values of its trigger labels only.
func InjectedValues(t config.Trigger, labels map[string]string) map[string]interface{} {
	l := make(map[string]interface{}, len(t.Labels))
	for _, k := range t.Labels {
		l[k] = labels[k]
	}
	return map[string]interface{}{
		"trigger": map[string]interface{}{
			"group": t.Group, "version": t.Version, "resource": t.Resource,
			"name": t.Name, "namespace": t.Namespace, "labels": l,
		},
	}
}

// DesiredValues is the spec's values plus the injected `autox` key. The user's
// map is copied, never modified, because the config is shared.
func DesiredValues(rs *config.ReleaseSpec, t config.Trigger, labels map[string]string) map[string]interface{} {
	out := make(map[string]interface{}, len(rs.Values)+1)
	for k, v := range rs.Values {
		out[k] = v
	}
	out[config.InjectedValuesKey] = InjectedValues(t, labels)
	return out
}
