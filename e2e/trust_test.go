package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/autox-dev/autox/internal/testenv"
)

// TestPinnedAndVerifiedCharts runs the binary with an OCI chart pinned by
// its digest and a signed local archive with verify: true and
// --chart-keyring or a chart.keyring Secret: all install, and plan shows
// them pinned and verified.
// Then the tag is re-pushed with another chart and the archive is tampered
// with (its .prov kept), and a values change asks for upgrades: both fail,
// naming the digests and the verification, and neither release changes.
func TestPinnedAndVerifiedCharts(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	ca, err := testenv.NewCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	reg, err := testenv.NewOCIRegistry(t.TempDir(), ca, "ci", "r3g")
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	tgzs, err := testenv.PackageCharts(t.TempDir(), "hello")
	if err != nil {
		t.Fatal(err)
	}
	pin, err := reg.PushArchive("experiments", tgzs[0], nil)
	if err != nil {
		t.Fatal(err)
	}
	registryConfig := filepath.Join(dir, "config.json")
	if err := reg.DockerConfig(registryConfig); err != nil {
		t.Fatal(err)
	}
	signer, err := testenv.NewSigner("charts")
	if err != nil {
		t.Fatal(err)
	}
	keyring := filepath.Join(dir, "pubring.gpg")
	if err := os.WriteFile(keyring, signer.Keyring, 0o600); err != nil {
		t.Fatal(err)
	}
	local, err := testenv.PackageCharts(t.TempDir(), "hello")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := signer.Sign(local[0]); err != nil {
		t.Fatal(err)
	}

	// The keyring Secret of the keyed release spec, read with autox's identity.
	keys := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "chart-keys"}, Data: map[string][]byte{"pubring.gpg": signer.Keyring}}
	if _, err := cluster.Client.CoreV1().Secrets(e.NS).Create(context.Background(), keys, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.Deployment("web", version("1.0.0"))
	cfgText := func(greeting string) string {
		return e.render(webSpec(`      pinned: {chart: {repo: oci://` + reg.Host + `/experiments, name: hello, version: "0.1.0", digest: "` + pin + `"}, values: {greeting: ` + greeting + `}}
      signed: {chart: {path: ` + local[0] + `, verify: true}, values: {greeting: ` + greeting + `}}
      keyed: {chart: {path: ` + local[0] + `, verify: true, keyring: {secretName: chart-keys}}, values: {greeting: ` + greeting + `}}
`))
	}
	k := testenv.NewKubeletDir(t, "config.yaml", cfgText("hi"))
	flags := []string{"--registry-config", registryConfig, "--cache-dir", filepath.Join(dir, "cache"), "--chart-keyring", keyring}
	p := testenv.StartProcessEnv(t, []string{"SSL_CERT_FILE=" + ca.File}, autox, e.runArgs(k.Path(), append(flags, "--config-debounce", "50ms")...)...)
	for _, r := range []string{"web-pinned", "web-signed", "web-keyed"} {
		e.WaitRelease(r, "installed", deployedAt(1))
	}
	var steps []struct {
		Release                    string
		ChartPinned, ChartVerified bool
	}
	if err := json.Unmarshal([]byte(e.cliStdout(0, "plan", "--config", k.Path(), "-o", "json", "--chart-keyring", keyring)), &steps); err != nil {
		t.Fatal(err)
	}
	for _, s := range steps {
		if s.ChartPinned != (s.Release == "web-pinned") || s.ChartVerified != (s.Release != "web-pinned") {
			t.Errorf("plan: %s pinned %v verified %v", s.Release, s.ChartPinned, s.ChartVerified)
		}
	}

	edited, err := testenv.PackageEdited(t.TempDir(), "hello", testenv.ChangeTemplates)
	if err != nil {
		t.Fatal(err)
	}
	repushed, err := reg.PushArchive("experiments", edited, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := testenv.PackageEdited(filepath.Dir(local[0]), "hello", testenv.ChangeTemplates); err != nil { // the .prov stays
		t.Fatal(err)
	}
	k.Update(cfgText("changed"))
	end := e.waitLog(p, "now names "+repushed+", but chart.digest pins "+pin)
	end2 := e.waitLog(p, "fails verification with the keyring "+keyring)
	end3 := e.waitLog(p, "fails verification with the keyring Secret "+e.NS+"/chart-keys key pubring.gpg")
	e.waitPasses(p, max(end, end2, end3), 2)
	for _, r := range []string{"web-pinned", "web-signed", "web-keyed"} {
		if rel := e.Release(r); rel == nil || rel.Revision != 1 || rel.Status != "deployed" {
			t.Errorf("%s changed after its chart was refused: %+v", r, rel)
		}
	}
	if _, events := e.events("web"); !strings.Contains(events, "chart.digest pins "+pin) {
		t.Errorf("no Event names the pin:\n%s", events)
	}
	p.Stop(patience)
}
