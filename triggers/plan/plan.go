package plan

import (
	"errors"
	"fmt"
	"sort"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/internal/format"
	"github.com/autox-dev/autox/internal/redact"
)

// releaseObject names the object a release's labels name ("" for none).
func releaseObject(rel *format.Release) string {
	return format.Object{Namespace: rel.ObjectNamespace, Name: rel.ObjectName}.String()
}

// Wants reports whether release spec rs (nil: none) wants the release of
// that namespace and name. It is the one answer to "is this the release
// this release spec makes".
func Wants(rs *config.ReleaseSpec, namespace, name string) bool {
	return rs != nil && rs.Namespace == namespace && rs.ReleaseName == name
}

// WantedBy reports whether cfg has a release spec that wants this release,
// judged from its record. A selector spec's release is wanted when its
// object labels name an object the spec can select and its name is the one
// the release spec renders for that object; when the label holds a long
// name's hash the name cannot be rendered, and the object's own reconcile
// decides (true here).
func WantedBy(cfg *config.Config, r format.Record) bool {
	s := cfg.Specs[r.Spec]
	if s == nil {
		return false
	}
	rs := s.ReleaseSpecs[r.ReleaseSpec]
	if rs == nil {
		return false
	}
	if !s.Trigger.IsSelector() {
		return r.ObjectName == "" && Wants(rs, r.Namespace, r.Name)
	}
	if r.ObjectName == "" || !cfg.Covers(s.Trigger, r.ObjectNamespace) {
		return false
	}
	if !format.ObjectLabelIsName(r.ObjectName) {
		return true
	}
	forObj, err := s.ForObject(r.Spec, r.ObjectNamespace, r.ObjectName)
	return err == nil && Wants(forObj.ReleaseSpecs[r.ReleaseSpec], r.Namespace, r.Name)
}

// OrphanSpecs returns, sorted, the names of specs that have releases cfg does
// not want by spec or release spec id: removed specs, and specs with removed,
// renamed or moved release specs. A release cfg hands over to another owner
// (AdopterOfRecord) is no orphan: that owner's reconcile adopts it.
func OrphanSpecs(cfg *config.Config, recs []format.Record) []string {
	seen := map[string]bool{}
	var out []string
	for _, r := range recs {
		if seen[r.Spec] || WantedBy(cfg, r) {
			continue
		}
		if _, handedOver := AdopterOfRecord(cfg, r); handedOver {
			continue
		}
		seen[r.Spec] = true
		out = append(out, r.Spec)
	}
	sort.Strings(out)
	return out
}

// redactorOf hides the values of a release spec (nil: none), of what its
// values sources hold (a Secret's whatever their type), of the merged values
// it wants (nil: not merged), and of a release (nil: none), its latest and
// its last deployed revision: an operation on it may quote any of them. The
// `autox` key is left out: it names the trigger, which messages must show.
func redactorOf(rs *config.ReleaseSpec, rel *format.Release, sources []SourceValue, desired map[string]interface{}) *redact.Redactor {
	var values []map[string]interface{}
	if rs != nil {
		values = append(values, rs.Values)
	}
	fromSources, fromSecrets := sourceSecrets(sources)
	values = append(values, fromSources...)
	if desired != nil {
		values = append(values, format.UserValues(desired))
	}
	if rel != nil {
		values = append(values, format.UserValues(rel.Values), format.UserValues(rel.DeployedValues))
	}
	return redact.Build(values, fromSecrets)
}

// unwantedUndecodable is the error of the key's undecodable releases that
// no release spec wants (of a removed spec or release spec): they would be
// uninstalled if they could be read, so the key is incomplete until then.
// Those a release spec wants fail that release spec instead.
func unwantedUndecodable(o Observation) error {
	keys := make([]string, 0, len(o.Undecodable))
	for k := range o.Undecodable {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var errs []error
	for _, k := range keys {
		if o.Config != nil && wantedName(o.Config, k) {
			continue
		}
		errs = append(errs, o.Undecodable[k])
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("releases of the spec that cannot be read are left as they are: %w", errors.Join(errs...))
}

// wantedName reports whether a release spec of spec wants the release
// "namespace/name".
func wantedName(spec *config.Spec, key string) bool {
	for _, rs := range spec.ReleaseSpecs {
		if rs.Namespace+"/"+rs.ReleaseName == key {
			return true
		}
	}
	return false
}

// unreadError joins the causes of unreadable namespaces, in a stable order.
func unreadError(unread map[string]error) error {
	names := make([]string, 0, len(unread))
	for ns := range unread {
		names = append(names, ns)
	}
	sort.Strings(names)
	errs := make([]error, 0, len(names))
	for _, ns := range names {
		errs = append(errs, fmt.Errorf("namespace %s: %w", ns, unread[ns]))
	}
	return errors.Join(errs...)
}
