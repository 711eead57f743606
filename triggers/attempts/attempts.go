// Package attempts keeps the failed attempts of release specs whose
// remediation bounds their retries (DESIGN §5): how many attempts in a row
// failed for one fingerprint of what a release spec installs, so that
// "retries used up" survives a restart of autox and an uninstall the
// remediation made. The records are autox's own, apart from Helm's and from
// the release format: one ConfigMap per autox instance in each release
// namespace that needs one, <instance>-remediation, with a key per release
// name. It is written only by the leader, through the leadership term's
// fenced client, and only when an attempt starts (before its first Helm
// write), or a record is put back or no longer
// needed: a quiet cluster writes nothing.
package attempts

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
)

// Entry is what is recorded for one release: whose it is, the fingerprint
// of what its last attempts installed (plan.Fingerprint), and how many of
// them failed in a row.
type Entry struct {
	Spec        string `json:"spec"`
	ReleaseSpec string `json:"releaseSpec"`
	// Object is namespace/name of a selector spec's object, "" for a named spec.
	Object      string `json:"object,omitempty"`
	Fingerprint string `json:"fingerprint"`
	Failures    int    `json:"failures"`
	// Remedied says onFailure's remedy (rollback, uninstall) was started for
	// this fingerprint: it is not run again until the fingerprint changes.
	Remedied bool `json:"remedied,omitempty"`
}

// Labels of the ConfigMap: an object of that name without them is not
// autox's, and is never written.
const (
	labelManagedBy = "app.kubernetes.io/managed-by"
	labelInstance  = "app.kubernetes.io/instance"
	managedBy      = "autox"
)

// Name is the ConfigMap of instance's records in each namespace.
func Name(instance string) string { return instance + "-remediation" }

// Store reads and writes the records of one autox instance.
type Store struct {
	// Client must be the leadership term's (fenced) client: a write of a
	// term that has ended is refused.
	Client   kubernetes.Interface
	Instance string
}

// Read returns the records of namespace by release name; none when the
// ConfigMap does not exist. Any other error is returned: nothing may then
// be decided from the records.
func (s Store) Read(ctx context.Context, namespace string) (map[string]Entry, error) {
	cm, err := s.Client.CoreV1().ConfigMaps(namespace).Get(ctx, Name(s.Instance), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return map[string]Entry{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cannot read the remediation records (ConfigMap %s/%s): %w", namespace, Name(s.Instance), err)
	}
	if err := s.own(cm); err != nil {
		return nil, err
	}
	out := make(map[string]Entry, len(cm.Data))
	for release, text := range cm.Data {
		var e Entry
		if err := json.Unmarshal([]byte(text), &e); err != nil {
			return nil, fmt.Errorf("the remediation record of release %s in ConfigMap %s/%s cannot be read (%v); delete that key to start its attempts afresh",
				release, namespace, Name(s.Instance), err)
		}
		out[release] = e
	}
	return out, nil
}

// Record sets the record of release in namespace, creating the ConfigMap
// when needed.
func (s Store) Record(ctx context.Context, namespace, release string, e Entry) error {
	text, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("cannot encode the remediation record of release %s/%s: %w", namespace, release, err)
	}
	return s.change(ctx, namespace, func(data map[string]string) bool {
		if data[release] == string(text) {
			return false
		}
		data[release] = string(text)
		return true
	}, true)
}

// Forget removes the record of release in namespace; none is no error.
func (s Store) Forget(ctx context.Context, namespace, release string) error {
	return s.change(ctx, namespace, func(data map[string]string) bool {
		if _, ok := data[release]; !ok {
			return false
		}
		delete(data, release)
		return true
	}, false)
}

// change applies edit to the ConfigMap's data and writes it when edit
// reports a change, again on a conflict (another release's record written
// meanwhile). create says a missing ConfigMap is created.
func (s Store) change(ctx context.Context, namespace string, edit func(map[string]string) bool, create bool) error {
	cms := s.Client.CoreV1().ConfigMaps(namespace)
	name := Name(s.Instance)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cm, err := cms.Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			if !create {
				return nil
			}
			cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace,
				Labels: map[string]string{labelManagedBy: managedBy, labelInstance: s.Instance}}, Data: map[string]string{}}
			edit(cm.Data)
			_, err = cms.Create(ctx, cm, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				return apierrors.NewConflict(corev1.Resource("configmaps"), name, err) // created meanwhile: again
			}
			return err
		case err != nil:
			return err
		}
		if err := s.own(cm); err != nil {
			return err
		}
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		if !edit(cm.Data) {
			return nil
		}
		if len(cm.Data) == 0 {
			// The last record went: so does the ConfigMap, unless written meanwhile.
			rv := cm.ResourceVersion
			err = cms.Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &rv}})
			if apierrors.IsNotFound(err) {
				return nil
			}
			return err
		}
		_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("cannot write the remediation records (ConfigMap %s/%s): %w", namespace, name, err)
	}
	return nil
}

// own refuses a ConfigMap of that name that autox did not make.
func (s Store) own(cm *corev1.ConfigMap) error {
	if cm.Labels[labelManagedBy] != managedBy || cm.Labels[labelInstance] != s.Instance {
		return fmt.Errorf("ConfigMap %s/%s is not the remediation records of autox instance %s (labels %s=%s and %s=%s missing); autox does not touch it: rename or remove it",
			cm.Namespace, cm.Name, s.Instance, labelManagedBy, managedBy, labelInstance, s.Instance)
	}
	return nil
}
