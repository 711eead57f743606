package plan

// replacements decides the removal of a release whose release spec now
// wants another name or namespace (a moved release). The old release goes
// only when something takes its place or nothing should: when the release
// spec's step installs the new release, the removal waits for its dry run
// (ReplacedBy); when the new release is already in sync there, or the
// trigger no longer wants releases, it goes at once. Otherwise — the release
// spec could not be decided (its chart does not load, its namespace cannot
// be read), the new place is another's (a conflict), the trigger is claimed
// twice or over its limit, or the new release is failed, stale or locked —
// the old one stays: nothing proves that the new one can take its place.
func replacements(p Plan) []Step {
	failed := map[string]bool{}
	for _, f := range p.Failed {
		failed[f.ReleaseSpec] = true
	}
	next := map[string]Step{}
	for _, s := range p.Steps {
		if !s.moved && s.Action != ActionUninstall {
			next[s.ReleaseSpec] = s
		}
	}
	out := p.Steps[:0:0]
	for _, s := range p.Steps {
		if s.Action == ActionUninstall && s.moved {
			n, decided := next[s.ReleaseSpec]
			switch {
			case failed[s.ReleaseSpec]:
				continue
			case p.Trigger == TriggerConflict || p.Trigger == TriggerOverLimit:
				continue // nothing is removed for that reason
			case !p.Trigger.Wanted():
				// The experiment ends: the old release goes like the others.
			case decided && n.Action == ActionInstall && n.Desired != nil:
				s.ReplacedBy = s.ReleaseSpec
			case decided && n.Action == ActionNone:
				// The new release is deployed and in sync in its place.
			default:
				continue
			}
		}
		out = append(out, s)
	}
	return out
}
