package releasetest

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/autox-dev/autox/helmops"
	"github.com/autox-dev/autox/internal/format"
	"github.com/autox-dev/autox/internal/testenv"
)

// Scene is one test's corner of a shared test cluster: a namespace of its
// own, a directory for its config files, the repository's test charts, and
// a Helm manager with admin rights that the assertions read releases with.
// The end-to-end tests (e2e) and the controller's integration tests
// (triggers) both build on it, so that a test reads the same in both.
type Scene struct {
	Cluster *testenv.Cluster
	NS      string
	Dir     string
	Charts  string
	Helm    *helmops.Manager
	// Patience bounds every wait: a bound for a broken build, not a
	// performance goal.
	Patience time.Duration
	t        *testing.T
}

// NewScene gives t a namespace of cluster, cleaned up after the test.
func NewScene(t *testing.T, cluster *testenv.Cluster, patience time.Duration) *Scene {
	t.Helper()
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	m, err := helmops.New(helmops.Options{RESTConfig: cluster.Config, Timeout: time.Minute, MaxHistory: 10, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	return &Scene{Cluster: cluster, NS: cluster.Namespace(t), Dir: t.TempDir(), Charts: filepath.Join(root, "testdata", "charts"),
		Helm: m, Patience: patience, t: t}
}

// WriteConfigAs renders a config template ({{.NS}}, {{.Charts}}) to a file of
// the scene's directory and returns its path.
func (s *Scene) WriteConfigAs(name, text string) string {
	s.t.Helper()
	return testenv.WriteConfig(s.t, s.Dir, name, text, s.NS, s.Charts)
}

// WriteConfig is WriteConfigAs to config.yaml.
func (s *Scene) WriteConfig(text string) string {
	s.t.Helper()
	return s.WriteConfigAs("config.yaml", text)
}

// Deployment creates a Deployment with these labels in the scene's namespace.
func (s *Scene) Deployment(name string, labels map[string]string) {
	s.t.Helper()
	s.Cluster.CreateDeployment(s.t, s.NS, name, labels)
}

// Relabel replaces the labels of a Deployment of the scene.
func (s *Scene) Relabel(name string, labels map[string]string) {
	s.t.Helper()
	s.Cluster.Relabel(s.t, s.NS, name, labels)
}

// Releases reads the releases of the scene's namespace.
func (s *Scene) Releases() Releases {
	return Releases{T: s.t, Helm: s.Helm, Namespace: s.NS, Patience: s.Patience}
}

// Release is the release of that name, nil when there is none.
func (s *Scene) Release(name string) *format.Release {
	s.t.Helper()
	return s.Releases().Get(name)
}

// WaitRelease polls the release until cond holds and returns it.
func (s *Scene) WaitRelease(name, what string, cond func(*format.Release) bool) *format.Release {
	s.t.Helper()
	return s.Releases().Wait(name, what, cond)
}

// Version is the default trigger label at value v.
func Version(v string) map[string]string { return map[string]string{"app.kubernetes.io/version": v} }

// WebSpec is a config template with one spec, web, whose trigger is the
// Deployment web of the scene's namespace, and the given release specs
// (YAML lines indented by 6 spaces).
func WebSpec(releaseSpecs string) string {
	return `
namespaces: [{{.NS}}]
specs:
  web:
    trigger: {group: apps, version: v1, resource: deployments, name: web, namespace: {{.NS}}}
    releaseSpecs:
` + releaseSpecs
}
