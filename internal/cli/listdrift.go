package cli

import (
	"context"
	"fmt"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/helmops"
	"github.com/autox-dev/autox/internal/format"
)

// addDrift checks the drift of every row's release with checker, in warn
// mode whatever the config says, so that list never writes; as plan and
// the drift loop, not a release whose newest revision another Helm client
// wrote.
func addDrift(ctx context.Context, checker *helmops.DriftChecker, cfg *config.Config, rows []listedRelease, rels []*format.Release) {
	byName := make(map[string]*format.Release, len(rels))
	for _, r := range rels {
		byName[r.Namespace+"/"+r.Name] = r
	}
	for i := range rows {
		row := &rows[i]
		r := byName[row.Namespace+"/"+row.Release]
		if r == nil || r.Status != "deployed" {
			row.Drift = unchecked(fmt.Sprintf("revision %d is %s, not deployed", row.Revision, row.Status))
			continue
		}
		// The release read is its newest revision: only who wrote it decides.
		if d := writtenByAnother(r.Record); d != nil {
			row.Drift = d
			continue
		}
		var policy *config.Drift
		if spec := cfg.Specs[r.Spec]; spec != nil && spec.ReleaseSpecs[r.ReleaseSpec] != nil {
			policy = spec.ReleaseSpecs[r.ReleaseSpec].Drift
		}
		t := readOnlyTarget(r.Namespace, r.Name, r.Revision, policy, row.ServiceAccount)
		row.Drift = driftOf(checker.Check(ctx, t))
	}
}
