package testenv

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/distribution/distribution/v3/configuration"
	dregistry "github.com/distribution/distribution/v3/registry"
	_ "github.com/distribution/distribution/v3/registry/auth/htpasswd"           // registers the htpasswd access controller
	_ "github.com/distribution/distribution/v3/registry/storage/driver/inmemory" // registers the inmemory storage driver
	"github.com/sirupsen/logrus"
	"go.opentelemetry.io/otel"
	"golang.org/x/crypto/bcrypt"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	"helm.sh/helm/v4/pkg/registry"
)

// CA is a test certificate authority with one server certificate for 127.0.0.1.
type CA struct {
	// File is the CA certificate in PEM, for SSL_CERT_FILE or a caFile.
	File              string
	CertFile, KeyFile string
	ServerCert        tls.Certificate
	pool              *x509.CertPool
}

// NewCA writes a CA and a 127.0.0.1 server certificate into dir.
func NewCA(dir string) (*CA, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "autox test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	ca := &CA{File: filepath.Join(dir, "ca.pem"), CertFile: filepath.Join(dir, "server.pem"), KeyFile: filepath.Join(dir, "server-key.pem")}
	write := func(path, typ string, b []byte) error {
		return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b}), 0o600)
	}
	if err := errors.Join(write(ca.File, "CERTIFICATE", caDER), write(ca.CertFile, "CERTIFICATE", der), write(ca.KeyFile, "EC PRIVATE KEY", keyDER)); err != nil {
		return nil, err
	}
	if ca.ServerCert, err = tls.LoadX509KeyPair(ca.CertFile, ca.KeyFile); err != nil {
		return nil, err
	}
	ca.pool = x509.NewCertPool()
	ca.pool.AddCert(caCert)
	return ca, nil
}

// PackageCharts packages the named charts of testdata/charts into dir as .tgz
// files, with Helm's own chartutil, and returns their paths.
func PackageCharts(dir string, names ...string) ([]string, error) {
	root, err := ModuleRoot()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, n := range names {
		ch, err := loader.Load(filepath.Join(root, "testdata", "charts", n))
		if err != nil {
			return nil, err
		}
		p, err := chartutil.Save(ch, dir)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// ChartRepo is a real Helm HTTP repository on 127.0.0.1: an index.yaml made
// by Helm's repo package and the packaged charts, served with optional basic
// auth and TLS. It counts the requests it serves.
type ChartRepo struct {
	URL    string
	Dir    string
	server *httptest.Server
	down   atomic.Bool

	mu       sync.Mutex
	user     string
	password string
	requests map[string]int
}

// NewChartRepo serves the named testdata charts. With user set, every request
// needs basic auth; with ca set, it serves HTTPS with ca's server certificate.
func NewChartRepo(dir string, ca *CA, user, password string, charts ...string) (*ChartRepo, error) {
	r := &ChartRepo{Dir: dir, user: user, password: password, requests: map[string]int{}}
	if err := r.Publish(charts...); err != nil {
		return nil, err
	}
	files := http.FileServer(http.Dir(dir))
	r.server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.requests[req.URL.Path]++
		user, password := r.user, r.password
		r.mu.Unlock()
		if r.down.Load() {
			http.Error(w, "repository down for a test", http.StatusServiceUnavailable)
			return
		}
		if user != "" {
			u, p, ok := req.BasicAuth()
			if !ok || u != user || p != password {
				w.Header().Set("WWW-Authenticate", `Basic realm="charts"`)
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
		}
		files.ServeHTTP(w, req)
	}))
	if ca != nil {
		r.server.TLS = &tls.Config{Certificates: []tls.Certificate{ca.ServerCert}, MinVersion: tls.VersionTLS12}
		r.server.StartTLS()
	} else {
		r.server.Start()
	}
	r.URL = r.server.URL
	return r, nil
}

// Publish adds the named testdata charts to the repository and writes its
// index again (atomically: a client never reads half an index).
func (r *ChartRepo) Publish(charts ...string) error {
	if _, err := PackageCharts(r.Dir, charts...); err != nil {
		return err
	}
	return r.Reindex()
}

// SetCredentials changes the basic auth credentials the repository takes,
// at once, as a rotated password does.
func (r *ChartRepo) SetCredentials(user, password string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.user, r.password = user, password
}

// Requests returns how many requests path got (e.g. "/index.yaml").
func (r *ChartRepo) Requests(path string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.requests[path]
}

// TotalRequests returns how many requests the repository got.
func (r *ChartRepo) TotalRequests() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, c := range r.requests {
		n += c
	}
	return n
}

// SetDown makes every request fail with 503 (true) or be served again.
func (r *ChartRepo) SetDown(down bool) { r.down.Store(down) }

// Close stops the server.
func (r *ChartRepo) Close() { r.server.Close() }

// OCIRegistry is a real OCI registry (distribution/v3, as Helm's own tests
// use) on 127.0.0.1 with TLS and htpasswd basic auth.
type OCIRegistry struct {
	// Host is host:port, as used in oci:// references.
	Host     string
	reg      *dregistry.Registry
	done     chan error
	User     string
	Password string
	ca       *CA
	tracing  shutdowner
}

type shutdowner interface{ Shutdown(context.Context) error }

// NewOCIRegistry starts a registry with TLS from ca and one user; with a
// nil ca, one that speaks plain HTTP (an in-cluster registry without TLS).
func NewOCIRegistry(dir string, ca *CA, user, password string) (*OCIRegistry, error) {
	hash, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.MinCost)
	if err != nil {
		return nil, err
	}
	htpasswd := filepath.Join(dir, "htpasswd")
	if err := os.WriteFile(htpasswd, []byte(user+":"+string(hash)+"\n"), 0o600); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	// The registry logs every 404 of a push probe and would export traces to
	// an OpenTelemetry collector on localhost: neither is wanted in tests.
	logrus.SetOutput(io.Discard)
	os.Setenv("OTEL_TRACES_EXPORTER", "none")

	cfg := &configuration.Configuration{}
	cfg.HTTP.Addr = addr
	cfg.HTTP.DrainTimeout = time.Second
	if ca != nil {
		cfg.HTTP.TLS.Certificate = ca.CertFile
		cfg.HTTP.TLS.Key = ca.KeyFile
	}
	cfg.Storage = map[string]configuration.Parameters{
		"inmemory": map[string]interface{}{},
		// The upload purger is a goroutine nothing stops.
		"maintenance": map[string]interface{}{"uploadpurging": map[interface{}]interface{}{"enabled": false}},
	}
	cfg.Auth = configuration.Auth{"htpasswd": configuration.Parameters{"realm": "autox-test", "path": htpasswd}}
	cfg.Log.Level = "error"
	cfg.Log.AccessLog.Disabled = true
	reg, err := dregistry.NewRegistry(context.Background(), cfg)
	if err != nil {
		return nil, err
	}
	o := &OCIRegistry{Host: addr, reg: reg, done: make(chan error, 1), User: user, Password: password, ca: ca}
	// NewRegistry installs a global OpenTelemetry tracer provider whose span
	// processor runs until it is shut down; the registry never does that.
	if tp, ok := otel.GetTracerProvider().(shutdowner); ok {
		o.tracing = tp
	}
	go func() { o.done <- reg.ListenAndServe() }()
	// Wait until it accepts connections.
	for i := 0; ; i++ {
		var c net.Conn
		if ca != nil {
			c, err = tls.Dial("tcp", addr, &tls.Config{RootCAs: ca.pool, MinVersion: tls.VersionTLS12})
		} else {
			c, err = net.Dial("tcp", addr)
		}
		if err == nil {
			c.Close()
			break
		}
		if i > 100 {
			o.Close()
			return nil, fmt.Errorf("registry did not start on %s: %w", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return o, nil
}

// Push packages the named testdata charts and pushes them under
// oci://Host/<path>/<name>:<version>.
func (o *OCIRegistry) Push(path string, charts ...string) error {
	dir, err := os.MkdirTemp("", "autox-push-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	tgzs, err := PackageCharts(dir, charts...)
	if err != nil {
		return err
	}
	for _, t := range tgzs {
		if _, err := o.PushArchive(path, t, nil); err != nil {
			return err
		}
	}
	return nil
}

// PushArchive pushes a packaged chart, with prov as its provenance layer
// when not nil, under oci://Host/<path>/<name>:<version> of its Chart.yaml
// (a tag already there moves to it), and returns the manifest digest.
func (o *OCIRegistry) PushArchive(path, tgz string, prov []byte) (string, error) {
	clientOpts := []registry.ClientOption{
		registry.ClientOptBasicAuth(o.User, o.Password),
		registry.ClientOptWriter(devNull{}),
		registry.ClientOptCredentialsFile(filepath.Join(os.TempDir(), "autox-test-no-credentials.json")),
	}
	if o.ca != nil {
		clientOpts = append(clientOpts, registry.ClientOptHTTPClient(&http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: o.ca.pool, MinVersion: tls.VersionTLS12}}}))
	} else {
		clientOpts = append(clientOpts, registry.ClientOptPlainHTTP())
	}
	client, err := registry.NewClient(clientOpts...)
	if err != nil {
		return "", err
	}
	ch, err := loader.Load(tgz)
	if err != nil {
		return "", err
	}
	data, err := os.ReadFile(tgz)
	if err != nil {
		return "", err
	}
	var opts []registry.PushOption
	if prov != nil {
		opts = append(opts, registry.PushOptProvData(prov))
	}
	ref := fmt.Sprintf("%s/%s/%s:%s", o.Host, strings.Trim(path, "/"), ch.Metadata.Name, ch.Metadata.Version)
	res, err := client.Push(data, ref, opts...)
	if err != nil {
		return "", fmt.Errorf("push %s: %w", ref, err)
	}
	return res.Manifest.Digest, nil
}

// DockerConfig writes a docker config.json with this registry's credentials.
func (o *OCIRegistry) DockerConfig(path string) error {
	auth := base64Std(o.User + ":" + o.Password)
	return os.WriteFile(path, []byte(fmt.Sprintf(`{"auths":{%q:{"auth":%q}}}`, o.Host, auth)), 0o600)
}

// Close stops the registry.
func (o *OCIRegistry) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = o.reg.Shutdown(ctx)
	select {
	case <-o.done:
	case <-ctx.Done():
	}
	if o.tracing != nil {
		_ = o.tracing.Shutdown(ctx)
	}
}

type devNull struct{}

func (devNull) Write(p []byte) (int, error) { return len(p), nil }

func base64Std(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
