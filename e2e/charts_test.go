package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/autox-dev/autox/helmops"
	"github.com/autox-dev/autox/internal/testenv"
)

// TestRepositoryAndOCICharts runs releases from a private HTTPS Helm
// repository and a private OCI registry, trusted through SSL_CERT_FILE and
// authenticated through --repository-config and --registry-config.
func TestRepositoryAndOCICharts(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	ca, err := testenv.NewCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	repo, err := testenv.NewChartRepo(t.TempDir(), ca, "ci", "s3cret", "hello", "hello-v2")
	if err != nil {
		t.Fatal(err)
	}
	defer repo.Close()
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

	e.deployment("web", version("1.0.0"))
	cfgText := func(v string) string {
		return e.render(`
namespaces: [{{.NS}}]
specs:
  web:
    trigger: {group: apps, version: v1, resource: deployments, name: web, namespace: {{.NS}}}
    releaseSpecs:
      http: {chart: {repo: ` + repo.URL + `, name: hello, version: "` + v + `"}}
      oci: {chart: {repo: oci://` + reg.Host + `/experiments, name: hello, version: "` + v + `"}}
      local: {chart: {path: {{.Charts}}/hello}}
`)
	}
	k := testenv.NewKubeletDir(t, "config.yaml", cfgText("0.1.0"))
	p := testenv.StartProcessEnv(t, []string{"SSL_CERT_FILE=" + ca.File}, autox, e.runArgs(k.Path(), "--resync", "1s",
		"--repository-config", repoConfig, "--registry-config", registryConfig, "--cache-dir", filepath.Join(dir, "cache"),
		"--config-debounce", "50ms")...)
	for _, r := range []string{"web-http", "web-oci", "web-local"} {
		e.waitRelease(r, "installed", deployedAt(1))
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
		if rel := e.waitRelease(r, "upgraded", deployedAt(2)); rel.ChartVersion != "0.2.0" {
			t.Errorf("%s chart version %s", r, rel.ChartVersion)
		}
	}

	// The repository goes down and the trigger gets a new version: the
	// charts are cached, so every release still upgrades. Then a version never
	// fetched fails for that release spec only, and its release stays as it is.
	repo.SetDown(true)
	k.Update(cfgText("0.2.0") + "# repository down\n")
	e.relabel("web", version("2.0.0"))
	for _, r := range []string{"web-http", "web-oci", "web-local"} {
		e.waitRelease(r, "upgraded with cached charts while the repository is down", func(rel *helmops.Release) bool {
			return rel != nil && rel.Revision >= 2 && labelOf(rel) == "2.0.0"
		})
	}
	k.Update(strings.Replace(cfgText("0.2.0"), `repo: `+repo.URL+`, name: hello, version: "0.2.0"`, `repo: `+repo.URL+`, name: hello, version: "0.1.0+missing"`, 1))
	// Two passes after the failure was first reported: at least one whole
	// pass, which retries the failing spec, came after it.
	e.waitPasses(p, e.waitLog(p, "has no version 0.1.0+missing in repository "+repo.URL), 2)
	if rel := e.release("web-http"); rel == nil || rel.ChartVersion != "0.2.0" || labelOf(rel) != "2.0.0" {
		t.Errorf("the release whose chart is unavailable changed: %+v", rel)
	}
	if strings.Contains(p.Output(), "s3cret") || strings.Contains(p.Output(), "r3g") {
		t.Error("a credential appeared in the log")
	}
	p.Stop(patience)
}
