package helmops

import (
	"fmt"

	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
)

// ChangedError says that a release was written since the read its
// operation was decided on: Helm's own read of its history at write time
// found another newest revision. Nothing was written; the next reconcile
// decides again from a new read.
type ChangedError struct {
	Namespace, Name string
	Decided, Newest int
}

func (e *ChangedError) Error() string {
	return fmt.Sprintf("release %s/%s changed since it was read: its newest revision is %d, the decision was made on %d; nothing written, decided again on the next reconcile",
		e.Namespace, e.Name, e.Newest, e.Decided)
}

// premised is the storage driver of an upgrade, uninstall or rollback that
// was decided on revision decided of release name. The first thing each of
// these Helm actions does is read the release's history (a live LIST by
// name); premised checks that read against the decision and fails the action
// before its first write when the newest revision is another: the
// decision's read (the index, or a LIST a moment earlier) was behind, and
// someone else, or another revision, now holds the release. Helm's later
// queries (its deployed revision, the history it prunes) pass through.
type premised struct {
	driver.Driver
	namespace, name string
	decided         int
	checked         bool
}

func (p *premised) Query(labels map[string]string) ([]*release.Release, error) {
	rels, err := p.Driver.Query(labels)
	if p.checked || err != nil || len(labels) != 2 || labels["name"] != p.name || labels["owner"] != "helm" {
		return rels, err
	}
	p.checked = true
	newest := 0
	for _, r := range rels {
		newest = max(newest, r.Version)
	}
	if newest != p.decided {
		return nil, &ChangedError{Namespace: p.namespace, Name: p.name, Decided: p.decided, Newest: newest}
	}
	return rels, nil
}
