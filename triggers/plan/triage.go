package plan

import (
	"sort"
	"strings"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/internal/format"
)

// Survey is what a periodic pass read, in a number of requests that does
// not grow with the specs: the metadata of every release record, one
// listing per trigger (resource, namespace, selector), the values sources of
// wanted triggers (each object once), and the identities of the charts.
// Triage decides from it which keys need a full reconcile.
type Survey struct {
	Config *config.Config
	// Claims is the claim index of Config.
	Claims *ClaimIndex
	// Records are this instance's release records in the namespaces read.
	Records []format.Record
	// RecordsFailed says the records could not be listed at all: every
	// spec then gets the full reconcile, which reports why.
	RecordsFailed bool
	// Unread are the namespaces whose records could not be read: nothing
	// there is taken for absent.
	Unread map[string]bool
	// Listed is, per spec of Config, what its trigger listings returned.
	Listed map[string]Listing
	// Charts names, per spec, the charts of its release specs that could be
	// named without fetching anything.
	Charts map[string]map[string]ChartID
	// Sources are the values sources read for the pass (SourcesNeeded).
	Sources Sources
	// Served are, per selector spec, the objects it served before this
	// pass (its admission under the trigger in force): an admitted object
	// keeps its place while wanted, its install may not be in Records yet.
	Served map[string][]format.Object
	// Noticed are the keys in conflict or over the limit that a pass of
	// this leadership term has already queued once.
	Noticed map[string]bool
	// Owns, if set, says whether a queue key (a named spec, an object of
	// a selector spec) is the pass's to reconcile (its shard's): another
	// shard's is neither triaged nor queued nor has its values sources
	// read; nil: every key is. The key of a selector spec (its sweep) and
	// of a spec the config no longer has must be every shard's, as
	// Shard.OwnsKey has them: each shard removes its own releases.
	Owns func(key string) bool
	// Digests, if set, remembers the digests of desired values from one
	// pass to the next (see Digests); nil computes every one.
	Digests *Digests
}

// owns reports whether key is the survey's to reconcile.
func (s Survey) owns(key string) bool { return s.Owns == nil || s.Owns(key) }

// Listing is what the live listings of one spec's trigger returned: every
// object, keyed by namespace and name. OK is false when a listing failed;
// nothing is then proven, and nothing taken for absent.
type Listing struct {
	OK      bool
	Objects map[format.Object]TriggerRead
}

// ObjectCounts are a selector spec's wanted objects by what the pass
// found: served within maxObjects, over it, or claimed by another spec too.
type ObjectCounts struct{ Served, OverLimit, Conflict int }

// Verdict is what a pass decided: the keys that need a full reconcile (a
// spec, a selector spec's sweep, or one of its objects, see ObjectKey), in
// order; the keys noticed for the first time; each selector spec's
// admission and object counts; and the records by Helm status.
type Verdict struct {
	Keys     []string
	Noticed  []string
	Admitted map[string]map[format.Object]bool
	Objects  map[string]ObjectCounts
	ByStatus map[string]int
}

// Queue keys. A named spec, a selector spec's sweep and a removed spec are
// keyed by the spec's name; one object of a selector spec by
// spec/namespace/name. Spec names, namespaces and object names hold no
// "/", so a key parses back unambiguously.

// ObjectKey is the queue key of one object of a selector spec.
func ObjectKey(spec string, o format.Object) string {
	return spec + "/" + o.Namespace + "/" + o.Name
}

// ParseKey splits a queue key into its spec and, for an object key, the object.
func ParseKey(key string) (spec string, obj format.Object) {
	parts := strings.SplitN(key, "/", 3)
	if len(parts) != 3 {
		return key, format.Object{}
	}
	return parts[0], format.Object{Namespace: parts[1], Name: parts[2]}
}

// SourcesNeeded are the values sources a pass must read to prove the wanted
// triggers of s in sync, each once: the objects the release specs of every
// listed, wanted trigger read their values from.
func SourcesNeeded(s Survey) []SourceKey {
	seen := map[SourceKey]bool{}
	var out []SourceKey
	need := func(spec *config.Spec) {
		for _, id := range spec.ReleaseSpecIDs() {
			for _, k := range KeysOf(spec.ReleaseSpecs[id]) {
				if !seen[k] {
					seen[k] = true
					out = append(out, k)
				}
			}
		}
	}
	for _, name := range s.Config.SpecNames() {
		spec := s.Config.Specs[name]
		l := s.Listed[name]
		if !l.OK {
			continue
		}
		if !spec.Trigger.IsSelector() {
			if !s.owns(name) {
				continue
			}
			if st, _ := Evaluate(spec.Trigger, l.Objects[namedObject(spec.Trigger)]); st.Wanted() {
				need(spec)
			}
			continue
		}
		for _, o := range sortedObjects(l.Objects) {
			if !s.owns(ObjectKey(name, o)) {
				continue
			}
			if st, _ := Evaluate(spec.Trigger, l.Objects[o]); !st.Wanted() {
				continue
			}
			if forObj, err := spec.ForObject(name, o.Namespace, o.Name); err == nil {
				need(forObj)
			}
		}
	}
	return out
}

// Triage decides, from what a pass read alone, which keys need the full
// reconcile. A spec, or an object of a selector spec, that the records
// prove in sync (InSync) needs none; every other one does, and so does
// every spec that still has releases the config does not want. Objects in
// conflict or past maxObjects are queued once per term (their reconcile
// records the Event), then left alone: nothing changes for them until an
// event or a new config says otherwise. A listing that failed queues its
// spec, whose reconcile reports it and removes nothing.
func Triage(s Survey) Verdict {
	cfg := s.Config
	out := Verdict{Admitted: map[string]map[format.Object]bool{}, Objects: map[string]ObjectCounts{}, ByStatus: map[string]int{}}
	seen := map[string]bool{}
	add := func(key string) {
		if !seen[key] {
			seen[key] = true
			out.Keys = append(out.Keys, key)
		}
	}
	noticed := map[string]bool{}
	noticeOnce := func(key string) {
		if !s.Noticed[key] && !noticed[key] {
			noticed[key] = true
			out.Noticed = append(out.Noticed, key)
			add(ParseNotice(key))
		}
	}
	names := cfg.SpecNames()
	if s.RecordsFailed {
		for _, name := range names {
			if s.owns(name) {
				add(name)
			}
		}
		return out
	}
	// A pass that could not list the records computed no digest: the
	// memo keeps what the passes before it made.
	s.Digests.newPass(cfg)
	for _, r := range s.Records {
		out.ByStatus[string(r.Status)]++
	}
	active, held := splitHeld(cfg, s.Records)
	for _, name := range OrphanSpecs(cfg, active) {
		// A selector spec's records are looked at per object below, and
		// only what cannot be tied to an object needs the spec's sweep.
		if spec := cfg.Specs[name]; (spec == nil || !spec.Trigger.IsSelector()) && s.owns(name) {
			add(name)
		}
	}
	for _, name := range OrphanSpecs(cfg, held) {
		if !cfg.Specs[name].Trigger.IsSelector() && s.owns(name) {
			noticeOnce(SuspendedNotice(name)) // nothing is removed while suspended: say so, once
		}
	}
	bySpec := map[string][]format.Record{}
	for _, r := range s.Records {
		bySpec[r.Spec] = append(bySpec[r.Spec], r)
	}
	for _, name := range names {
		spec := cfg.Specs[name]
		l := s.Listed[name]
		if spec.Trigger.IsSelector() {
			triageSelector(s, name, bySpec[name], &out, add, noticeOnce)
			continue
		}
		if !s.owns(name) {
			continue // another shard's: its pass triages it
		}
		t := spec.Trigger
		obs := l.Objects[namedObject(t)]
		if l.OK && obs.Found && len(s.Claims.Claimants(t.Group, t.Resource, namedObject(t), obs.Labels)) > 1 {
			noticeOnce(name) // in conflict: nothing to do but say so, once
			continue
		}
		if l.OK && !usesAny(spec, s.Unread) {
			switch inSync(name, spec, format.Object{}, obs, bySpec[name], s) {
			case synced:
				continue
			case heldOnly:
				noticeOnce(SuspendedNotice(name))
				continue
			}
		}
		add(name)
	}
	return out
}

// triageSelector is the triage of one selector spec: from its listing and
// its records, the objects that need a reconcile of their own.
func triageSelector(s Survey, name string, recs []format.Record, out *Verdict, add, noticeOnce func(string)) {
	spec := s.Config.Specs[name]
	t := spec.Trigger
	l := s.Listed[name]
	if !l.OK {
		add(name)
		return
	}
	byObject := map[format.Object][]format.Record{}
	withReleases := map[format.Object]bool{}
	for _, r := range recs {
		o := r.LabelledObject()
		byObject[o] = append(byObject[o], r)
		withReleases[o] = !o.IsZero()
	}
	admitted := AdmitListed(s.Claims, spec, l.Objects, s.Served[name], withReleases)
	out.Admitted[name] = admitted
	var counts ObjectCounts
	counts.Served = len(admitted)
	for _, o := range sortedObjects(l.Objects) {
		obs := l.Objects[o]
		labelled := o.AsLabelled()
		objRecs := byObject[labelled]
		delete(byObject, labelled)
		key := ObjectKey(name, o)
		owned := s.owns(key)
		if len(s.Claims.Claimants(t.Group, t.Resource, o, obs.Labels)) > 1 {
			counts.Conflict++
			if owned {
				noticeOnce(key)
			}
			continue
		}
		if st, _ := Evaluate(t, obs); st.Wanted() && !admitted[o] {
			counts.OverLimit++
			if owned {
				noticeOnce(key)
			}
			continue
		}
		if !owned {
			continue // another shard's: its pass triages it
		}
		forObj, err := spec.ForObject(name, o.Namespace, o.Name)
		if err == nil && !usesAny(forObj, s.Unread) {
			switch inSync(name, forObj, o, obs, objRecs, s) {
			case synced:
				continue
			case heldOnly:
				noticeOnce(SuspendedNotice(key))
				continue
			}
		}
		add(key)
	}
	// Records of objects the listing did not return: deleted, or no longer
	// selected. Each object's own reconcile reads it by name before
	// anything is removed.
	left := make([]format.Object, 0, len(byObject))
	for o := range byObject {
		left = append(left, o)
	}
	SortObjects(left)
	for _, o := range left {
		var key string
		switch {
		case o.IsZero():
			key = name // releases from before the spec had a selector (OrphanSpecs queues it too)
		case format.ObjectLabelIsName(o.Name):
			key = ObjectKey(name, o)
		default:
			key = name // a long name: the sweep finds it in the release's values
		}
		if !s.owns(key) {
			continue
		}
		if allHeld(s.Config, byObject[o]) {
			noticeOnce(SuspendedNotice(key)) // its reconcile would remove nothing
			continue
		}
		add(key)
	}
	out.Objects[name] = counts
}

// AdmitListed is a selector spec's admission from one live listing: the
// objects it wants (WantedObjects) within maxObjects, where those it served
// before (served) and those whose records name them (withReleases, in the
// label form of ObjectLabel) keep their place.
func AdmitListed(claims *ClaimIndex, spec *config.Spec, listed map[format.Object]TriggerRead, served []format.Object, withReleases map[format.Object]bool) map[format.Object]bool {
	kept := make(map[format.Object]bool, len(served))
	for _, o := range served {
		kept[o] = true
	}
	has := func(o format.Object) bool { return kept[o] || withReleases[o.AsLabelled()] }
	return Admit(WantedObjects(claims, spec, listed), has, spec.Trigger.MaxObjects)
}

// namedObject is the one object a named trigger names.
func namedObject(t config.Trigger) format.Object {
	return format.Object{Namespace: t.Namespace, Name: t.Name}
}

// usesAny reports whether one of spec's releases lives in a namespace of set.
func usesAny(spec *config.Spec, set map[string]bool) bool {
	for _, rs := range spec.ReleaseSpecs {
		if set[rs.Namespace] {
			return true
		}
	}
	return false
}

func sortedObjects(m map[format.Object]TriggerRead) []format.Object {
	out := make([]format.Object, 0, len(m))
	for o := range m {
		out = append(out, o)
	}
	SortObjects(out)
	return out
}

// EmptyNamespaces are the namespaces of listed, outside the config, that a
// listing read and found without releases of ours: dropped namespaces that
// garbage collection may stop looking in.
func EmptyNamespaces(cfg *config.Config, listed []string, unread map[string]bool, recs []format.Record) []string {
	used := map[string]bool{}
	for _, r := range recs {
		used[r.Namespace] = true
	}
	var empty []string
	for _, ns := range listed {
		if !cfg.Manages(ns) && !used[ns] && !unread[ns] {
			empty = append(empty, ns)
		}
	}
	sort.Strings(empty)
	return empty
}
