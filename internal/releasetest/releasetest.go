// Package releasetest reads Helm releases for test assertions. It is apart
// from testenv so that helmops's own tests can use testenv.
package releasetest

import (
	"context"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/release/common"
	release "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage/driver"

	"github.com/autox-dev/autox/helmops"
	"github.com/autox-dev/autox/internal/format"
	"github.com/autox-dev/autox/internal/testenv"
)

// Releases reads the Helm releases of one namespace for assertions.
type Releases struct {
	T         testing.TB
	Helm      *helmops.Manager
	Namespace string
	// Patience bounds Wait: a bound for a broken build, not a performance goal.
	Patience time.Duration
}

// Get returns the release, or nil when there is none.
func (r Releases) Get(name string) *format.Release {
	r.T.Helper()
	rel, err := r.Helm.Lookup(context.Background(), r.Namespace, name)
	if err != nil {
		r.T.Fatal(err)
	}
	return rel
}

// Wait polls the release until cond holds and returns it.
func (r Releases) Wait(name, what string, cond func(*format.Release) bool) *format.Release {
	r.T.Helper()
	var rel *format.Release
	testenv.Eventually(r.T, r.Patience, "release "+name+" "+what, func() (bool, error) {
		var err error
		rel, err = r.Helm.Lookup(context.Background(), r.Namespace, name)
		return err == nil && cond(rel), err
	})
	return rel
}

// DeployedAt holds for a deployed release at that revision.
func DeployedAt(rev int) func(*format.Release) bool {
	return func(r *format.Release) bool {
		return r != nil && r.Status == common.StatusDeployed && r.Revision == rev
	}
}

// Gone holds when there is no release.
func Gone(r *format.Release) bool { return r == nil }

// Record reads the release record key through store (a Helm driver), as a
// release of Helm's API v1: what tests then edit and write back by hand.
func Record(t testing.TB, store driver.Queryor, key string) *release.Release {
	t.Helper()
	got, err := store.Get(key)
	if err != nil {
		t.Fatal(err)
	}
	rel, ok := got.(*release.Release)
	if !ok {
		t.Fatalf("record %s holds a %T, not a release of Helm's API v1", key, got)
	}
	return rel
}
