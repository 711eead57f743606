package testenv

import (
	"bytes"
	"os"
	"path/filepath"

	"github.com/ProtonMail/go-crypto/openpgp"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	"helm.sh/helm/v4/pkg/provenance"
	repo "helm.sh/helm/v4/pkg/repo/v1"
	"sigs.k8s.io/yaml"
)

// Charts for the tests of chart.digest and chart.verify: other content
// under the same name and version (a re-published or tampered chart), and
// provenance files signed as `helm package --sign` signs them.

// PackageEdited packages testdata chart name into dir, changed by edit
// (which keeps its name and version: the same chart version with other
// content), and returns the archive's path.
func PackageEdited(dir, name string, edit func(*chart.Chart)) (string, error) {
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	ch, err := loader.Load(filepath.Join(root, "testdata", "charts", name))
	if err != nil {
		return "", err
	}
	edit(ch)
	return chartutil.Save(ch, dir)
}

// ChangeTemplates is an edit for PackageEdited: it appends a comment to
// every template, which changes the archive and nothing the chart renders.
func ChangeTemplates(ch *chart.Chart) {
	for _, t := range ch.Templates {
		t.Data = append(append([]byte{}, t.Data...), []byte("\n# re-published\n")...)
	}
}

// Signer signs chart archives with a fresh OpenPGP key.
type Signer struct {
	sig *provenance.Signatory
	// Keyring is the public keyring of the key (as `gpg --export` writes
	// it), which verifies what the Signer signs.
	Keyring []byte
}

// NewSigner makes a key named name.
func NewSigner(name string) (*Signer, error) {
	e, err := openpgp.NewEntity(name, "autox test key", name+"@example.invalid", nil)
	if err != nil {
		return nil, err
	}
	var ring bytes.Buffer
	if err := e.Serialize(&ring); err != nil {
		return nil, err
	}
	return &Signer{sig: &provenance.Signatory{Entity: e}, Keyring: ring.Bytes()}, nil
}

// Sign writes tgz's provenance file, tgz + ".prov", and returns it.
// As `helm package --sign` does, the signed block holds the chart's
// metadata and the archive's digest.
func (s *Signer) Sign(tgz string) ([]byte, error) {
	ch, err := loader.Load(tgz)
	if err != nil {
		return nil, err
	}
	metadata, err := yaml.Marshal(ch.Metadata)
	if err != nil {
		return nil, err
	}
	archive, err := os.ReadFile(tgz)
	if err != nil {
		return nil, err
	}
	prov, err := s.sig.ClearSign(archive, filepath.Base(tgz), metadata)
	if err != nil {
		return nil, err
	}
	return []byte(prov), os.WriteFile(tgz+".prov", []byte(prov), 0o644)
}

// Reindex writes the repository's index again from the archives in its
// directory: after a test replaced one (a re-published version).
func (r *ChartRepo) Reindex() error {
	// An empty base URL makes the index's chart URLs relative to the repository.
	idx, err := repo.IndexDirectory(r.Dir, "")
	if err != nil {
		return err
	}
	tmp := filepath.Join(r.Dir, ".index.yaml.tmp")
	if err := idx.WriteFile(tmp, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(r.Dir, "index.yaml"))
}
