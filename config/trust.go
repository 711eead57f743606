package config

import (
	"path/filepath"
	"regexp"
	"strings"

	k8svalidation "k8s.io/apimachinery/pkg/util/validation"
)

// What a release runs as and how far its chart is trusted (DESIGN §2,
// "Service accounts and trusted charts"): the fields serviceAccountName,
// chart.digest, chart.verify and chart.keyring. None of them enters the
// release format (§8): a release's digest and injected values are those of
// its chart name, version and values only.

// DefaultKeyringKey is the key of a keyring Secret read when chart.keyring
// names none: the name GnuPG gives a public keyring.
const DefaultKeyringKey = "pubring.gpg"

// Keyring is a Secret holding an OpenPGP keyring (binary, as `gpg --export`
// writes it) that chart.verify checks provenance signatures with.
type Keyring struct {
	// SecretName is a Secret in the release's namespace.
	SecretName string `json:"secretName"`
	// Key defaults to DefaultKeyringKey.
	Key string `json:"key,omitempty"`
	// Namespace is the release's namespace, filled in by Load (or, for a
	// selector spec without one, by ForObject): the Secret is read there.
	Namespace string `json:"-"`
}

// digestPattern is what chart.digest must look like: the form OCI
// registries and `sha256sum` agree on, lower case.
var digestPattern = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// RunsAs returns the service account, in the release's namespace, that the
// Helm operations of a release run as: the release spec's
// serviceAccountName, else its spec's, else defaultServiceAccount
// (--default-service-account); "" means autox's own identity. rs or spec
// may be nil: a release whose release spec (or spec) left the config is
// uninstalled as the most specific account the config still names, never
// as a wider one than that.
func RunsAs(spec *Spec, rs *ReleaseSpec, defaultServiceAccount string) string {
	if rs != nil && rs.ServiceAccountName != "" {
		return rs.ServiceAccountName
	}
	if spec != nil && spec.ServiceAccountName != "" {
		return spec.ServiceAccountName
	}
	return defaultServiceAccount
}

// Pinned reports whether the chart's content is pinned by a digest.
func (c Chart) Pinned() bool { return c.Digest != "" }

// defaultKeyring fills in the keyring Secret's key and namespace.
func defaultKeyring(rs *ReleaseSpec) {
	if k := rs.Chart.Keyring; k != nil {
		if k.Key == "" {
			k.Key = DefaultKeyringKey
		}
		k.Namespace = rs.Namespace
	}
}

// keyringIn returns a copy of k read in namespace (ForObject: each object's
// release namespace), nil for nil.
func keyringIn(k *Keyring, namespace string) *Keyring {
	if k == nil {
		return nil
	}
	c := *k
	c.Namespace = namespace
	return &c
}

// validateTrust checks a release spec's serviceAccountName and its chart's
// digest, verify and keyring.
func validateTrust(c *checker, p string, rs *ReleaseSpec) {
	if rs.ServiceAccountName != "" {
		c.field(p+".serviceAccountName", rs.ServiceAccountName, "dns1123subdomain", "service account name "+msgDNSSubdomain)
	}
	cp := p + ".chart"
	ch := rs.Chart
	local := ch.Path != "" && ch.Repo == ""
	if ch.Digest != "" {
		if !digestPattern.MatchString(ch.Digest) {
			c.add(cp+".digest", "must be sha256: and 64 lower-case hex digits (an OCI chart's manifest digest, as `helm push` prints it; else the sha256 of the .tgz, as `sha256sum` prints it)")
		}
		if local && !isArchive(ch.Path) {
			c.add(cp+".digest", "pins a .tgz archive: package the chart directory with `helm package` and set path to the .tgz, or remove digest")
		}
	}
	if ch.Verify && local && !isArchive(ch.Path) {
		c.add(cp+".verify", "needs a .tgz archive with its .prov file next to it (`helm package --sign`); a chart directory cannot be verified")
	}
	if k := ch.Keyring; k != nil {
		if !ch.Verify {
			c.add(cp+".keyring", "is only used with `verify: true`; set verify or remove keyring")
		}
		c.field(cp+".keyring.secretName", k.SecretName, "required,dns1123subdomain", "required: the name of a Secret in the release's namespace holding the keyring; "+msgDNSSubdomain)
		if errs := k8svalidation.IsConfigMapKey(k.Key); len(errs) > 0 {
			c.add(cp+".keyring.key", "must be a valid Secret key: %s", strings.Join(errs, "; "))
		}
	}
}

// validateSpecTrust checks a spec's serviceAccountName.
func validateSpecTrust(c *checker, sp string, spec *Spec) {
	if spec.ServiceAccountName != "" {
		c.field(sp+".serviceAccountName", spec.ServiceAccountName, "dns1123subdomain", "service account name "+msgDNSSubdomain)
	}
}

// isArchive reports whether a chart path names a packaged chart, as Helm
// tells one (by its extension).
func isArchive(path string) bool {
	return strings.EqualFold(filepath.Ext(path), ".tgz")
}

// Trust describes how far a chart is trusted, for `plan` and `list`:
// "pinned", "verified", "pinned,verified" or "" for neither.
func (c Chart) Trust() string { return Trust(c.Pinned(), c.Verify) }

// Trust is Chart.Trust of a chart pinned and verified as said.
func Trust(pinned, verified bool) string {
	var parts []string
	if pinned {
		parts = append(parts, "pinned")
	}
	if verified {
		parts = append(parts, "verified")
	}
	return strings.Join(parts, ",")
}
