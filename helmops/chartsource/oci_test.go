package chartsource

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/internal/testenv"
)

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

// TestPlainHTTPRegistry: a registry without TLS is used when, and only
// when, the chart says plainHTTP; asking it over HTTPS fails with an error
// naming the option, and so does asking a TLS registry over plain HTTP.
func TestPlainHTTPRegistry(t *testing.T) {
	dir := t.TempDir()
	reg, err := testenv.NewOCIRegistry(dir, nil, "pusher", "p4ss")
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	if err := reg.Push("charts", "hello"); err != nil {
		t.Fatal(err)
	}
	creds := filepath.Join(dir, "config.json")
	if err := reg.DockerConfig(creds); err != nil {
		t.Fatal(err)
	}
	c := newCache(t, t.TempDir(), &fakeClock{t: time.Now()}, "", creds)
	ref := config.Chart{Repo: "oci://" + reg.Host + "/charts", Name: "hello", Version: "0.1.0"}
	_, err = loadRef(t, c, ref)
	wantErr(t, "a plain-HTTP registry asked over HTTPS", err, reg.Host+"/charts/hello:0.1.0", "chart.plainHTTP: true")
	ref.PlainHTTP = true
	if _, err := loadRef(t, c, ref); err != nil {
		t.Fatalf("plainHTTP pull: %v", err)
	}

	tlsReg, err := testenv.NewOCIRegistry(t.TempDir(), testCA, "pusher", "p4ss")
	if err != nil {
		t.Fatal(err)
	}
	defer tlsReg.Close()
	if err := tlsReg.Push("charts", "hello"); err != nil {
		t.Fatal(err)
	}
	tlsCreds := filepath.Join(t.TempDir(), "config.json")
	if err := tlsReg.DockerConfig(tlsCreds); err != nil {
		t.Fatal(err)
	}
	ref.Repo = "oci://" + tlsReg.Host + "/charts"
	_, err = loadRef(t, newCache(t, t.TempDir(), &fakeClock{t: time.Now()}, "", tlsCreds), ref)
	wantErr(t, "a TLS registry asked over plain HTTP", err, tlsReg.Host+"/charts/hello:0.1.0", "remove plainHTTP")
}
