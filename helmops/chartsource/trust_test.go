package chartsource

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	chart "helm.sh/helm/v4/pkg/chart/v2"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/internal/testenv"
)

// loadRef loads ref from c and says whether it is the re-published content
// (testenv.ChangeTemplates).
func loadRef(t *testing.T, c ChartSource, ref config.Chart) (republished bool, err error) {
	t.Helper()
	ch, err := c.Load(context.Background(), ref, "/")
	if err != nil {
		return false, err
	}
	return republishedChart(ch), nil
}

func republishedChart(ch *chart.Chart) bool {
	for _, tpl := range ch.Templates {
		if strings.Contains(string(tpl.Data), "# re-published") {
			return true
		}
	}
	return false
}

func wantErr(t *testing.T, what string, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: no error, want one with %q", what, parts)
		return
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("%s: %v; want it to say %q", what, err, p)
		}
	}
}

func fileDigest(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sha256Digest(data)
}

// TestPinnedOCIChart: a pinned OCI chart is pulled by its digest; once its
// tag is re-pushed with other content, the pin is an error however the
// cache stands, while an unpinned load gets the new content and a pin of
// the new digest loads it — the cache keyed by digest never serves one
// archive for the other.
func TestPinnedOCIChart(t *testing.T) {
	dir := t.TempDir()
	reg, err := testenv.NewOCIRegistry(dir, testCA, "pusher", "p4ss")
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	tgzs, err := testenv.PackageCharts(t.TempDir(), "hello")
	if err != nil {
		t.Fatal(err)
	}
	first, err := reg.PushArchive("charts", tgzs[0], nil)
	if err != nil {
		t.Fatal(err)
	}
	creds := filepath.Join(dir, "config.json")
	if err := reg.DockerConfig(creds); err != nil {
		t.Fatal(err)
	}
	c := newCache(t, t.TempDir(), &fakeClock{t: time.Now()}, "", creds)
	ref := config.Chart{Repo: "oci://" + reg.Host + "/charts", Name: "hello", Version: "0.1.0", Digest: first}
	if re, err := loadRef(t, c, ref); err != nil || re {
		t.Fatalf("pinned pull: republished %v, %v", re, err)
	}
	other := ref
	other.Digest = "sha256:" + strings.Repeat("0", 64)
	wantErr(t, "a pin the tag does not name", func() error { _, err := loadRef(t, c, other); return err }(), other.Digest, reg.Host+"/charts/hello:0.1.0", "nothing was changed")

	edited, err := testenv.PackageEdited(t.TempDir(), "hello", testenv.ChangeTemplates)
	if err != nil {
		t.Fatal(err)
	}
	second, err := reg.PushArchive("charts", edited, nil)
	if err != nil || second == first {
		t.Fatalf("re-push: %s, %v", second, err)
	}
	_, err = loadRef(t, c, ref)
	wantErr(t, "the old pin after a re-push, first archive cached", err, "now names "+second, "pins "+first, "re-pushed")
	unpinned := ref
	unpinned.Digest = ""
	if re, err := loadRef(t, newCache(t, t.TempDir(), &fakeClock{t: time.Now()}, "", creds), unpinned); err != nil || !re {
		t.Errorf("unpinned load after the re-push: republished %v, %v", re, err)
	}
	ref.Digest = second
	if re, err := loadRef(t, c, ref); err != nil || !re {
		t.Errorf("the new pin, the old archive cached: republished %v, %v", re, err)
	}
}

// TestPinnedArchives: an http(s) repository chart and a local .tgz are
// pinned by the archive's sha256; a version re-published with other
// content fails the pin, whether the index says so or only the download.
func TestPinnedArchives(t *testing.T) {
	repo, err := testenv.NewChartRepo(t.TempDir(), nil, "", "", "hello")
	if err != nil {
		t.Fatal(err)
	}
	defer repo.Close()
	tgz := filepath.Join(repo.Dir, "hello-0.1.0.tgz")
	pin := fileDigest(t, tgz)
	c := newCache(t, t.TempDir(), &fakeClock{t: time.Now()}, "", "")
	ref := config.Chart{Repo: repo.URL, Name: "hello", Version: "0.1.0", Digest: pin}
	if _, err := loadRef(t, c, ref); err != nil {
		t.Fatalf("pinned repository chart: %v", err)
	}
	wrong := ref
	wrong.Digest = "sha256:" + strings.Repeat("1", 64)
	_, err = loadRef(t, c, wrong)
	wantErr(t, "a pin the index disagrees with", err, "index gives "+pin, "pins "+wrong.Digest, "nothing was changed")

	local := config.Chart{Path: tgz, Digest: pin}
	if _, err := loadRef(t, LocalCharts{}, local); err != nil {
		t.Fatalf("pinned local archive: %v", err)
	}

	// Re-published under the same version: the index now gives the new
	// digest; with an index that gives none, the download must match.
	if _, err := testenv.PackageEdited(repo.Dir, "hello", testenv.ChangeTemplates); err != nil {
		t.Fatal(err)
	}
	if err := repo.Reindex(); err != nil {
		t.Fatal(err)
	}
	fresh := newCache(t, t.TempDir(), &fakeClock{t: time.Now()}, "", "")
	_, err = loadRef(t, fresh, ref)
	wantErr(t, "the old pin after a re-publish", err, "index gives "+fileDigest(t, tgz), "pins "+pin)
	index := filepath.Join(repo.Dir, "index.yaml")
	data, err := os.ReadFile(index)
	if err != nil {
		t.Fatal(err)
	}
	var kept []string
	for _, l := range strings.Split(string(data), "\n") {
		if !strings.Contains(l, "digest:") {
			kept = append(kept, l)
		}
	}
	if err := os.WriteFile(index, []byte(strings.Join(kept, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = loadRef(t, newCache(t, t.TempDir(), &fakeClock{t: time.Now()}, "", ""), ref)
	wantErr(t, "the old pin, an index without digests", err, "is "+fileDigest(t, tgz), "pins "+pin, "tampered")
	_, err = loadRef(t, LocalCharts{}, local)
	wantErr(t, "the old pin of a re-packaged local archive", err, tgz+" is "+fileDigest(t, tgz), "pins "+pin)
	// The cache that holds the first archive still serves the pin from it:
	// it is the pinned content, and the index is not fetched again yet.
	if re, err := loadRef(t, c, ref); err != nil || re {
		t.Errorf("the pinned archive from the cache: republished %v, %v", re, err)
	}
}

// TestVerifiedCharts: chart.verify checks the .prov file beside a local
// .tgz, in an http(s) repository and in an OCI artifact, with the keyring
// of --chart-keyring or of a Secret: a tampered archive, a missing .prov, a
// key not in the keyring, or no keyring fail.
func TestVerifiedCharts(t *testing.T) {
	signer, err := testenv.NewSigner("charts")
	if err != nil {
		t.Fatal(err)
	}
	stranger, err := testenv.NewSigner("stranger")
	if err != nil {
		t.Fatal(err)
	}
	keyring := filepath.Join(t.TempDir(), "pubring.gpg")
	if err := os.WriteFile(keyring, signer.Keyring, 0o600); err != nil {
		t.Fatal(err)
	}
	keys := Keyrings{File: keyring, Secret: func(_ context.Context, k config.Keyring) ([]byte, error) {
		if k.SecretName != "stranger-keys" {
			return signer.Keyring, nil
		}
		return stranger.Keyring, nil
	}}

	// A local archive.
	dir := t.TempDir()
	tgzs, err := testenv.PackageCharts(dir, "hello")
	if err != nil {
		t.Fatal(err)
	}
	tgz := tgzs[0]
	local := config.Chart{Path: tgz, Verify: true}
	_, err = loadRef(t, LocalCharts{Keyrings: keys}, local)
	wantErr(t, "no .prov", err, tgz, "no provenance file")
	if _, err := signer.Sign(tgz); err != nil {
		t.Fatal(err)
	}
	if _, err := loadRef(t, LocalCharts{Keyrings: keys}, local); err != nil {
		t.Errorf("signed local archive, --chart-keyring: %v", err)
	}
	withSecret := local
	withSecret.Keyring = &config.Keyring{SecretName: "chart-keys", Key: "pubring.gpg", Namespace: "team"}
	if _, err := loadRef(t, LocalCharts{Keyrings: keys}, withSecret); err != nil {
		t.Errorf("signed local archive, keyring Secret: %v", err)
	}
	withSecret.Keyring.SecretName = "stranger-keys"
	_, err = loadRef(t, LocalCharts{Keyrings: keys}, withSecret)
	wantErr(t, "a keyring without the signer", err, "fails verification with the keyring Secret team/stranger-keys key pubring.gpg")
	_, err = loadRef(t, LocalCharts{}, local)
	wantErr(t, "no keyring", err, "--chart-keyring")
	if _, err := testenv.PackageEdited(dir, "hello", testenv.ChangeTemplates); err != nil { // the .prov stays
		t.Fatal(err)
	}
	_, err = loadRef(t, LocalCharts{Keyrings: keys}, local)
	wantErr(t, "a tampered local archive", err, "fails verification", "sha256 sum does not match")

	// An http(s) repository: <chart URL>.prov.
	repo, err := testenv.NewChartRepo(t.TempDir(), nil, "", "", "hello")
	if err != nil {
		t.Fatal(err)
	}
	defer repo.Close()
	c, err := NewChartCache(ChartCacheOptions{Dir: t.TempDir(), Refresh: time.Nanosecond, Keyrings: keys, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	ref := config.Chart{Repo: repo.URL, Name: "hello", Version: "0.1.0", Verify: true}
	_, err = loadRef(t, c, ref)
	wantErr(t, "a repository chart without .prov", err, "no provenance file")
	if _, err := signer.Sign(filepath.Join(repo.Dir, "hello-0.1.0.tgz")); err != nil {
		t.Fatal(err)
	}
	if _, err := loadRef(t, c, ref); err != nil {
		t.Errorf("signed repository chart: %v", err)
	}
	if _, err := testenv.PackageEdited(repo.Dir, "hello", testenv.ChangeTemplates); err != nil {
		t.Fatal(err)
	}
	if err := repo.Reindex(); err != nil {
		t.Fatal(err)
	}
	_, err = loadRef(t, c, ref)
	wantErr(t, "a tampered repository chart with its old .prov", err, "fails verification", "sha256 sum does not match")

	// An OCI chart: its provenance layer.
	reg, err := testenv.NewOCIRegistry(t.TempDir(), testCA, "pusher", "p4ss")
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	creds := filepath.Join(t.TempDir(), "config.json")
	if err := reg.DockerConfig(creds); err != nil {
		t.Fatal(err)
	}
	oc, err := NewChartCache(ChartCacheOptions{Dir: t.TempDir(), RegistryConfig: creds, Refresh: time.Nanosecond, Keyrings: keys, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	signed, err := testenv.PackageCharts(t.TempDir(), "hello")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reg.PushArchive("charts", signed[0], nil); err != nil {
		t.Fatal(err)
	}
	oref := config.Chart{Repo: "oci://" + reg.Host + "/charts", Name: "hello", Version: "0.1.0", Verify: true}
	_, err = loadRef(t, oc, oref)
	wantErr(t, "an OCI chart without provenance", err, "no provenance file")
	prov, err := signer.Sign(signed[0])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reg.PushArchive("charts", signed[0], prov); err != nil {
		t.Fatal(err)
	}
	if _, err := loadRef(t, oc, oref); err != nil {
		t.Errorf("signed OCI chart: %v", err)
	}
	edited, err := testenv.PackageEdited(t.TempDir(), "hello", testenv.ChangeTemplates)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reg.PushArchive("charts", edited, prov); err != nil {
		t.Fatal(err)
	}
	_, err = loadRef(t, oc, oref)
	wantErr(t, "a tampered OCI chart with the old provenance", err, "fails verification", "sha256 sum does not match")
}

// TestPinnedOCIChartCacheIsChecked: a cached OCI archive, named by its
// manifest's digest, is checked against the manifest kept beside it on
// every read: an archive replaced on disk (by other content of the same
// chart and version) is pulled again by the pin, never installed.
func TestPinnedOCIChartCacheIsChecked(t *testing.T) {
	dir := t.TempDir()
	reg, err := testenv.NewOCIRegistry(dir, testCA, "pusher", "p4ss")
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	tgzs, err := testenv.PackageCharts(t.TempDir(), "hello")
	if err != nil {
		t.Fatal(err)
	}
	pin, err := reg.PushArchive("charts", tgzs[0], nil)
	if err != nil {
		t.Fatal(err)
	}
	creds := filepath.Join(dir, "config.json")
	if err := reg.DockerConfig(creds); err != nil {
		t.Fatal(err)
	}
	cacheDir := t.TempDir()
	ref := config.Chart{Repo: "oci://" + reg.Host + "/charts", Name: "hello", Version: "0.1.0", Digest: pin}
	if re, err := loadRef(t, newCache(t, cacheDir, &fakeClock{t: time.Now()}, "", creds), ref); err != nil || re {
		t.Fatalf("pinned pull: republished %v, %v", re, err)
	}
	cachedFile := filepath.Join(cacheDir, "charts", "oci-"+strings.ReplaceAll(pin, ":", "-")+".tgz")
	good, err := os.ReadFile(cachedFile)
	if err != nil {
		t.Fatalf("the pinned archive is not cached as %s: %v", cachedFile, err)
	}
	edited, err := testenv.PackageEdited(t.TempDir(), "hello", testenv.ChangeTemplates)
	if err != nil {
		t.Fatal(err)
	}
	other, err := os.ReadFile(edited)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cachedFile, other, 0o600); err != nil {
		t.Fatal(err)
	}
	// A restart on the same directory.
	if re, err := loadRef(t, newCache(t, cacheDir, &fakeClock{t: time.Now()}, "", creds), ref); err != nil || re {
		t.Errorf("pinned load with another archive in the cache: republished %v, %v; want the pinned chart", re, err)
	}
	if data, err := os.ReadFile(cachedFile); err != nil || !bytes.Equal(data, good) {
		t.Errorf("the replaced archive was not pulled again (%v)", err)
	}
}
