package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/autox-dev/autox/internal/format"
	"github.com/autox-dev/autox/internal/testenv"
)

// httpsRepo serves the named testdata charts over HTTPS, with basic auth
// when user is set, until the test ends. Its certificate is from the CA it
// returns.
func httpsRepo(t *testing.T, user, password string, charts ...string) (*testenv.CA, *testenv.ChartRepo) {
	t.Helper()
	ca, err := testenv.NewCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	repo, err := testenv.NewChartRepo(t.TempDir(), ca, user, password, charts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(repo.Close)
	return ca, repo
}

// TestRepositoryAndOCICharts runs releases from a private HTTPS Helm
// repository and a private OCI registry, trusted through SSL_CERT_FILE and
// authenticated through --repository-config and --registry-config.
func TestRepositoryAndOCICharts(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	ca, repo := httpsRepo(t, "ci", "s3cret", "hello", "hello-v2")
	reg, err := testenv.NewOCIRegistry(t.TempDir(), ca, "ci", "r3g")
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	if err := reg.Push("experiments", "hello", "hello-v2"); err != nil {
		t.Fatal(err)
	}
	repoConfig := filepath.Join(dir, "repositories.yaml")
	if err := os.WriteFile(repoConfig, []byte("apiVersion: v1\nrepositories:\n- name: charts\n  url: "+repo.URL+"\n  username: ci\n  password: s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	registryConfig := filepath.Join(dir, "config.json")
	if err := reg.DockerConfig(registryConfig); err != nil {
		t.Fatal(err)
	}

	e.Deployment("web", version("1.0.0"))
	cfgText := func(v string) string {
		return e.render(webSpec(`      http: {chart: {repo: ` + repo.URL + `, name: hello, version: "` + v + `"}}
      oci: {chart: {repo: oci://` + reg.Host + `/experiments, name: hello, version: "` + v + `"}}
      local: {chart: {path: {{.Charts}}/hello}}
`))
	}
	k := testenv.NewKubeletDir(t, "config.yaml", cfgText("0.1.0"))
	p := testenv.StartProcessEnv(t, []string{"SSL_CERT_FILE=" + ca.File}, autox, e.runArgs(k.Path(), "--resync", "1s",
		"--repository-config", repoConfig, "--registry-config", registryConfig, "--cache-dir", filepath.Join(dir, "cache"),
		"--config-debounce", "50ms")...)
	for _, r := range []string{"web-http", "web-oci", "web-local"} {
		e.WaitRelease(r, "installed", deployedAt(1))
	}
	// Several passes with nothing changed: no chart download, no index fetch.
	before := repo.TotalRequests()
	e.waitPasses(p, len(p.Output()), 3)
	if after := repo.TotalRequests(); after != before {
		t.Errorf("passes with nothing changed made %d repository requests", after-before)
	}
	if d := repo.Requests("/hello-0.1.0.tgz"); d != 1 {
		t.Errorf("the chart was downloaded %d times, want once", d)
	}

	// A version bump in the config upgrades both.
	k.Update(cfgText("0.2.0"))
	for _, r := range []string{"web-http", "web-oci"} {
		if rel := e.WaitRelease(r, "upgraded", deployedAt(2)); rel.ChartVersion != "0.2.0" {
			t.Errorf("%s chart version %s", r, rel.ChartVersion)
		}
	}

	// The repository goes down and the trigger gets a new version: the
	// charts are cached, so every release still upgrades. Then a version never
	// fetched fails for that release spec only, and its release stays as it is.
	repo.SetDown(true)
	k.Update(cfgText("0.2.0") + "# repository down\n")
	e.Relabel("web", version("2.0.0"))
	for _, r := range []string{"web-http", "web-oci", "web-local"} {
		e.WaitRelease(r, "upgraded with cached charts while the repository is down", func(rel *format.Release) bool {
			return rel != nil && rel.Revision >= 2 && labelOf(rel) == "2.0.0"
		})
	}
	k.Update(strings.Replace(cfgText("0.2.0"), `repo: `+repo.URL+`, name: hello, version: "0.2.0"`, `repo: `+repo.URL+`, name: hello, version: "0.1.0+missing"`, 1))
	// Two passes after the failure was first reported: at least one whole
	// pass, which retries the failing spec, came after it.
	e.waitPasses(p, e.waitLog(p, "has no version 0.1.0+missing in repository "+repo.URL), 2)
	if rel := e.Release("web-http"); rel == nil || rel.ChartVersion != "0.2.0" || labelOf(rel) != "2.0.0" {
		t.Errorf("the release whose chart is unavailable changed: %+v", rel)
	}
	if strings.Contains(p.Output(), "s3cret") || strings.Contains(p.Output(), "r3g") {
		t.Error("a credential appeared in the log")
	}
	p.Stop(patience)
}

// TestLocalChartsRelativeToTheConfig runs charts named by paths relative to
// the config file's directory, as a ConfigMap mounted next to its charts
// would: a chart directory and a packaged .tgz. autox runs in another
// directory (the e2e package's, which has no charts/), so a path taken
// relative to the working directory fails.
func TestLocalChartsRelativeToTheConfig(t *testing.T) {
	e := newEnv(t)
	charts := filepath.Join(e.Dir, "charts")
	if err := os.CopyFS(filepath.Join(charts, "hello"), os.DirFS(filepath.Join(e.Charts, "hello"))); err != nil {
		t.Fatal(err)
	}
	tgz, err := testenv.PackageCharts(charts, "hello-v2")
	if err != nil {
		t.Fatal(err)
	}
	e.Deployment("web", version("1.0.0"))
	cfg := e.WriteConfig(webSpec(`      dir: {chart: {path: charts/hello}}
      tgz: {chart: {path: charts/` + filepath.Base(tgz[0]) + `}}
`))
	p := e.run(cfg)
	if r := e.WaitRelease("web-dir", "installed from a relative chart directory", deployedAt(1)); r.ChartVersion != "0.1.0" {
		t.Errorf("web-dir chart version %s, want 0.1.0", r.ChartVersion)
	}
	if r := e.WaitRelease("web-tgz", "installed from a relative .tgz", deployedAt(1)); r.ChartVersion != "0.2.0" {
		t.Errorf("web-tgz chart version %s, want 0.2.0", r.ChartVersion)
	}
	e.Relabel("web", version("2.0.0"))
	e.WaitRelease("web-dir", "upgraded", deployedAt(2))
	e.WaitRelease("web-tgz", "upgraded", deployedAt(2))
	if code := p.Stop(patience); code != 0 {
		t.Fatalf("exit code %d", code)
	}

	// A restart finds both in sync through the same relative paths.
	p = e.run(cfg)
	e.waitPasses(p, 0, 2)
	if code := p.Stop(patience); code != 0 {
		t.Fatalf("restart: exit code %d", code)
	}
	if strings.Contains(p.Output(), `"message":"release `) {
		t.Errorf("the restart made a Helm write:\n%s", p.Output())
	}
}

// writeRepositories writes a Helm repositories.yaml with one repository the
// way a mounted Secret changes: a new file renamed over the old.
func writeRepositories(t *testing.T, path, url, user, password string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte("apiVersion: v1\nrepositories:\n- name: charts\n  url: "+url+"\n  username: "+user+"\n  password: "+password+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// TestRotatedRepositoryCredentials rotates the password of a private HTTPS
// repository while autox runs: the repository takes the new password at
// once and publishes a new chart version; the config asks for it before the
// mounted repositories.yaml has the new password, which fails (401, nothing
// changes); once the file has it, the next index refresh finds the version
// and the release upgrades, without a restart.
func TestRotatedRepositoryCredentials(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	ca, repo := httpsRepo(t, "ci", "before-rotation", "hello")
	repoConfig := filepath.Join(dir, "repositories.yaml")
	writeRepositories(t, repoConfig, repo.URL, "ci", "before-rotation")

	e.Deployment("web", version("1.0.0"))
	cfgText := func(v string) string {
		return e.render(webSpec(`      http: {chart: {repo: ` + repo.URL + `, name: hello, version: "` + v + `"}}
`))
	}
	k := testenv.NewKubeletDir(t, "config.yaml", cfgText("0.1.0"))
	p := testenv.StartProcessEnv(t, []string{"SSL_CERT_FILE=" + ca.File}, autox, e.runArgs(k.Path(),
		"--repository-config", repoConfig, "--chart-index-refresh", "1s", "--cache-dir", filepath.Join(dir, "cache"),
		"--config-debounce", "50ms")...)
	e.WaitRelease("web-http", "installed", deployedAt(1))

	repo.SetCredentials("ci", "after-rotation")
	if err := repo.Publish("hello-v2"); err != nil {
		t.Fatal(err)
	}
	k.Update(cfgText("0.2.0"))
	e.waitPasses(p, e.waitLog(p, "401 Unauthorized"), 2)
	if r := e.Release("web-http"); r == nil || r.Revision != 1 || r.ChartVersion != "0.1.0" {
		t.Fatalf("the release changed while its repository refused the old credentials: %+v", r)
	}

	writeRepositories(t, repoConfig, repo.URL, "ci", "after-rotation")
	if r := e.WaitRelease("web-http", "upgraded with the rotated credentials", deployedAt(2)); r.ChartVersion != "0.2.0" {
		t.Errorf("chart version %s, want 0.2.0", r.ChartVersion)
	}
	if strings.Contains(p.Output(), "before-rotation") || strings.Contains(p.Output(), "after-rotation") {
		t.Error("a credential appeared in the log")
	}
	if code := p.Stop(patience); code != 0 {
		t.Errorf("exit code %d", code)
	}
}

// TestUntrustedRepositoryCA runs a release from an HTTPS repository whose CA
// autox does not trust (no SSL_CERT_FILE, no caFile): the release spec fails
// with a TLS error naming the repository, nothing is installed from it, and
// the spec's other release spec and another spec go on.
func TestUntrustedRepositoryCA(t *testing.T) {
	e := newEnv(t)
	_, repo := httpsRepo(t, "", "", "hello")
	e.Deployment("web", version("1.0.0"))
	e.Deployment("db", version("1.0.0"))
	cfg := e.WriteConfig(webSpec(`      http: {chart: {repo: ` + repo.URL + `, name: hello, version: "0.1.0"}}
      local: {chart: {path: {{.Charts}}/hello}}
  db:
    trigger: {group: apps, version: v1, resource: deployments, name: db, namespace: {{.NS}}}
    releaseSpecs:
      hello: {chart: {path: {{.Charts}}/hello}}
`))
	// An empty SSL_CERT_FILE is no file: only the system's trust store.
	p := testenv.StartProcessEnv(t, []string{"SSL_CERT_FILE=", "SSL_CERT_DIR="}, autox, e.runArgs(cfg, "--cache-dir", filepath.Join(t.TempDir(), "cache"))...)
	e.WaitRelease("web-local", "installed beside the failing release spec", deployedAt(1))
	e.WaitRelease("db-hello", "installed beside the failing spec", deployedAt(1))

	refused := regexp.MustCompile(`"error":"[^\n]*` + regexp.QuoteMeta(repo.URL) + `[^\n]*x509: certificate signed by unknown authority`)
	var at int
	testenv.Eventually(t, patience, "a TLS error naming the repository", func() (bool, error) {
		if r := e.Release("web-http"); r != nil {
			t.Fatalf("a release from an untrusted repository: %+v", r)
		}
		loc := refused.FindStringIndex(p.Output())
		if loc != nil {
			at = loc[1]
		}
		return loc != nil, nil
	})
	// Two passes later (at least one whole pass retried the spec), still
	// nothing from the repository, which never served a request.
	e.waitPasses(p, at, 2)
	if r := e.Release("web-http"); r != nil {
		t.Errorf("a release from an untrusted repository: %+v", r)
	}
	if n := repo.TotalRequests(); n != 0 {
		t.Errorf("the untrusted repository served %d requests", n)
	}
	if code := p.Stop(patience); code != 0 {
		t.Errorf("exit code %d", code)
	}
}
