// Package testenv starts the real control plane (kube-apiserver and etcd,
// built by scripts/controlplane.sh) for autox's integration and end-to-end
// tests, with controller-runtime's envtest. It is test support only.
package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// ModuleRoot returns the directory of autox's go.mod, found from the working
// directory (go test runs each package in its own directory).
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if data, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && bytes.Contains(data, []byte("module github.com/autox-dev/autox\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("cannot find autox's go.mod above the working directory")
		}
		dir = parent
	}
}

// Assets returns the directory holding kube-apiserver and etcd:
// $KUBEBUILDER_ASSETS, else what scripts/controlplane.sh builds or has cached.
func Assets() (string, error) {
	if d := os.Getenv("KUBEBUILDER_ASSETS"); d != "" {
		return d, nil
	}
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	cmd := exec.Command("bash", filepath.Join(root, "scripts", "controlplane.sh"))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("cannot build the control plane with scripts/controlplane.sh: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// Cluster is a running kube-apiserver with its etcd.
type Cluster struct {
	Env    *envtest.Environment
	Config *rest.Config
	Client kubernetes.Interface
	// Kubeconfig is a file with admin credentials, for the autox binary.
	Kubeconfig string
	// AuditLog is the API server's audit log of writes, "" unless started
	// with StartAudited (see audit.go).
	AuditLog string
	dir      string
	assets   string
	auditDir string
	// apiDir holds kube-apiserver's certificates and keys: ours, not
	// envtest's temporary one, so that a restart keeps them (see
	// RestartAPIServer).
	apiDir string
}

// Start starts a control plane. Stop must be called; it stops both
// processes envtest started, by their process ids.
func Start() (*Cluster, error) { return start(false) }

// StartAudited starts a control plane of its own for a test that restarts
// it, keeping an audit log of writes (Cluster.Writes). Stop must be called.
func StartAudited() (*Cluster, error) { return start(true) }

func start(audited bool) (*Cluster, error) {
	assets, err := Assets()
	if err != nil {
		return nil, err
	}
	reapOrphans(assets)
	// envtest logs through controller-runtime's logger; unset, its first
	// use prints a warning with a stack to stderr (the bench, the demo).
	ctrllog.SetLogger(logr.Discard())
	env := &envtest.Environment{BinaryAssetsDirectory: assets, ControlPlaneStopTimeout: 30 * time.Second}
	// Room for thousands of Services (the test chart has one): the default
	// range has 254 addresses. Nothing is routed; the API server only allocates.
	env.ControlPlane.GetAPIServer().Configure().Set("service-cluster-ip-range", "10.0.0.0/16")
	// A certificate directory of our own: envtest keeps it across a stop
	// and start of the API server (it makes new certificates, which no
	// client trusts, only in a directory it made itself).
	apiDir, err := os.MkdirTemp("", "autox-apiserver-")
	if err != nil {
		return nil, err
	}
	env.ControlPlane.GetAPIServer().CertDir = apiDir
	var auditDir, auditLog string
	if audited {
		if auditDir, auditLog, err = configureAudit(env); err != nil {
			os.RemoveAll(apiDir)
			return nil, err
		}
	}
	cfg, err := env.Start()
	if err != nil {
		os.RemoveAll(auditDir)
		os.RemoveAll(apiDir)
		return nil, fmt.Errorf("cannot start kube-apiserver and etcd from %s: %w", assets, err)
	}
	recordChildren(assets)
	c := &Cluster{Env: env, Config: cfg, assets: assets, AuditLog: auditLog, auditDir: auditDir, apiDir: apiDir}
	if err := c.init(); err != nil {
		_ = c.Stop()
		return nil, err
	}
	return c, nil
}

func (c *Cluster) init() error {
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	c.Client = cs
	user, err := c.Env.ControlPlane.AddUser(envtest.User{Name: "autox-test", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return fmt.Errorf("cannot add a kubeconfig user: %w", err)
	}
	kc, err := user.KubeConfig()
	if err != nil {
		return err
	}
	c.dir, err = os.MkdirTemp("", "autox-testenv-")
	if err != nil {
		return err
	}
	c.Kubeconfig = filepath.Join(c.dir, "kubeconfig")
	return os.WriteFile(c.Kubeconfig, kc, 0o600)
}

// Stop stops kube-apiserver and etcd and removes their files.
func (c *Cluster) Stop() error {
	err := c.Env.Stop()
	if err == nil {
		// Another control plane of the process (a test's own) may run on.
		forgetChildren(c.assets)
		recordChildren(c.assets)
	}
	if c.dir != "" {
		_ = os.RemoveAll(c.dir)
	}
	if c.auditDir != "" {
		_ = os.RemoveAll(c.auditDir)
	}
	if c.apiDir != "" {
		_ = os.RemoveAll(c.apiDir)
	}
	return err
}

// RestartAPIServer stops kube-apiserver as the kubelet stops a container
// (SIGTERM to its process id, SIGKILL if it has not exited after grace: it
// waits for its open watches to end), leaves it down for down, and starts
// it again on the same port with the same certificates, flags and etcd:
// clients reconnect to it as to a restarted API server, whose watch caches
// start anew from etcd. It returns once the new process is healthy. Not for
// the shared control plane of a package, whose tests run in parallel: for
// one started with StartAudited.
func (c *Cluster) RestartAPIServer(grace, down time.Duration) error {
	api := c.Env.ControlPlane.APIServer
	pid, err := c.apiServerPID()
	if err != nil {
		return err
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		return fmt.Errorf("cannot stop kube-apiserver (process %d): %w", pid, err)
	}
	for deadline := time.Now().Add(grace); processExists(pid) && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	// Still ours (a pid is reused only once it is reaped): past its grace.
	if processExists(pid) && parentOf(pid) == os.Getpid() && runsFrom(pid, c.assets) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	// envtest reaps the process and marks it exited; its Stop then does
	// nothing. Between the two it would signal a process gone: once more.
	if err := api.Stop(); err != nil {
		time.Sleep(200 * time.Millisecond)
		if err := api.Stop(); err != nil {
			return fmt.Errorf("cannot stop kube-apiserver: %w", err)
		}
	}
	time.Sleep(down)
	if err := api.Start(); err != nil {
		// Its port may have been taken meanwhile by another listener.
		return fmt.Errorf("cannot start kube-apiserver again on port %s: %w", api.SecureServing.Port, err)
	}
	recordChildren(c.assets)
	return nil
}

// apiServerPID is the process id of the cluster's kube-apiserver: the child
// of this process running it from the assets with the cluster's port.
func (c *Cluster) apiServerPID() (int, error) {
	port := "--secure-port=" + c.Env.ControlPlane.APIServer.SecureServing.Port
	for _, pid := range children(c.assets) {
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			continue
		}
		args := strings.Split(string(cmdline), "\x00")
		if filepath.Base(args[0]) != "kube-apiserver" {
			continue
		}
		for _, a := range args {
			if a == port {
				return pid, nil
			}
		}
	}
	return 0, fmt.Errorf("no kube-apiserver process with %s among this process's children", port)
}

// Namespace creates a namespace with a name unique to the test and returns it.
func (c *Cluster) Namespace(t testing.TB) string {
	t.Helper()
	ns, err := c.Client.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "t-"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	return ns.Name
}

// Eventually polls cond until it returns true or the timeout passes. The
// timeout is a bound for a broken build, not a performance assertion.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var lastErr error
	for {
		ok, err := cond()
		if ok {
			return
		}
		lastErr = err
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s (last error: %v)", timeout, what, lastErr)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// IgnoreNotFound returns nil for a NotFound error.
func IgnoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// IgnoreAlreadyExists returns nil for an AlreadyExists error.
func IgnoreAlreadyExists(err error) error {
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}
