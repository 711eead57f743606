package helmops

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"helm.sh/helm/v4/pkg/release/common"
	release "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/autox-dev/autox/internal/format"
)

// recordKeyPrefix starts the object name of every Helm release record.
const recordKeyPrefix = storage.HelmStorageType + "."

// recordKey is the object name of one revision's record, as Helm's storage names it.
func recordKey(name string, revision int) string {
	return fmt.Sprintf("%s%s.v%d", recordKeyPrefix, name, revision)
}

// errStale says that the index's view of a release is not the API
// server's: the record it names is gone, or was written since.
var errStale = errors.New("the release record index is behind the API server for this release")

// indexedSpecReleases is specReleases through the index: the releases of
// namespace whose newest revision matches (label equality) and is this
// instance's, each read by name. A release of the instance whose newest
// record does not decode is left out and handed to undecodable.
func (m *Manager) indexedSpecReleases(ctx context.Context, ri *recordInformer, namespace string, match map[string]string,
	undecodable func(name string, err *UndecodableError)) ([]*format.Release, error) {
	names := map[string]bool{}
	for _, n := range ri.namesWith(match) {
		names[n] = true
	}
	// Releases this process has just written and the index does not show yet.
	own, _ := m.index.Load().expect.pending(namespace, func(l map[string]string) bool { return labelsMatch(l, match) })
	for n := range own {
		names[n] = true
	}
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Strings(sorted)
	var out []*format.Release
	for _, name := range sorted {
		r, labels, err := m.indexedRelease(ctx, ri, namespace, name, func(l map[string]string) bool {
			return labelsMatch(l, match) && format.InstanceOf(l) == m.opts.Instance
		})
		var u *UndecodableError
		if errors.As(err, &u) {
			if labelsMatch(labels, match) && (undecoded{labels: labels}).owned(m.opts.Instance) {
				undecodable(name, u)
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		if r != nil && labelsMatch(labels, match) && m.owned(r) {
			out = append(out, r)
		}
	}
	return out, nil
}

// labelsMatch reports whether labels hold every pair of match.
func labelsMatch(labels, match map[string]string) bool {
	for k, v := range match {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// indexedRelease reads release name of namespace: its revisions from the
// index, its newest record by name, live. nil when it has no record, or
// when want (nil: any) refuses the labels of its newest revision (the
// record is then not read at all). The labels returned are the newest
// record's.
//
// The release is read with a live LIST of its records instead (liveRelease)
// when the index is behind for it: a write of this process the index does
// not show yet, a newest record that is gone, or whose resourceVersion is
// not the index's. A newest record that cannot be decoded is an error for
// the release, never a reason to judge it by an older revision.
func (m *Manager) indexedRelease(ctx context.Context, ri *recordInformer, namespace, name string, want func(map[string]string) bool) (*format.Release, map[string]string, error) {
	if !m.index.Load().expect.settled(ctx, namespace, name) {
		return m.liveRelease(ctx, namespace, name)
	}
	recs := ri.records(name)
	if len(recs) == 0 {
		return nil, nil, nil
	}
	newest := recs[len(recs)-1]
	if want != nil && !want(newest.labels) {
		return nil, nil, nil
	}
	top, meta, err := m.getRecord(ctx, namespace, name, newest)
	if errors.Is(err, errStale) {
		return m.liveRelease(ctx, namespace, name)
	}
	if err != nil {
		return nil, newest.labels, err
	}
	// Older revisions as the index labels them: their status tells whether
	// one was deployed; the values of the last deployed one are read when
	// the newest is not it (a rollback or the next upgrade may quote them).
	revs := make([]*release.Release, 0, len(recs))
	lastDeployed := -1
	for i, r := range recs[:len(recs)-1] {
		st := common.Status(r.labels["status"])
		if st == common.StatusDeployed || st == common.StatusSuperseded {
			lastDeployed = i
		}
		revs = append(revs, &release.Release{Name: name, Version: r.revision, Info: &release.Info{Status: st}, Labels: r.labels})
	}
	if lastDeployed >= 0 && (top.Info == nil || (top.Info.Status != common.StatusDeployed && top.Info.Status != common.StatusSuperseded)) {
		dep, _, err := m.getRecord(ctx, namespace, name, recs[lastDeployed])
		if errors.Is(err, errStale) {
			return m.liveRelease(ctx, namespace, name)
		}
		if err != nil {
			return nil, nil, err
		}
		revs[lastDeployed] = dep
	}
	revs = append(revs, top)
	r := summarise(revs)
	r.Namespace = namespace
	r.Modified = modifiedOf(r, top.Labels, meta)
	return r, top.Labels, nil
}

// liveRelease reads every record of release name with a live LIST: what
// indexedRelease falls back to. A newest record that does not decode is an
// *UndecodableError (with that record's labels).
func (m *Manager) liveRelease(ctx context.Context, namespace, name string) (*format.Release, map[string]string, error) {
	recs, err := m.listRecords(ctx, namespace, map[string]string{"name": name})
	if err != nil {
		return nil, nil, err
	}
	switch verdict, u := judgeNewest(recs.revisions(name), recs.decoded[name], recs.undecoded[name]); verdict {
	case releaseGone:
		return nil, nil, nil
	case releaseUndecodable:
		return nil, u.labels, u.error(namespace, name)
	}
	var labels map[string]string
	newest := 0
	for _, r := range recs.decoded[name] {
		if r.Version > newest {
			newest, labels = r.Version, r.Labels
		}
	}
	rels := m.releases(ctx, namespace, map[string][]*release.Release{name: recs.decoded[name]}, func(*format.Release) bool { return true })
	if len(rels) == 0 {
		return nil, nil, nil
	}
	return rels[0], labels, nil
}

// modifiedOf is Manager.modified for a record read whole: the driver's
// labels, and for a release whose age matters (or without them) the
// latest write the API server recorded, as a metadata GET would give it.
func modifiedOf(r *format.Release, labels map[string]string, meta metav1.ObjectMeta) time.Time {
	byLabels := recordWritten(labels)
	if !byLabels.IsZero() && !ageMatters(r.Status) {
		return byLabels
	}
	if server := lastWrite(meta); server.After(byLabels) {
		return server
	}
	return byLabels
}

// getRecord reads one record by name and decodes it. errStale when it is
// gone (the API server says so of this record) or was written since the
// index saw it.
func (m *Manager) getRecord(ctx context.Context, namespace, name string, rec indexedRecord) (*release.Release, metav1.ObjectMeta, error) {
	meta, data, kind, err := fetchRecord(ctx, m.clientset, m.opts.StorageDriver, namespace, rec.key)
	if err != nil {
		if recordNotFound(err, rec.key) {
			return nil, meta, errStale
		}
		return nil, meta, fmt.Errorf("cannot read release record %s: %w", rec.key, err)
	}
	if meta.ResourceVersion != rec.resourceVersion {
		return nil, meta, errStale
	}
	rls, err := decodeRecord(data)
	if err != nil {
		return nil, meta, &UndecodableError{Namespace: namespace, Name: name, Kind: kind, Record: rec.key, Revision: rec.revision, Cause: err}
	}
	rls.Labels = meta.Labels
	return rls, meta, nil
}

// fetchRecord GETs the record named key of namespace from storageDriver's
// resource: its metadata, its release data (undecoded) and the kind it is
// stored as.
func fetchRecord(ctx context.Context, cs kubernetes.Interface, storageDriver, namespace, key string) (metav1.ObjectMeta, string, string, error) {
	if storageDriver == DriverConfigMap {
		cm, err := cs.CoreV1().ConfigMaps(namespace).Get(ctx, key, metav1.GetOptions{})
		if err != nil {
			return metav1.ObjectMeta{}, "", "ConfigMap", err
		}
		return cm.ObjectMeta, cm.Data["release"], "ConfigMap", nil
	}
	s, err := cs.CoreV1().Secrets(namespace).Get(ctx, key, metav1.GetOptions{})
	if err != nil {
		return metav1.ObjectMeta{}, "", "Secret", err
	}
	return s.ObjectMeta, string(s.Data["release"]), "Secret", nil
}

// recordNotFound tells "this record does not exist" from any other 404: the
// API server names the object in the details of its NotFound status.
func recordNotFound(err error, key string) bool {
	var status apierrors.APIStatus
	if !apierrors.IsNotFound(err) || !errors.As(err, &status) {
		return false
	}
	d := status.Status().Details
	return d != nil && d.Name == key
}
