// Package attempts keeps the failed attempts of release specs whose
// remediation bounds their retries (DESIGN §5): how many attempts in a row
// failed for one fingerprint of what a release spec installs, and whether
// onFailure's remedy ran for it, so that "retries used up" survives a
// restart of autox and an uninstall the remediation made. The records are
// autox's own, apart from Helm's and from the release format: one ConfigMap
// per autox instance in autox's own namespace (the leader election
// namespace, where autox may write even when it may write nothing of a
// release's, as in the multi-team overlay), <instance>-remediation, with a
// key <namespace>.<release> per release. Versions before kept one such
// ConfigMap in each release namespace, keyed by release name: those are
// still read (a record in autox's namespace wins), and a key there is
// removed when its release's record is forgotten, so an upgrade forgets no
// attempt. It is written only by the leader, through the leadership term's
// fenced client, and only when an attempt starts (before its first Helm
// write), or a record is put back or no longer needed: a quiet cluster
// writes nothing. Writes of one process go one at a time; a conflict with
// another writer reads the ConfigMap again and merges (never losing
// another release's key).
package attempts

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

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

// Name is the ConfigMap of instance's records.
func Name(instance string) string { return instance + "-remediation" }

// Key is the key of release name in namespace: a namespace name holds no
// dot, so the first one splits them.
func Key(namespace, release string) string { return namespace + "." + release }

// Store reads and writes the records of one autox instance.
type Store struct {
	// Client must be the leadership term's (fenced) client: a write of a
	// term that has ended is refused.
	Client   kubernetes.Interface
	Instance string
	// Home is autox's own namespace, which holds the records.
	Home string
}

// writes serializes the writes of the process: workers record attempts of
// releases in many namespaces in the one ConfigMap.
var writes sync.Mutex

// Read returns the records of the releases of namespace by release name;
// none when there are none. Any other error is returned: nothing may then
// be decided from the records. The records an older version kept in
// namespace itself are read too, when autox may read them (a namespace it
// may not read holds none it wrote).
func (s Store) Read(ctx context.Context, namespace string) (map[string]Entry, error) {
	out := map[string]Entry{}
	legacy, err := s.get(ctx, namespace, true)
	if err != nil {
		return nil, err
	}
	if err := decode(legacy, func(release string) (string, bool) { return release, true }, out); err != nil {
		return nil, err
	}
	home, err := s.get(ctx, s.Home, false)
	if err != nil {
		return nil, err
	}
	prefix := namespace + "."
	err = decode(home, func(key string) (string, bool) {
		return strings.TrimPrefix(key, prefix), strings.HasPrefix(key, prefix)
	}, out)
	return out, err
}

// get reads the ConfigMap of the records in namespace, nil when there is
// none; legacy takes a refusal to read it for none.
func (s Store) get(ctx context.Context, namespace string, legacy bool) (*corev1.ConfigMap, error) {
	cm, err := s.Client.CoreV1().ConfigMaps(namespace).Get(ctx, Name(s.Instance), metav1.GetOptions{})
	if apierrors.IsNotFound(err) || (legacy && apierrors.IsForbidden(err)) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cannot read the remediation records (ConfigMap %s/%s): %w", namespace, Name(s.Instance), err)
	}
	if err := s.own(cm); err != nil {
		return nil, err
	}
	return cm, nil
}

// decode adds the records of cm to out, by the release name release gives
// for each key it takes.
func decode(cm *corev1.ConfigMap, release func(key string) (string, bool), out map[string]Entry) error {
	if cm == nil {
		return nil
	}
	for key, text := range cm.Data {
		name, ok := release(key)
		if !ok {
			continue
		}
		var e Entry
		if err := json.Unmarshal([]byte(text), &e); err != nil {
			return fmt.Errorf("the remediation record %s in ConfigMap %s/%s cannot be read (%v); delete that key to start its attempts afresh",
				key, cm.Namespace, cm.Name, err)
		}
		out[name] = e
	}
	return nil
}

// Record sets the record of release in namespace, creating the ConfigMap
// when needed.
func (s Store) Record(ctx context.Context, namespace, release string, e Entry) error {
	text, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("cannot encode the remediation record of release %s/%s: %w", namespace, release, err)
	}
	key := Key(namespace, release)
	return s.change(ctx, s.Home, func(data map[string]string) bool {
		if data[key] == string(text) {
			return false
		}
		data[key] = string(text)
		return true
	}, true)
}

// Forget removes the record of release in namespace, and the one an older
// version kept in namespace; none is no error.
func (s Store) Forget(ctx context.Context, namespace, release string) error {
	key := Key(namespace, release)
	err := s.change(ctx, s.Home, func(data map[string]string) bool {
		if _, ok := data[key]; !ok {
			return false
		}
		delete(data, key)
		return true
	}, false)
	if err != nil {
		return err
	}
	legacy, err := s.get(ctx, namespace, true)
	if err != nil || legacy == nil {
		return err
	}
	if _, ok := legacy.Data[release]; !ok {
		return nil
	}
	return s.change(ctx, namespace, func(data map[string]string) bool {
		if _, ok := data[release]; !ok {
			return false
		}
		delete(data, release)
		return true
	}, false)
}

// change applies edit to the data of the ConfigMap in namespace and writes
// it when edit reports a change, again on a conflict (another writer wrote
// meanwhile: its keys are kept). create says a missing ConfigMap is
// created. The ConfigMap in autox's namespace stays when its last key goes
// (autox may update it, not necessarily delete it); an older version's in a
// release namespace goes with its last key.
func (s Store) change(ctx context.Context, namespace string, edit func(map[string]string) bool, create bool) error {
	writes.Lock()
	defer writes.Unlock()
	cms := s.Client.CoreV1().ConfigMaps(namespace)
	name := Name(s.Instance)
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
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
		if len(cm.Data) == 0 && namespace != s.Home {
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
