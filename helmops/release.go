package helmops

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"time"

	"helm.sh/helm/v4/pkg/release/common"
	release "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"

	"github.com/autox-dev/autox/internal/format"
)

// Storage driver labels on every release record (Helm's pkg/storage/driver).
const (
	recordCreatedAt  = "createdAt"  // unix seconds, set by the driver's Create
	recordModifiedAt = "modifiedAt" // unix seconds, set by the driver's Update
)

// recordWritten returns when a release record was last written according to
// the driver's labels: the later of modifiedAt and createdAt, not modifiedAt
// first, because Helm's upgrade copies the previous record's labels,
// modifiedAt included, into the record it creates, so a pending-upgrade
// record carries an older modifiedAt than its own createdAt. Zero when
// neither label holds a time.
func recordWritten(labels map[string]string) time.Time {
	var latest int64
	for _, k := range []string{recordModifiedAt, recordCreatedAt} {
		if s, err := strconv.ParseInt(labels[k], 10, 64); err == nil && s > latest {
			latest = s
		}
	}
	if latest == 0 {
		return time.Time{}
	}
	return time.Unix(latest, 0)
}

// summarise turns the revisions of one release name into a Release. The
// revisions' Labels must be the record labels, system labels included, as
// the drivers' Query and List return them.
func summarise(revs []*release.Release) *format.Release {
	sort.Slice(revs, func(i, j int) bool { return revs[i].Version < revs[j].Version })
	last := revs[len(revs)-1]
	r := &format.Release{Record: format.RecordOf(last.Name, last.Namespace, last.Version, last.Labels), Values: last.Config}
	r.Modified = recordWritten(last.Labels)
	if last.Info != nil {
		r.Status = last.Info.Status
		r.Updated = last.Info.LastDeployed
		r.FirstDeployed = last.Info.FirstDeployed
	}
	if last.Chart != nil && last.Chart.Metadata != nil {
		r.ChartName = last.Chart.Metadata.Name
		r.ChartVersion = last.Chart.Metadata.Version
	}
	var deployed *release.Release
	for _, rev := range revs {
		if rev.Info == nil {
			continue
		}
		if rev.Info.Status == common.StatusDeployed || rev.Info.Status == common.StatusSuperseded {
			deployed = rev
			r.LastDeployedRevision = rev.Version
			if rev != last {
				r.DeployedBefore = true
			}
		}
	}
	if deployed != nil && deployed != last {
		r.DeployedValues = deployed.Config
	}
	return r
}

// releases returns one format.Release per name of groups (every revision of a name
// that is to be judged), sorted by name, keeping those keep accepts.
func (m *Manager) releases(ctx context.Context, namespace string, groups map[string][]*release.Release, keep func(*format.Release) bool) []*format.Release {
	out := make([]*format.Release, 0, len(groups))
	for _, revs := range groups {
		r := summarise(revs)
		r.Namespace = namespace // where the record is, whatever the payload says
		if !keep(r) {
			continue
		}
		r.Modified = m.modified(ctx, r)
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// ageMatters reports whether callers judge a release of that status by its
// age (the unlock of DESIGN §5), which is when Modified must be right.
func ageMatters(s common.Status) bool {
	return s.IsPending() || s == common.StatusUninstalling
}

// modified returns when r's latest record was last written. The driver's
// labels (summarise) are right for a pending record just created, but not
// after an update: Helm's driver sets modifiedAt and then copies the labels of
// the release it was handed over it, and Helm hands it a release read back
// with the previous labels, so an uninstalling record keeps the modifiedAt of
// an older write. So for a release whose age matters, and for one without
// the labels, one metadata GET of the record adds what the API server
// recorded: its creationTimestamp and the times of its managedFields, which
// move on every write. The latest of all is taken; a GET that fails leaves
// the age unknown (zero), never the possibly stale labels.
func (m *Manager) modified(ctx context.Context, r *format.Release) time.Time {
	if !r.Modified.IsZero() && !ageMatters(r.Status) {
		return r.Modified
	}
	written, err := m.recordWrittenByServer(ctx, r.Namespace, r.Name, r.Revision)
	if err != nil {
		m.opts.Log.Warn().Err(err).Str("release", r.Name).Str("namespace", r.Namespace).Int("revision", r.Revision).
			Msg("cannot read when the release record was written; its age is unknown")
		return time.Time{}
	}
	if written.After(r.Modified) {
		return written
	}
	return r.Modified
}

// recordWrittenByServer returns the latest time the API server recorded for
// a write of one release record.
func (m *Manager) recordWrittenByServer(ctx context.Context, namespace, name string, revision int) (time.Time, error) {
	key := fmt.Sprintf("%s.%s.v%d", storage.HelmStorageType, name, revision)
	obj, err := m.meta.Resource(recordResource(m.opts.StorageDriver)).Namespace(namespace).Get(ctx, key, metav1.GetOptions{})
	if err != nil {
		return time.Time{}, fmt.Errorf("cannot read release record %s: %w", key, err)
	}
	return lastWrite(obj.ObjectMeta), nil
}

// lastWrite is the latest of an object's creationTimestamp and the times of
// its managedFields entries.
func lastWrite(meta metav1.ObjectMeta) time.Time {
	latest := meta.CreationTimestamp.Time
	for _, f := range meta.ManagedFields {
		if f.Time != nil && f.Time.After(latest) {
			latest = f.Time.Time
		}
	}
	return latest
}

// recordVersions returns the revisions of every Helm record of the named
// releases in namespace, read from record metadata in one LIST: all of them,
// whatever their labels, so that the newest revision of a release is known
// even when it carries none of autox's labels.
func (m *Manager) recordVersions(ctx context.Context, namespace string, names []string) (map[string][]int, error) {
	named, err := labels.NewRequirement("name", selection.In, names)
	if err != nil {
		return nil, fmt.Errorf("cannot select the records of releases %v: %w", names, err)
	}
	owner, err := labels.NewRequirement("owner", selection.Equals, []string{"helm"})
	if err != nil {
		return nil, err
	}
	list, err := m.meta.Resource(recordResource(m.opts.StorageDriver)).Namespace(namespace).List(ctx, metav1.ListOptions{
		LabelSelector: labels.NewSelector().Add(*owner, *named).String(),
	})
	if err != nil {
		return nil, fmt.Errorf("cannot list release records: %w", err)
	}
	out := map[string][]int{}
	for _, item := range list.Items {
		if v, err := strconv.Atoi(item.Labels["version"]); err == nil {
			out[item.Labels["name"]] = append(out[item.Labels["name"]], v)
		}
	}
	return out, nil
}

// newestOnly keeps, of recs (records found by a label of autox's), the
// releases whose newest revision among all their records is in recs, so
// that a release someone upgraded without autox's labels (or with another
// spec's) is judged on that newest revision and is not this group's: its
// older, labelled revisions are history, not ownership. A kept release whose
// history holds revisions outside recs (a revision written without the
// labels, then labelled again) is read whole, so that what summarise says of
// its earlier revisions is true. A release whose newest revision is in recs
// but did not decode is not kept: it is returned, by name, among the
// undecodable (judgeNewest). Costs one metadata LIST, plus one LIST per
// release read whole.
func (m *Manager) newestOnly(ctx context.Context, namespace string, recs records) (map[string][]*release.Release, map[string]undecoded, error) {
	names := recs.names()
	if len(names) == 0 {
		return nil, nil, nil
	}
	versions, err := m.recordVersions(ctx, namespace, names)
	if err != nil {
		return nil, nil, err
	}
	out := make(map[string][]*release.Release, len(names))
	broken := map[string]undecoded{}
	for _, name := range names {
		verdict, u := judgeNewest(versions[name], recs.decoded[name], recs.undecoded[name])
		switch verdict {
		case releaseUndecodable:
			broken[name] = *u
		case releaseComplete:
			out[name] = recs.decoded[name]
		case releasePartial:
			whole, err := m.listRecords(ctx, namespace, map[string]string{"name": name})
			if err != nil {
				return nil, nil, err
			}
			switch verdict, u := judgeNewest(whole.revisions(name), whole.decoded[name], whole.undecoded[name]); verdict {
			case releaseUndecodable:
				broken[name] = *u
			case releaseComplete:
				out[name] = whole.decoded[name]
			}
		}
	}
	return out, broken, nil
}
