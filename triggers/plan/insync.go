package plan

import (
	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/internal/format"
)

// ChartID names a chart by what its Chart.yaml says: a repository chart by
// its config, a local chart as it was last loaded.
type ChartID struct{ Name, Version string }

// InSync reports, from the live trigger observation and the release records'
// labels only, that a spec certainly needs no Helm call. For a selector
// spec, spec is the spec as it applies to object obj (config.Spec.ForObject)
// and recs are that object's records; obj is zero for a named spec. charts
// names the chart of each release spec id the caller could identify; a
// missing one means "not sure". sources are what the pass read of the values
// sources, since the digest covers the merged values: a release spec whose
// sources were not read, or could not be, is "not sure" too. It makes no
// call and answers false whenever it cannot be sure; the spec then gets the
// full reconcile, which decodes the releases and compares chart and values
// for real. It never answers true for a release another Helm client
// changed: that write made a revision autox's revision label does not name.
func InSync(specName string, spec *config.Spec, obj format.Object, trig TriggerRead, recs []format.Record, charts map[string]ChartID, sources Sources) bool {
	return inSyncUnder(nil, nil, specName, spec, obj, trig, recs, charts, sources)
}

// inSyncUnder is InSync with the digests remembered in digests for cfg, the
// config spec is of (see Digests).
func inSyncUnder(digests *Digests, cfg *config.Config, specName string, spec *config.Spec, obj format.Object, trig TriggerRead, recs []format.Record, charts map[string]ChartID, sources Sources) bool {
	state, _ := Evaluate(spec.Trigger, trig)
	if !state.Wanted() {
		return len(recs) == 0
	}
	if len(recs) != len(spec.ReleaseSpecs) {
		return false
	}
	for _, rec := range recs {
		rs := spec.ReleaseSpecs[rec.ReleaseSpec]
		if rec.Spec != specName || !obj.Labelled(rec.ObjectNamespace, rec.ObjectName) || !Wants(rs, rec.Namespace, rec.Name) ||
			rec.Status != "deployed" || rec.Digest == "" || rec.AutoxRevision != rec.Revision {
			return false
		}
		id, ok := charts[rec.ReleaseSpec]
		if !ok {
			return false
		}
		read, ok, err := sources.Of(rs)
		if !ok || err != nil {
			return false
		}
		digest := func() (string, error) {
			merged, err := MergeValues(rs, read, spec.Trigger, trig.Labels)
			if err != nil {
				return "", err // the full reconcile reports it
			}
			return format.Digest(id.Name, id.Version, merged.Values)
		}
		var want string
		if k, ok := digestKeyOf(specName, rec.ReleaseSpec, spec, rs, obj, id, trig.Labels); ok {
			want, err = digests.get(cfg, k, digest)
		} else {
			want, err = digest()
		}
		if err != nil || want != rec.Digest {
			return false
		}
	}
	return true
}
