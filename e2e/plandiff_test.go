package e2e

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/autox-dev/autox/internal/testenv"
)

// planDiffConfig has one release spec per kind of chart source, each of
// the secretive chart (a Secret of .Values.password, a ConfigMap showing
// greeting and apiKey); the local one takes its password and apiKey from
// Secret sources.
const planDiffConfig = `
namespaces: [{{.NS}}]
specs:
  web:
    trigger: {group: apps, version: v1, resource: deployments, name: web, namespace: {{.NS}}}
    releaseSpecs:
      local:
        chart: {path: {{.Charts}}/secretive}
        values: {greeting: GREETING}
        valuesFrom:
          - {kind: Secret, name: creds, key: values.yaml}
          - {kind: Secret, name: pw, key: password, targetPath: password}
      http: {chart: {repo: REPO, name: secretive, version: "0.1.0"}, values: {greeting: GREETING, password: http-pass-word}}
      oci: {chart: {repo: OCI, name: secretive, version: "0.1.0"}, values: {greeting: GREETING}}
`

// TestPlanDiff: plan --diff on a pull request's changes (a value in the
// config, Secret sources changed) shows each changed line of the three
// releases (local, http repository and OCI charts), Secret data as
// <redacted>, never a value of a Secret source, old or new, in the text or
// the JSON; it exits as plan does, and writes nothing (the audit log).
func TestPlanDiff(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	ca, repo := httpsRepo(t, "ci", "s3cret", "secretive")
	reg, err := testenv.NewOCIRegistry(t.TempDir(), ca, "ci", "r3g")
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	if err := reg.Push("experiments", "secretive"); err != nil {
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
	chartFlags := []string{"--repository-config", repoConfig, "--registry-config", registryConfig, "--cache-dir", filepath.Join(dir, "cache")}
	config := func(file, greeting string) string {
		r := strings.NewReplacer("GREETING", greeting, "REPO", repo.URL, "OCI", "oci://"+reg.Host+"/experiments")
		return e.WriteConfigAs(file, r.Replace(planDiffConfig))
	}
	env := []string{"SSL_CERT_FILE=" + ca.File}

	e.Deployment("web", version("1.0.0"))
	e.putSecret("creds", map[string]string{"values.yaml": "apiKey: sk-old-api-key-1\n"})
	e.putSecret("pw", map[string]string{"password": "old-pass-word-1"})
	before := config("before.yaml", "hello-before")
	p := testenv.StartProcessEnv(t, env, autox, e.runArgs(before, chartFlags...)...)
	for _, r := range []string{"web-local", "web-http", "web-oci"} {
		e.WaitRelease(r, "installed", deployedAt(1))
	}
	p.Stop(patience)

	// The pull request: a new greeting; the Secrets changed meanwhile.
	after := config("after.yaml", "hello-after")
	e.putSecret("creds", map[string]string{"values.yaml": "apiKey: sk-new-api-key-2\n"})
	e.putSecret("pw", map[string]string{"password": "new-pass-word-2"})
	secrets := []string{"sk-old-api-key-1", "sk-new-api-key-2", "old-pass-word-1", "new-pass-word-2", "http-pass-word"}

	writes := func() int {
		t.Helper()
		ws, err := cluster.Writes(func(w testenv.Write) bool { return w.User != "system:apiserver" })
		if err != nil {
			t.Fatal(err)
		}
		return len(ws)
	}
	writesBefore := writes()
	planArgs := func(extra ...string) []string {
		return append(append([]string{"plan", "--config", after, "--diff", "--kubeconfig", cluster.Kubeconfig}, chartFlags...), extra...)
	}
	runPlan := func(wantCode int, extra ...string) *testenv.Process {
		t.Helper()
		p := testenv.StartCommandEnv(t, env, autox, planArgs(extra...)...)
		code, err := p.Wait(patience)
		if err != nil || code != wantCode {
			t.Fatalf("plan %v: exit %d (want %d), %v\n%s", extra, code, wantCode, err, p.Output())
		}
		return p
	}
	text := runPlan(0).Output()
	for _, r := range []string{"web-local", "web-http", "web-oci"} {
		if !strings.Contains(text, "# upgrade release "+e.NS+"/"+r+" ") {
			t.Errorf("no diff header for %s:\n%s", r, text)
		}
	}
	for _, want := range []string{
		"--- a/v1 ConfigMap web-local\n", "+++ b/v1 ConfigMap web-local\n",
		`-  greeting: hello-before` + "\n", `+  greeting: hello-after` + "\n",
		"-data: <redacted>\n", "+data: <redacted> (changed)\n", // the local release's password changed
		"-  apiKey: ***\n", "+  apiKey: ***\n", // a Secret source's value, masked, old and new
	} {
		if !strings.Contains(text, want) {
			t.Errorf("plan --diff lacks %q:\n%s", want, text)
		}
	}
	jsonOut := runPlan(0, "-o", "json").Stdout()
	var steps []struct {
		Action, Release string
		Diff            *struct {
			Changes []struct{ Object, Change, Diff string }
			Error   string
		}
	}
	if err := json.Unmarshal([]byte(jsonOut), &steps); err != nil {
		t.Fatalf("plan --diff -o json: %v\n%s", err, jsonOut)
	}
	changed := map[string]string{}
	for _, s := range steps {
		if s.Diff == nil || s.Diff.Error != "" {
			t.Errorf("step %s %s: diff %+v", s.Action, s.Release, s.Diff)
			continue
		}
		for _, c := range s.Diff.Changes {
			changed[s.Release+" "+c.Object] = c.Change
			if c.Object == "v1 ConfigMap "+s.Release && !strings.Contains(c.Diff, "+  greeting: hello-after\n") {
				t.Errorf("%s: %s", s.Release, c.Diff)
			}
		}
	}
	// The http release's Secret is unchanged: only its ConfigMap differs.
	if changed["web-http v1 ConfigMap web-http"] != "changed" || changed["web-oci v1 ConfigMap web-oci"] != "changed" ||
		changed["web-local v1 Secret web-local-creds"] != "changed" || changed["web-http v1 Secret web-http-creds"] != "" {
		t.Errorf("changed objects: %v", changed)
	}
	runPlan(2, "--detailed-exitcode")
	for _, out := range []string{text, jsonOut} {
		for _, s := range secrets {
			for _, form := range []string{s, base64.StdEncoding.EncodeToString([]byte(s))} {
				if strings.Contains(out, form) {
					t.Errorf("plan --diff shows %q", form)
				}
			}
		}
	}
	if n := writes() - writesBefore; n != 0 {
		t.Errorf("plan --diff made %d writes", n)
	}

	// Nothing changes: no diff, and exit 0 with --detailed-exitcode.
	e.putSecret("creds", map[string]string{"values.yaml": "apiKey: sk-old-api-key-1\n"})
	e.putSecret("pw", map[string]string{"password": "old-pass-word-1"})
	if out := runPlan(0, "--detailed-exitcode", "--config", before).Output(); strings.Contains(out, "\n# ") {
		t.Errorf("plan --diff of the config in force:\n%s", out)
	}
}
