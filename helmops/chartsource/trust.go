package chartsource

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"helm.sh/helm/v4/pkg/provenance"

	"github.com/autox-dev/autox/config"
)

// Trusted charts (DESIGN §2, "Service accounts and trusted charts"):
// chart.digest pins the content of a chart version, chart.verify checks its
// provenance file as `helm install --verify` does. Both are checked on the
// archive an operation would install, every time one is loaded — a cached
// archive included — so a failure changes nothing.

// Keyrings gives the OpenPGP keyring chart.verify checks signatures with.
type Keyrings struct {
	// File is --chart-keyring, read at each check: the keyring of a chart
	// whose release spec names no keyring Secret. "" for none.
	File string
	// Secret reads chart.keyring's Secret key with autox's own identity;
	// nil when this autox reads none.
	Secret func(ctx context.Context, k config.Keyring) ([]byte, error)
}

// archive is a chart archive as fetched, with its provenance file.
type archive struct {
	// name is the archive's file name, which the provenance file signs
	// its sha256 under (the download's, the path's, <name>-<version>.tgz
	// for an OCI chart).
	name string
	data []byte
	// prov is the provenance file; nil when none was fetched.
	prov []byte
	// where names the chart in errors.
	where string
}

// sha256Digest is data's digest in chart.digest's form.
func sha256Digest(data []byte) string {
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// checkPin checks an http(s) or local chart's archive against chart.digest.
func checkPin(ref config.Chart, a archive) error {
	if !ref.Pinned() {
		return nil
	}
	if got := sha256Digest(a.data); got != ref.Digest {
		return fmt.Errorf("chart %s is %s, but chart.digest pins %s: the chart changed under the same version (re-published?) or was tampered with; nothing was changed (publish a new version, or pin the new digest once you trust it)",
			a.where, got, ref.Digest)
	}
	return nil
}

// verify checks a's provenance file with the chart's keyring when the
// release spec sets chart.verify: a signature by a key of the keyring over
// a block whose sha256 of a.name is a's.
func (k Keyrings) verify(ctx context.Context, ref config.Chart, a archive) error {
	if !ref.Verify {
		return nil
	}
	if a.prov == nil {
		return fmt.Errorf("chart %s has no provenance file, and chart.verify is set: sign it (`helm package --sign`) and publish the .prov with it; nothing was changed", a.where)
	}
	ring, source, err := k.keyring(ctx, ref)
	if err != nil {
		return fmt.Errorf("cannot verify chart %s: %w; nothing was changed", a.where, err)
	}
	dir, err := os.MkdirTemp("", "autox-verify-")
	if err != nil {
		return fmt.Errorf("cannot verify chart %s: %w", a.where, err)
	}
	defer os.RemoveAll(dir)
	// Helm reads a keyring (binary, armored or a GnuPG keybox) from a file
	// only; chart and provenance file are verified in memory.
	ringPath := filepath.Join(dir, "keyring.gpg")
	if err := os.WriteFile(ringPath, ring, 0o600); err != nil {
		return fmt.Errorf("cannot verify chart %s: %w", a.where, err)
	}
	sig, err := provenance.NewFromKeyring(ringPath, "")
	if err != nil {
		return fmt.Errorf("cannot verify chart %s: cannot read the keyring %s: %w; nothing was changed", a.where, source, err)
	}
	if _, err := sig.Verify(a.data, a.prov, a.name); err != nil {
		return fmt.Errorf("chart %s fails verification with the keyring %s: %w; nothing was changed", a.where, source, err)
	}
	return nil
}

// keyring returns the keyring of ref and names where it came from.
func (k Keyrings) keyring(ctx context.Context, ref config.Chart) ([]byte, string, error) {
	if kr := ref.Keyring; kr != nil {
		source := fmt.Sprintf("Secret %s/%s key %s", kr.Namespace, kr.SecretName, kr.Key)
		if k.Secret == nil {
			return nil, source, errors.New("this command reads no keyring Secret")
		}
		data, err := k.Secret(ctx, *kr)
		if err != nil {
			return nil, source, fmt.Errorf("cannot read the keyring %s: %w", source, err)
		}
		return data, source, nil
	}
	if k.File == "" {
		return nil, "", errors.New("no keyring: set chart.keyring to a Secret holding one, or run autox with --chart-keyring")
	}
	data, err := os.ReadFile(k.File)
	if err != nil {
		return nil, k.File, fmt.Errorf("cannot read the keyring --chart-keyring %s: %w", k.File, err)
	}
	return data, k.File, nil
}
