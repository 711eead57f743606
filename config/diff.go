package config

import "reflect"

// ReleaseSpecRef names one release spec of one spec.
type ReleaseSpecRef struct {
	Spec string
	ID   string
}

// Changes is what an accepted new config changes relative to the old one.
// Every list is sorted.
type Changes struct {
	// RemovedSpecs are specs of old that new no longer has: all their releases go.
	RemovedSpecs []string
	// RemovedReleaseSpecs are release specs gone from a spec that new still has.
	RemovedReleaseSpecs []ReleaseSpecRef
	// AddedSpecs are specs new has and old had not.
	AddedSpecs []string
	// ChangedSpecs are specs in both whose trigger or release specs differ.
	ChangedSpecs []string
}

// Empty reports whether the two configs want the same releases.
func (c Changes) Empty() bool {
	return len(c.RemovedSpecs)+len(c.RemovedReleaseSpecs)+len(c.AddedSpecs)+len(c.ChangedSpecs) == 0
}

// Diff compares two defaulted configs. old may be nil (the first config).
func Diff(old, new *Config) Changes {
	var ch Changes
	oldSpecs := map[string]*Spec{}
	if old != nil {
		oldSpecs = old.Specs
	}
	for _, name := range sortedKeys(oldSpecs) {
		ns, ok := new.Specs[name]
		if !ok {
			ch.RemovedSpecs = append(ch.RemovedSpecs, name)
			continue
		}
		os := oldSpecs[name]
		for _, id := range sortedKeys(os.ReleaseSpecs) {
			if _, ok := ns.ReleaseSpecs[id]; !ok {
				ch.RemovedReleaseSpecs = append(ch.RemovedReleaseSpecs, ReleaseSpecRef{Spec: name, ID: id})
			}
		}
		if !sameSpec(os, ns) {
			ch.ChangedSpecs = append(ch.ChangedSpecs, name)
		}
	}
	for _, name := range new.SpecNames() {
		if _, ok := oldSpecs[name]; !ok {
			ch.AddedSpecs = append(ch.AddedSpecs, name)
		}
	}
	return ch
}

// sameSpec compares two specs as the user wrote them (after defaulting): the
// parsed selector cache is left out, since it is derived from Selector and
// would make a loaded spec differ from an equal one built another way.
func sameSpec(a, b *Spec) bool {
	if a == nil || b == nil {
		return a == b
	}
	x, y := *a, *b
	x.Trigger.selector, y.Trigger.selector = nil, nil
	return reflect.DeepEqual(x, y)
}
