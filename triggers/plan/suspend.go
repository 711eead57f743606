package plan

import (
	"fmt"
	"slices"
	"strings"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/internal/format"
)

// Suspended specs and release specs (DESIGN §3): what a pass must prove in
// sync of them, and what their held steps would write.

// Active is spec without its suspended release specs (spec itself when it
// has none): what a pass must prove in sync, since nothing is done for
// the others. A suspended spec has no active release spec.
func Active(spec *config.Spec) *config.Spec {
	if !spec.Suspend && !slices.ContainsFunc(spec.ReleaseSpecIDs(), func(id string) bool { return spec.ReleaseSpecs[id].Suspend }) {
		return spec
	}
	out := *spec
	out.ReleaseSpecs = map[string]*config.ReleaseSpec{}
	for id, rs := range spec.ReleaseSpecs {
		if !spec.Suspend && !rs.Suspend {
			out.ReleaseSpecs[id] = rs
		}
	}
	return &out
}

// ActiveRecords are the records of recs that spec's suspended release
// specs do not hold: every record of a release spec that is not suspended
// or no longer in the config.
func ActiveRecords(spec *config.Spec, recs []format.Record) []format.Record {
	if spec.Suspend {
		return nil
	}
	var out []format.Record
	for _, r := range recs {
		if rs := spec.ReleaseSpecs[r.ReleaseSpec]; rs == nil || !rs.Suspend {
			out = append(out, r)
		}
	}
	return out
}

// SuspendedChanges lists what the suspended steps of p would write, one
// entry per step, for the Event that says a suspended spec has pending
// changes; none when nothing is pending.
func SuspendedChanges(p Plan) []string {
	var out []string
	for _, s := range p.Steps {
		if s.Action == ActionSuspended && (Step{Action: s.Pending}).Changes() {
			out = append(out, fmt.Sprintf("%s %s/%s", s.Pending, s.Namespace, s.Release))
		}
	}
	return out
}

// The pass and suspended specs: a key whose only differences are in
// suspended release specs is queued once per leadership term (for the
// Event that says changes are pending), then left to events and config
// changes, as a key in conflict is.

// SuspendedNotice is the Survey.Noticed entry of a key queued once because
// its suspended release specs have pending changes; ParseNotice returns
// the key of a notice.
func SuspendedNotice(key string) string { return suspendedNotice + key }

// ParseNotice returns the queue key a Noticed entry is about.
func ParseNotice(notice string) string { return strings.TrimPrefix(notice, suspendedNotice) }

// suspendedNotice marks a suspended key's notice; keys hold no ":".
const suspendedNotice = "suspended:"

// syncState is what a pass can say of a key from its records.
type syncState int

const (
	unsure   syncState = iota // it needs the full reconcile
	synced                    // InSync: no Helm call
	heldOnly                  // in sync but for suspended release specs, which get no Helm call either
)

// inSync is InSync for the pass, which tells apart a key that differs only
// in its suspended release specs.
func inSync(name string, spec *config.Spec, obj format.Object, trig TriggerRead, recs []format.Record, s Survey) syncState {
	if inSyncUnder(s.Digests, s.Config, name, spec, obj, trig, recs, s.Charts[name], s.Sources) {
		return synced
	}
	if active := Active(spec); active != spec && inSyncUnder(s.Digests, s.Config, name, active, obj, trig, ActiveRecords(spec, recs), s.Charts[name], s.Sources) {
		return heldOnly
	}
	return unsure
}

// Held reports whether cfg suspends record r's release: its spec is
// suspended, or its release spec is.
func Held(cfg *config.Config, r format.Record) bool {
	spec := cfg.Specs[r.Spec]
	return spec != nil && spec.Suspended(r.ReleaseSpec) != ""
}

// splitHeld splits recs into the records of releases cfg does not suspend
// and those it does.
func splitHeld(cfg *config.Config, recs []format.Record) (active, held []format.Record) {
	for _, r := range recs {
		if Held(cfg, r) {
			held = append(held, r)
		} else {
			active = append(active, r)
		}
	}
	return active, held
}

// allHeld reports whether cfg suspends every release of recs (some).
func allHeld(cfg *config.Config, recs []format.Record) bool {
	for _, r := range recs {
		if !Held(cfg, r) {
			return false
		}
	}
	return len(recs) > 0
}
