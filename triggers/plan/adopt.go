package plan

import (
	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/internal/format"
)

// Renames keep experiments running (DESIGN §4). Renaming a spec or a
// release spec id, or moving a release spec to another spec, while its
// release name and namespace stay, is a refactoring of the config, not a new
// experiment: the release is handed over to its new owner, which adopts it
// (ActionAdopt: new ownership labels, no new revision, no hooks), and the
// old owner's reconcile, start-up cleanup and the pass leave it alone.

// AdopterOf returns the owner the config hands rel over to. ok is true when
// rel is an autox release of instance, its own owner (spec and release spec
// id) is no longer in cfg, and exactly one release spec of cfg wants its
// name and namespace with the object labels it carries: none for a named
// spec; for a selector spec, the object they name, in a namespace the spec
// covers, for which it renders that release name. The object's whole name
// comes from the release (TriggerObject), so a long one is resolved too.
// An old owner still in the config keeps its release: its own reconcile
// decides about it, and a name it gives up is taken the usual way.
func AdopterOf(cfg *config.Config, instance string, rel *format.Release) (format.Owner, bool) {
	if rel == nil || rel.Instance != instance {
		return format.Owner{}, false
	}
	r := format.Record{Name: rel.Name, Namespace: rel.Namespace, Spec: rel.Spec, ReleaseSpec: rel.ReleaseSpec, Instance: rel.Instance,
		ObjectNamespace: rel.ObjectNamespace, ObjectName: rel.ObjectName}
	return adopterOf(cfg, r, rel.TriggerObject().Name)
}

// AdopterOfRecord is AdopterOf from a record's labels alone, for the
// record's instance. A record whose object label holds a long name's hash
// cannot tell the whole name, so a selector spec cannot be found to adopt
// it here: it is left to the old owner's reconcile, which reads the release
// and asks AdopterOf.
func AdopterOfRecord(cfg *config.Config, r format.Record) (format.Owner, bool) {
	whole := ""
	if r.ObjectName != "" && format.ObjectLabelIsName(r.ObjectName) {
		whole = r.ObjectName
	}
	return adopterOf(cfg, r, whole)
}

// adopterOf is AdopterOf for the labels of r and the whole name of the
// object they name ("" when unknown).
func adopterOf(cfg *config.Config, r format.Record, objectName string) (format.Owner, bool) {
	if cfg == nil || r.Spec == "" || r.ReleaseSpec == "" {
		return format.Owner{}, false
	}
	if s := cfg.Specs[r.Spec]; s != nil && s.ReleaseSpecs[r.ReleaseSpec] != nil {
		return format.Owner{}, false
	}
	var found []format.Owner
	for _, name := range cfg.SpecNames() {
		spec := cfg.Specs[name]
		var obj format.Object
		if spec.Trigger.IsSelector() {
			if r.ObjectName == "" || objectName == "" || !cfg.Covers(spec.Trigger, r.ObjectNamespace) {
				continue
			}
			obj = format.Object{Namespace: r.ObjectNamespace, Name: objectName}
			var err error
			if spec, err = spec.ForObject(name, obj.Namespace, obj.Name); err != nil {
				continue // a name the template cannot render is nobody's
			}
		} else if r.ObjectName != "" || r.ObjectNamespace != "" {
			continue // a named spec's releases name no object
		}
		for _, id := range spec.ReleaseSpecIDs() {
			if Wants(spec.ReleaseSpecs[id], r.Namespace, r.Name) {
				found = append(found, format.Owner{Spec: name, ReleaseSpec: id, Instance: r.Instance, Object: obj})
			}
		}
	}
	if len(found) != 1 {
		// Nobody, or several owners (selector specs whose templates render
		// the same name): no one adopts it, and it goes as before.
		return format.Owner{}, false
	}
	return found[0], true
}

// adoption says whether release spec id of the observed spec adopts rel, a
// release of its wanted name that another owner's labels name, and returns
// that owner.
func adoption(o Observation, id string, rel *format.Release) (format.Owner, bool) {
	if rel == nil || !rel.Managed() || (rel.Spec == o.Spec && rel.ReleaseSpec == id) {
		return format.Owner{}, false
	}
	to, ok := AdopterOf(o.InForce, o.Instance, rel)
	if !ok || to.Spec != o.Spec || to.ReleaseSpec != id || !o.Object.Labelled(rel.ObjectNamespace, rel.ObjectName) {
		return format.Owner{}, false
	}
	return rel.Owner(), true
}
