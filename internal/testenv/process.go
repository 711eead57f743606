package testenv

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// BuildAutox builds the autox binary into dir and returns its path.
func BuildAutox(dir, versionStamp string) (string, error) {
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "autox")
	cmd := exec.Command("go", "build", "-ldflags", "-X main.version="+versionStamp, "-o", bin, ".")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %w\n%s", err, out)
	}
	return bin, nil
}

// Process is a running autox (or other) process started by a test.
type Process struct {
	t    testing.TB
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan struct{}
	err  error
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// StartProcess starts bin with args. The test's cleanup kills it by its pid if
// the test did not stop it, and prints its output when the test failed.
func StartProcess(t testing.TB, bin string, args ...string) *Process {
	t.Helper()
	return StartProcessEnv(t, nil, bin, args...)
}

// StartProcessEnv is StartProcess with extra environment variables (KEY=value).
func StartProcessEnv(t testing.TB, env []string, bin string, args ...string) *Process {
	t.Helper()
	p := &Process{t: t, cmd: exec.Command(bin, args...), out: &syncBuffer{}, done: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	p.cmd.Env = append(os.Environ(), env...)
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			t.Logf("output of %s (pid %d):\n%s", bin, p.cmd.Process.Pid, p.out.String())
		}
	})
	return p
}

// Pid is the process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Output is everything the process printed so far.
func (p *Process) Output() string { return p.out.String() }

// Signal sends sig to the process.
func (p *Process) Signal(sig syscall.Signal) {
	_ = syscall.Kill(p.cmd.Process.Pid, sig)
}

// Wait waits for the process to exit, at most timeout, and returns its exit code.
func (p *Process) Wait(timeout time.Duration) (int, error) {
	select {
	case <-p.done:
		if p.err == nil {
			return 0, nil
		}
		if ee, ok := p.err.(*exec.ExitError); ok {
			return ee.ExitCode(), nil
		}
		return -1, p.err
	case <-time.After(timeout):
		return -1, fmt.Errorf("process %d still running after %s", p.Pid(), timeout)
	}
}

// Stop sends SIGTERM and waits for a clean exit; it returns the exit code.
func (p *Process) Stop(timeout time.Duration) int {
	p.t.Helper()
	p.Signal(syscall.SIGTERM)
	code, err := p.Wait(timeout)
	if err != nil {
		p.Kill()
		p.t.Fatalf("stop: %v", err)
	}
	return code
}

// Kill sends SIGKILL (kill -9) and waits for the process to be gone.
func (p *Process) Kill() {
	select {
	case <-p.done:
		return
	default:
	}
	p.Signal(syscall.SIGKILL)
	<-p.done
}
