package helmops

import (
	"context"
	"errors"
	"fmt"

	"github.com/autox-dev/autox/internal/format"
	release "helm.sh/helm/v4/pkg/release/v1"
)

// SpecReleases returns this instance's releases of one spec in the given
// namespaces: those whose newest revision (the highest of all the release's
// records, labelled or not) carries both autox labels, format.LabelSpec=spec and
// this instance. A release whose newest revision someone wrote without them
// is not returned, whatever its older revisions say: it is no longer ours,
// and Lookup shows whose it is. Every namespace is read; when some cannot be,
// the others' releases are returned with a *NamespacesError. A release of
// the spec whose newest record does not decode is not returned either, and
// is named in a *ReleasesError (FailedReleases) beside them: the caller must
// neither act on it nor take it for absent.
func (m *Manager) SpecReleases(ctx context.Context, namespaces []string, spec string) ([]*format.Release, error) {
	return m.specReleases(ctx, namespaces, map[string]string{format.LabelSpec: spec})
}

// ObjectReleases is SpecReleases narrowed to the releases a selector spec
// made for one object: those whose newest revision names it in its object
// labels. A reconcile of one object reads no other object's releases.
func (m *Manager) ObjectReleases(ctx context.Context, namespaces []string, spec string, obj format.Object) ([]*format.Release, error) {
	return m.specReleases(ctx, namespaces, map[string]string{format.LabelSpec: spec,
		format.LabelObjectNamespace: obj.Namespace, format.LabelObject: format.ObjectLabel(obj.Name)})
}

// specReleases reads the releases of match in every namespace. A release of
// the instance whose newest record does not decode is left out and named in
// a *ReleasesError beside the others (with the *NamespacesError, if any).
func (m *Manager) specReleases(ctx context.Context, namespaces []string, match map[string]string) ([]*format.Release, error) {
	failed := map[string]error{}
	out, err := eachNamespace(ctx, namespaces, func(ns string) ([]*format.Release, error) {
		if ri := m.index.Load().usable(ns); ri != nil {
			return m.indexedSpecReleases(ctx, ri, ns, match, func(name string, err *UndecodableError) { failed[ns+"/"+name] = err })
		}
		// Label equality only, as the drivers' Query; the release-spec
		// label and the instance are checked on the newest revision.
		recs, err := m.listRecords(ctx, ns, match)
		if err != nil {
			return nil, err
		}
		groups, broken, err := m.newestOnly(ctx, ns, recs)
		if err != nil {
			return nil, err
		}
		for name, u := range broken {
			if u.owned(m.opts.Instance) {
				failed[ns+"/"+name] = u.error(ns, name)
			}
		}
		return m.releases(ctx, ns, groups, m.owned), nil
	})
	return out, withFailed(err, failed)
}

func (m *Manager) owned(r *format.Release) bool { return r.OwnedBy(m.opts.Instance) }

// NamesInUse reports which of names have release records in namespace,
// whoever made them: from the index, else from one metadata LIST. A name
// without any is free as of the read (or as far as the index has seen); a
// release someone makes under it afterwards, or that the index has not
// shown yet, still fails autox's install, whose first write creates
// revision 1's record only if none exists.
func (m *Manager) NamesInUse(ctx context.Context, namespace string, names []string) (map[string]bool, error) {
	if len(names) == 0 {
		return map[string]bool{}, nil
	}
	if ri := m.index.Load().usable(namespace); ri != nil {
		// A name this process has just written counts, seen or not.
		own, _ := m.index.Load().expect.pending(namespace, nil)
		out := map[string]bool{}
		for _, n := range names {
			if own[n] || len(ri.records(n)) > 0 {
				out[n] = true
			}
		}
		return out, nil
	}
	versions, err := m.recordVersions(ctx, namespace, names)
	if err != nil {
		return nil, fmt.Errorf("cannot tell which of releases %v exist in %s: %w", names, namespace, err)
	}
	out := make(map[string]bool, len(versions))
	for name := range versions {
		out[name] = true
	}
	return out, nil
}

// Lookup returns the release of that name in namespace, or nil: autox's or
// not, of any instance. Whether it may be touched is the caller's decision.
// A release whose newest record does not decode is an *UndecodableError.
func (m *Manager) Lookup(ctx context.Context, namespace, name string) (*format.Release, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if ri := m.index.Load().usable(namespace); ri != nil {
		r, _, err := m.indexedRelease(ctx, ri, namespace, name, nil)
		var u *UndecodableError
		if errors.As(err, &u) {
			return nil, u
		}
		if err != nil {
			return nil, fmt.Errorf("cannot look up release %s/%s: %w", namespace, name, err)
		}
		return r, nil
	}
	recs, err := m.listRecords(ctx, namespace, map[string]string{"name": name})
	if err != nil {
		return nil, fmt.Errorf("cannot look up release %s/%s: %w", namespace, name, err)
	}
	// One LIST by the name label holds every revision: it is its own
	// metadata LIST.
	switch verdict, u := judgeNewest(recs.revisions(name), recs.decoded[name], recs.undecoded[name]); verdict {
	case releaseGone:
		return nil, nil
	case releaseUndecodable:
		return nil, u.error(namespace, name)
	}
	rels := m.releases(ctx, namespace, map[string][]*release.Release{name: recs.decoded[name]}, func(*format.Release) bool { return true })
	if len(rels) == 0 {
		return nil, nil
	}
	return rels[0], nil
}

// ManagedReleases decodes this instance's releases in the given namespaces
// (for `autox list`; the control loop uses the cheaper Inventory and
// SpecReleases): every release record is read, and a release is this
// instance's when its newest revision is, as for SpecReleases. Like
// SpecReleases, it reads every namespace and returns a *NamespacesError with
// the releases of the readable ones, and a *ReleasesError for the releases
// whose newest record does not decode.
func (m *Manager) ManagedReleases(ctx context.Context, namespaces []string) ([]*format.Release, error) {
	failed := map[string]error{}
	out, err := eachNamespace(ctx, namespaces, func(ns string) ([]*format.Release, error) {
		// All records, not only autox-labelled ones: a release's newest
		// revision decides whose it is, labelled or not.
		recs, err := m.listRecords(ctx, ns, nil)
		if err != nil {
			return nil, fmt.Errorf("cannot list releases: %w", err)
		}
		groups := map[string][]*release.Release{}
		for _, name := range recs.names() {
			switch verdict, u := judgeNewest(recs.revisions(name), recs.decoded[name], recs.undecoded[name]); verdict {
			case releaseUndecodable:
				if u.owned(m.opts.Instance) {
					failed[ns+"/"+name] = u.error(ns, name)
				}
			case releaseComplete:
				groups[name] = recs.decoded[name]
			}
		}
		return m.releases(ctx, ns, groups, m.owned), nil
	})
	return out, withFailed(err, failed)
}
