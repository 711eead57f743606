package observe

import (
	"context"
	"errors"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/triggers/attempts"
	"github.com/autox-dev/autox/triggers/plan"
)

// AttemptReader reads the failed attempts recorded in one namespace, by
// release name (attempts.Store).
type AttemptReader interface {
	Read(ctx context.Context, namespace string) (map[string]attempts.Entry, error)
}

// attemptCache reads each namespace's records at most once per
// observation, and only for release specs whose retries are bounded: a
// config without remediation reads nothing more than before.
type attemptCache struct {
	records AttemptReader
	read    map[string]map[string]attempts.Entry
	failed  map[string]error
}

func (ob *Observer) attemptCache() *attemptCache {
	return &attemptCache{records: ob.opts.Attempts, read: map[string]map[string]attempts.Entry{}, failed: map[string]error{}}
}

// of returns the attempts recorded for release spec id's release in
// observation o, nil when none are (or its retries are not bounded). An
// error fails the release spec: without the records, nothing is decided.
func (c *attemptCache) of(ctx context.Context, o *plan.Observation, id string, rs *config.ReleaseSpec) (*plan.Attempts, error) {
	if _, limited := rs.Limited(); !limited {
		return nil, nil
	}
	if c.records == nil {
		return nil, errors.New("remediation retries need the remediation records, which this autox cannot read")
	}
	ns := rs.Namespace
	if err := c.failed[ns]; err != nil {
		return nil, err
	}
	recs, ok := c.read[ns]
	if !ok {
		var err error
		if recs, err = c.records.Read(ctx, ns); err != nil {
			c.failed[ns] = err
			return nil, err
		}
		c.read[ns] = recs
	}
	e, ok := recs[rs.ReleaseName]
	if !ok || e.Spec != o.Spec || e.ReleaseSpec != id || e.Object != o.Object.String() {
		return nil, nil // none, or another release spec's of an earlier name: not this one's
	}
	return &plan.Attempts{Fingerprint: e.Fingerprint, Failures: e.Failures, Remedied: e.Remedied}, nil
}
