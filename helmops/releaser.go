package helmops

import (
	"fmt"

	"helm.sh/helm/v4/pkg/action"
	helmrelease "helm.sh/helm/v4/pkg/release"
	release "helm.sh/helm/v4/pkg/release/v1"
)

// asV1 is the one conversion from Helm 4's release.Releaser (any) to the
// release API v1, the only one the records autox reads and writes hold (the
// record type helm.sh/release.v1). Every release Helm's actions and drivers
// hand autox passes through it; anything else is an error, never a panic.
func asV1(r helmrelease.Releaser) (*release.Release, error) {
	switch v := r.(type) {
	case *release.Release:
		if v == nil {
			return nil, fmt.Errorf("no release")
		}
		return v, nil
	case release.Release:
		return &v, nil
	}
	return nil, fmt.Errorf("a release of type %T: only Helm's release API v1 is supported", r)
}

// asV1List is asV1 of each.
func asV1List(rs []helmrelease.Releaser) ([]*release.Release, error) {
	out := make([]*release.Release, 0, len(rs))
	for _, r := range rs {
		v, err := asV1(r)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// releasers is rs as Helm 4's drivers return them.
func releasers(rs []*release.Release) []helmrelease.Releaser {
	if rs == nil {
		return nil
	}
	out := make([]helmrelease.Releaser, len(rs))
	for i, r := range rs {
		out[i] = r
	}
	return out
}

// lastRelease is the newest revision of release name as cfg's storage reads
// it (its history).
func lastRelease(cfg *action.Configuration, name string) (*release.Release, error) {
	last, err := cfg.Releases.Last(name)
	if err != nil {
		return nil, err
	}
	return asV1(last)
}
