package helmops

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/internal/testenv"
)

// fakeClock is an injected clock for the refresh bound.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (f *fakeClock) Now() time.Time      { f.mu.Lock(); defer f.mu.Unlock(); return f.t }
func (f *fakeClock) Add(d time.Duration) { f.mu.Lock(); f.t = f.t.Add(d); f.mu.Unlock() }

func newCache(t *testing.T, dir string, clock *fakeClock, repoConfig, registryConfig string) *ChartCache {
	t.Helper()
	c, err := NewChartCache(ChartCacheOptions{Dir: dir, Refresh: time.Hour, Now: clock.Now, RepositoryConfig: repoConfig,
		RegistryConfig: registryConfig, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func load(t *testing.T, c *ChartCache, repo, name, version string) error {
	t.Helper()
	ch, err := c.Load(context.Background(), config.Chart{Repo: repo, Name: name, Version: version}, "/")
	if err == nil && (ch.Metadata.Name != name || ch.Metadata.Version != version) {
		t.Fatalf("loaded %s %s, want %s %s", ch.Metadata.Name, ch.Metadata.Version, name, version)
	}
	return err
}

func TestRepositoryChartsAreCached(t *testing.T) {
	repo, err := testenv.NewChartRepo(t.TempDir(), nil, "", "", "hello", "hello-v2")
	if err != nil {
		t.Fatal(err)
	}
	defer repo.Close()
	clock := &fakeClock{t: time.Now()}
	dir := t.TempDir()
	c := newCache(t, dir, clock, "", "")

	for i := 0; i < 4; i++ {
		if err := load(t, c, repo.URL, "hello", "0.1.0"); err != nil {
			t.Fatal(err)
		}
	}
	if n, m := repo.Requests("/index.yaml"), repo.Requests("/hello-0.1.0.tgz"); n != 1 || m != 1 {
		t.Errorf("after 4 loads: %d index fetches, %d chart downloads; want 1 and 1", n, m)
	}
	// A restart: a new cache on the same directory fetches nothing.
	c = newCache(t, dir, clock, "", "")
	if err := load(t, c, repo.URL, "hello", "0.1.0"); err != nil {
		t.Fatal(err)
	}
	if n := repo.TotalRequests(); n != 2 {
		t.Errorf("after a restart: %d requests in all, want still 2", n)
	}
	// Another version: its chart is downloaded, the index is not fetched again.
	if err := load(t, c, repo.URL, "hello", "0.2.0"); err != nil {
		t.Fatal(err)
	}
	if n, m := repo.Requests("/index.yaml"), repo.Requests("/hello-0.2.0.tgz"); n != 1 || m != 1 {
		t.Errorf("version bump: %d index fetches, %d downloads", n, m)
	}
	// After the refresh bound the index is fetched once more; charts are not.
	clock.Add(2 * time.Hour)
	for i := 0; i < 3; i++ {
		if err := load(t, c, repo.URL, "hello", "0.1.0"); err != nil {
			t.Fatal(err)
		}
	}
	if n, m := repo.Requests("/index.yaml"), repo.Requests("/hello-0.1.0.tgz"); n != 2 || m != 1 {
		t.Errorf("after the refresh: %d index fetches, %d downloads; want 2 and 1", n, m)
	}

	// The repository goes down: a due refresh falls back to the known index
	// and the cached chart.
	repo.SetDown(true)
	clock.Add(2 * time.Hour)
	if err := load(t, c, repo.URL, "hello", "0.1.0"); err != nil {
		t.Errorf("a cached chart must load while its repository is down: %v", err)
	}
	// A cache that never saw the repository gets a clear error.
	err = load(t, newCache(t, t.TempDir(), clock, "", ""), repo.URL, "hello", "0.1.0")
	if err == nil || !strings.Contains(err.Error(), repo.URL+"/index.yaml") || !strings.Contains(err.Error(), "503") {
		t.Errorf("repository down: %v", err)
	}
}

func TestRepositoryErrors(t *testing.T) {
	repo, err := testenv.NewChartRepo(t.TempDir(), nil, "", "", "hello")
	if err != nil {
		t.Fatal(err)
	}
	defer repo.Close()
	clock := &fakeClock{t: time.Now()}
	c := newCache(t, t.TempDir(), clock, "", "")
	if err := load(t, c, repo.URL, "nope", "0.1.0"); err == nil || !strings.Contains(err.Error(), "chart nope not found in repository "+repo.URL) {
		t.Errorf("missing chart: %v", err)
	}
	if err := load(t, c, repo.URL, "hello", "9.9.9"); err == nil || !strings.Contains(err.Error(), "has no version 9.9.9") {
		t.Errorf("missing version: %v", err)
	}
	// Tamper with the package after the index was made.
	tgz := filepath.Join(repo.Dir, "hello-0.1.0.tgz")
	data, _ := os.ReadFile(tgz)
	if err := os.WriteFile(tgz, append(data, 0), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := load(t, c, repo.URL, "hello", "0.1.0"); err == nil || !strings.Contains(err.Error(), "digest mismatch") {
		t.Errorf("tampered chart: %v", err)
	}
}

func TestRepositoryAuthAndTLS(t *testing.T) {
	repo, err := testenv.NewChartRepo(t.TempDir(), testCA, "ci", "s3cret", "hello")
	if err != nil {
		t.Fatal(err)
	}
	defer repo.Close()
	clock := &fakeClock{t: time.Now()}
	dir := t.TempDir()
	write := func(body string) string {
		p := filepath.Join(dir, "repositories.yaml")
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}

	// The CA comes from SSL_CERT_FILE (set in TestMain); credentials from repositories.yaml.
	good := write("apiVersion: v1\nrepositories:\n- name: r\n  url: " + repo.URL + "/\n  username: ci\n  password: s3cret\n")
	if err := load(t, newCache(t, t.TempDir(), clock, good, ""), repo.URL, "hello", "0.1.0"); err != nil {
		t.Fatalf("https with basic auth: %v", err)
	}
	// The CA as a caFile works too.
	withCA := write("apiVersion: v1\nrepositories:\n- name: r\n  url: " + repo.URL + "\n  username: ci\n  password: s3cret\n  caFile: " + testCA.File + "\n")
	if err := load(t, newCache(t, t.TempDir(), clock, withCA, ""), repo.URL, "hello", "0.1.0"); err != nil {
		t.Fatalf("caFile: %v", err)
	}
	bad := write("apiVersion: v1\nrepositories:\n- name: r\n  url: " + repo.URL + "\n  username: ci\n  password: wrong-password\n")
	err = load(t, newCache(t, t.TempDir(), clock, bad, ""), repo.URL, "hello", "0.1.0")
	if err == nil || !strings.Contains(err.Error(), "401") || strings.Contains(err.Error(), "wrong-password") {
		t.Errorf("refused credentials: %v", err)
	}
	none := write("apiVersion: v1\nrepositories: []\n")
	if err := load(t, newCache(t, t.TempDir(), clock, none, ""), repo.URL, "hello", "0.1.0"); err == nil {
		t.Error("no credentials must be refused")
	}
}

func TestOCIRegistryCharts(t *testing.T) {
	dir := t.TempDir()
	reg, err := testenv.NewOCIRegistry(dir, testCA, "pusher", "p4ss")
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	if err := reg.Push("charts", "hello", "hello-v2"); err != nil {
		t.Fatal(err)
	}
	creds := filepath.Join(dir, "config.json")
	if err := reg.DockerConfig(creds); err != nil {
		t.Fatal(err)
	}
	clock := &fakeClock{t: time.Now()}
	c := newCache(t, t.TempDir(), clock, "", creds)
	ociRepo := "oci://" + reg.Host + "/charts"
	if err := load(t, c, ociRepo, "hello", "0.1.0"); err != nil {
		t.Fatalf("pull: %v", err)
	}
	if err := load(t, c, ociRepo, "hello", "0.2.0"); err != nil {
		t.Fatalf("pull another version: %v", err)
	}
	if err := load(t, c, ociRepo, "hello", "3.0.0"); err == nil || !strings.Contains(err.Error(), reg.Host+"/charts/hello:3.0.0") {
		t.Errorf("missing tag: %v", err)
	}
	// Without credentials the registry refuses.
	if err := load(t, newCache(t, t.TempDir(), clock, "", ""), ociRepo, "hello", "0.1.0"); err == nil {
		t.Error("a pull without credentials must fail")
	}
	// Cached: with the registry gone, loads within the refresh bound still work.
	reg.Close()
	for i := 0; i < 3; i++ {
		if err := load(t, c, ociRepo, "hello", "0.1.0"); err != nil {
			t.Fatalf("cached OCI chart with the registry down: %v", err)
		}
	}
}
