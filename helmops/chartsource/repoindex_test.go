package chartsource

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/autox-dev/autox/internal/testenv"
)

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
