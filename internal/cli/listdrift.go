package cli

import (
	"context"
	"strings"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/helmops"
	"github.com/autox-dev/autox/internal/format"
)

// listDrift is what `autox list --drift` found of a release: read-only, as
// warn mode checks (never a correction), with the release spec's ignore
// rules. It names objects and paths only, never a value.
type listDrift struct {
	// State is "none", "drifted", "failed" (some objects could not be
	// checked) or "not checked" (the newest revision is not deployed).
	State   string   `json:"state"`
	Objects []string `json:"objects,omitempty"`
	Error   string   `json:"error,omitempty"`
}

// addDrift checks the drift of every row's release with checker, in warn
// mode whatever the config says, so that list never writes.
func addDrift(ctx context.Context, checker *helmops.DriftChecker, cfg *config.Config, rows []listedRelease, rels []*format.Release) {
	byName := make(map[string]*format.Release, len(rels))
	for _, r := range rels {
		byName[r.Namespace+"/"+r.Name] = r
	}
	for i := range rows {
		row := &rows[i]
		r := byName[row.Namespace+"/"+row.Release]
		if r == nil || r.Status != "deployed" {
			row.Drift = &listDrift{State: "not checked"}
			continue
		}
		policy := &config.Drift{Mode: config.DriftWarn}
		if spec := cfg.Specs[r.Spec]; spec != nil && spec.ReleaseSpecs[r.ReleaseSpec] != nil && spec.ReleaseSpecs[r.ReleaseSpec].Drift != nil {
			policy.Ignore = spec.ReleaseSpecs[r.ReleaseSpec].Drift.Ignore
		}
		t := helmops.DriftTarget{Namespace: r.Namespace, Name: r.Name, Revision: r.Revision, Policy: policy}
		if row.ServiceAccount != "" {
			t.ServiceAccount = helmops.ServiceAccount{Namespace: r.Namespace, Name: row.ServiceAccount}
		}
		row.Drift = driftOf(checker.Check(ctx, t))
	}
}

// driftOf is a row's drift from a check's report.
func driftOf(rep *helmops.DriftReport, err error) *listDrift {
	if err != nil {
		return &listDrift{State: "failed", Error: err.Error()}
	}
	d := &listDrift{State: "none"}
	var failed []string
	for _, o := range rep.Objects {
		switch {
		case o.CheckErr != nil:
			failed = append(failed, o.Object.String()+": "+o.CheckErr.Error())
		case o.Missing:
			d.Objects = append(d.Objects, o.Object.String()+": missing")
		case len(o.Fields) > 0:
			var paths []string
			for _, f := range o.Fields {
				paths = append(paths, f.Path)
			}
			d.Objects = append(d.Objects, o.Object.String()+": "+strings.Join(paths, ","))
		}
	}
	if len(d.Objects) > 0 {
		d.State = "drifted"
	}
	if len(failed) > 0 {
		if d.State == "none" {
			d.State = "failed"
		}
		d.Error = strings.Join(failed, "; ")
	}
	return d
}

// driftColumn is the DRIFT column of a row.
func driftColumn(d *listDrift) string {
	if d == nil {
		return "-"
	}
	if len(d.Objects) > 0 {
		return d.State + ": " + strings.Join(d.Objects, "; ")
	}
	return d.State
}
