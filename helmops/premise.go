package helmops

import (
	"errors"
	"fmt"

	helmrelease "helm.sh/helm/v4/pkg/release"
	"helm.sh/helm/v4/pkg/release/common"
	release "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage/driver"
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
// someone else, or another revision, now holds the release.
//
// Until the action's first write, Helm reads the same history again (an
// upgrade's pruning to --max-history inside its first Create, a rollback's
// search for the revision to go back to, and the deployed revisions among
// them): those are answered from the checked read, which nothing of this
// action has changed yet, instead of another LIST that makes the API server
// scan every record of the namespace. A write by someone else meanwhile
// still fails the action's first write (its record exists) or is found by
// the next reconcile. Queries after the first write go to the API server.
type premised struct {
	driver.Driver
	namespace, name string
	decided         int
	checked         bool
	// history is the checked read; written tells that the action has
	// written since.
	history []*release.Release
	written bool
	// refused is the error of a re-check that failed: every later write
	// of the action fails with it.
	refused error
}

func (p *premised) Query(labels map[string]string) ([]helmrelease.Releaser, error) {
	if p.checked && !p.written && p.history != nil {
		if rels, ok := p.fromHistory(labels); ok {
			if rels == nil {
				return nil, driver.ErrReleaseNotFound
			}
			return releasers(rels), nil
		}
	}
	found, err := p.Driver.Query(labels)
	if p.checked || err != nil || !p.isHistory(labels) {
		return found, err
	}
	rels, err := asV1List(found)
	if err != nil {
		return nil, fmt.Errorf("query: %w", err)
	}
	p.checked = true
	newest := 0
	for _, r := range rels {
		newest = max(newest, r.Version)
	}
	if newest != p.decided {
		return nil, &ChangedError{Namespace: p.namespace, Name: p.name, Decided: p.decided, Newest: newest}
	}
	p.history = rels
	return releasers(rels), nil
}

// isHistory tells Helm's read of the whole history of the release.
func (p *premised) isHistory(labels map[string]string) bool {
	return len(labels) == 2 && labels["name"] == p.name && labels["owner"] == "helm"
}

// fromHistory answers Helm's history read, or its read of the deployed
// revisions, from the checked read; ok is false for any other query. An
// answer with no release is nil, ok (the driver's ErrReleaseNotFound).
func (p *premised) fromHistory(labels map[string]string) (rels []*release.Release, ok bool) {
	switch {
	case p.isHistory(labels):
		rels = append([]*release.Release(nil), p.history...)
	case len(labels) == 3 && labels["name"] == p.name && labels["owner"] == "helm" && labels["status"] == common.StatusDeployed.String():
		for _, r := range p.history {
			if r.Info != nil && r.Info.Status == common.StatusDeployed {
				rels = append(rels, r)
			}
		}
	default:
		return nil, false
	}
	if len(rels) == 0 {
		return nil, true
	}
	return rels, true
}

func (p *premised) Create(key string, rls helmrelease.Releaser) error {
	p.written = true
	return p.Driver.Create(key, rls)
}

func (p *premised) Update(key string, rls helmrelease.Releaser) error {
	p.written = true
	return p.Driver.Update(key, rls)
}

// Delete before any other write of the action is an upgrade's (or a
// rollback's) pruning to --max-history, inside Helm's Storage.Create before
// the new revision's record is created: a write by someone else since the
// checked read would only fail that Create, after the oldest revisions are
// gone. So it is checked first that the revision after the decided one has
// no record yet (a GET by name, not another LIST of the history); what is
// left unchecked is the moment between that read and the delete (Helm's
// storage deletes without a resourceVersion precondition).
func (p *premised) Delete(key string) (helmrelease.Releaser, error) {
	if p.refused != nil {
		return nil, p.refused
	}
	if !p.written {
		if err := p.recheck(); err != nil {
			p.refused = err
			return nil, err
		}
	}
	p.written = true
	return p.Driver.Delete(key)
}

// recheck fails with a *ChangedError when the release has a record of the
// revision after the decided one: someone wrote it since the checked read.
func (p *premised) recheck() error {
	next := p.decided + 1
	_, err := p.Driver.Get(recordKey(p.name, next))
	switch {
	case errors.Is(err, driver.ErrReleaseNotFound):
		return nil
	case err != nil:
		return fmt.Errorf("cannot read whether release %s/%s has a revision %d before its first write: %w", p.namespace, p.name, next, err)
	}
	return &ChangedError{Namespace: p.namespace, Name: p.name, Decided: p.decided, Newest: next}
}
