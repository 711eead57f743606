package helmops

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"time"

	"helm.sh/helm/v4/pkg/release/common"
	"helm.sh/helm/v4/pkg/storage"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/autox-dev/autox/internal/format"
)

// Adoption is a release handed over from one owner to another of the same
// instance by a rename in the config: Revision is its newest revision as
// the caller read it, From the owner its labels name (format.Release.Owner:
// a long object name in its label form), To the new owner (its object by
// its whole name). Both are of the Manager's instance.
type Adoption struct {
	Namespace, Name string
	Revision        int
	From, To        format.Owner
}

// Adopt makes a release its new owner's without a new revision and
// without running hooks: it rewrites the ownership labels (spec, release
// spec, instance, object) of the release's newest record, which is where
// every reader of ownership looks and what Helm copies onto the next
// revision (Helm's release payload carries no labels; its drivers take
// them from the record). Chart, values, revision, history and the deploy
// times stay as they are, and so do the digest and revision labels: they
// describe chart and values, which an adoption does not change.
//
// It writes only what it just read: the newest revision is read again
// live, it must be a.Revision, deployed, and labelled for a.From, and the
// record is updated with the resourceVersion of that read, so a writer
// that changed it meanwhile (Helm, another autox) makes the update fail
// with a conflict rather than be overwritten. Errors name the release and
// never its content. The write goes through the Manager's clients, which
// are the leadership term's fenced ones.
func (m *Manager) Adopt(ctx context.Context, a Adoption) error {
	if err := notStarted(ctx, "adoption", a.Namespace, a.Name); err != nil {
		return err
	}
	if a.From.Instance != m.opts.Instance || a.To.Instance != m.opts.Instance {
		return fmt.Errorf("cannot adopt release %s/%s: instance %q cannot hand a release of instance %q over to instance %q",
			a.Namespace, a.Name, m.opts.Instance, a.From.Instance, a.To.Instance)
	}
	fail := func(err error) error {
		return fmt.Errorf("cannot adopt release %s/%s for spec %s, release spec %s: %w", a.Namespace, a.Name, a.To.Spec, a.To.ReleaseSpec, err)
	}
	versions, err := m.recordVersions(ctx, a.Namespace, []string{a.Name})
	if err != nil {
		return fail(err)
	}
	newest := 0
	for _, v := range versions[a.Name] {
		newest = max(newest, v)
	}
	if newest != a.Revision {
		return fail(fmt.Errorf("its newest revision is %d, not %d as read before: it changed meanwhile; nothing written", newest, a.Revision))
	}
	key := fmt.Sprintf("%s.%s.v%d", storage.HelmStorageType, a.Name, a.Revision)
	records := m.recordObjects(a.Namespace)
	labels, err := records.labels(ctx, key)
	if err != nil {
		return fail(err)
	}
	if owner := format.OwnerOfLabels(labels); owner != a.From {
		return fail(fmt.Errorf("its newest record names spec %q, release spec %q, instance %q, object %q now: it changed meanwhile; nothing written",
			owner.Spec, owner.ReleaseSpec, owner.Instance, owner.Object))
	}
	if status := labels["status"]; status != common.StatusDeployed.String() {
		return fail(fmt.Errorf("it is %s, not deployed: nothing written", status))
	}
	relabelled := maps.Clone(labels)
	for _, k := range []string{format.LabelObject, format.LabelObjectNamespace} {
		delete(relabelled, k)
	}
	maps.Copy(relabelled, format.ReleaseLabels(a.To, "", 0))
	// What Helm's driver sets on every update of a record.
	relabelled[recordModifiedAt] = strconv.FormatInt(time.Now().Unix(), 10)
	// The record index learns of this write like of Helm's (expectations):
	// the next read of the new owner's releases must find it.
	w := m.writes().expect(a.Namespace, key, expectation{release: a.Name, labels: relabelled, status: labels["status"]})
	err = records.relabel(ctx, relabelled)
	w.done(err)
	if err != nil {
		if apierrors.IsConflict(err) {
			return fail(fmt.Errorf("its record changed meanwhile; nothing written: %w", err))
		}
		return fail(fmt.Errorf("cannot update its record %s: %w", key, err))
	}
	return nil
}

// recordObjects reads and writes the storage objects of one namespace's
// release records, of the Manager's driver, whole: the record an update
// sends back is the one read, with its resourceVersion.
func (m *Manager) recordObjects(namespace string) *recordObject {
	return &recordObject{m: m, namespace: namespace}
}

// recordObject is one release record's storage object, read by labels and
// written back by relabel.
type recordObject struct {
	m         *Manager
	namespace string
	secret    *corev1.Secret
	configMap *corev1.ConfigMap
}

// labels reads the record key and returns its labels.
func (r *recordObject) labels(ctx context.Context, key string) (map[string]string, error) {
	var err error
	if r.m.opts.StorageDriver == DriverConfigMap {
		if r.configMap, err = r.m.clientset.CoreV1().ConfigMaps(r.namespace).Get(ctx, key, metav1.GetOptions{}); err != nil {
			return nil, fmt.Errorf("cannot read its record %s: %w", key, err)
		}
		return r.configMap.Labels, nil
	}
	if r.secret, err = r.m.clientset.CoreV1().Secrets(r.namespace).Get(ctx, key, metav1.GetOptions{}); err != nil {
		return nil, fmt.Errorf("cannot read its record %s: %w", key, err)
	}
	return r.secret.Labels, nil
}

// relabel writes the record read by labels back with new labels, on the
// condition that it is unchanged since (its resourceVersion).
func (r *recordObject) relabel(ctx context.Context, labels map[string]string) error {
	if r.configMap != nil {
		c := r.configMap.DeepCopy()
		c.Labels = labels
		_, err := r.m.clientset.CoreV1().ConfigMaps(r.namespace).Update(ctx, c, metav1.UpdateOptions{})
		return err
	}
	s := r.secret.DeepCopy()
	s.Labels = labels
	_, err := r.m.clientset.CoreV1().Secrets(r.namespace).Update(ctx, s, metav1.UpdateOptions{})
	return err
}
