package chartsource

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/autox-dev/autox/internal/testenv"
)

// TestDiskCacheVerifiesWhatItReads: a cached archive that no longer matches
// its digest (a damaged disk, a file cut short) is downloaded again, never
// parsed, and the good copy replaces it.
func TestDiskCacheVerifiesWhatItReads(t *testing.T) {
	repo, err := testenv.NewChartRepo(t.TempDir(), nil, "", "", "hello")
	if err != nil {
		t.Fatal(err)
	}
	defer repo.Close()
	clock := &fakeClock{t: time.Now()}
	dir := t.TempDir()
	if err := load(t, newCache(t, dir, clock, "", ""), repo.URL, "hello", "0.1.0"); err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(dir, "charts", "sha256-*.tgz"))
	if err != nil || len(files) != 1 {
		t.Fatalf("cached archives: %v, %v", files, err)
	}
	good, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(files[0], good[:len(good)/2], 0o600); err != nil {
		t.Fatal(err)
	}
	// A restart on the same directory: the index on disk is trusted, the
	// damaged archive is not.
	if err := load(t, newCache(t, dir, clock, "", ""), repo.URL, "hello", "0.1.0"); err != nil {
		t.Fatalf("a damaged cached archive must be fetched again: %v", err)
	}
	if n, m := repo.Requests("/index.yaml"), repo.Requests("/hello-0.1.0.tgz"); n != 1 || m != 2 {
		t.Errorf("%d index fetches, %d chart downloads; want 1 and 2", n, m)
	}
	if data, err := os.ReadFile(files[0]); err != nil || !bytes.Equal(data, good) {
		t.Errorf("the damaged archive was not replaced (%v)", err)
	}
}
