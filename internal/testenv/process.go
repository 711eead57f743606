package testenv

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// BuildMode says how BuildAutox builds the binary.
type BuildMode int

const (
	// RaceDetector builds with -race: tests fail on a data race in autox
	// itself, not only in their own process (see Process).
	RaceDetector BuildMode = iota
	// Plain builds the binary users run, for benchmarks and the demo: the
	// race detector slows a program several times over.
	Plain
)

// BuildAutox builds the autox binary into dir and returns its path.
func BuildAutox(dir, versionStamp string, mode BuildMode) (string, error) {
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "autox")
	args := []string{"build", "-ldflags", "-X main.version=" + versionStamp, "-o", bin}
	if mode == RaceDetector {
		args = append(args, "-race")
	}
	cmd := exec.Command("go", append(args, ".")...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %w\n%s", err, out)
	}
	return bin, nil
}

// raceEnv makes a -race binary report every race on its stderr, go on after
// it (so one report does not hide the next) and exit with raceExitCode.
// The default second of sleep at exit, which lets a racing goroutine finish
// its report, is shortened: tests stop autox many times.
const (
	raceEnv      = "GORACE=log_path=stderr halt_on_error=0 exitcode=66 atexit_sleep_ms=100"
	raceExitCode = 66
)

// Process is a running autox (or other) process started by a test.
//
// It runs in a process group of its own and gets SIGKILL when the test
// binary dies (Pdeathsig), so that a test binary killed or timed out by
// go test leaves nothing running; Kill and the test's cleanup kill the whole
// group. A process that printed a race report (WARNING: DATA RACE) or exited
// with the race detector's exit code fails the test, once, with the report.
type Process struct {
	t   testing.TB
	cmd *exec.Cmd
	out *SyncBuffer
	// stdout, for StartCommand, is standard output alone (a command's
	// JSON); out then holds standard error.
	stdout *SyncBuffer
	done   chan struct{}
	err    error

	// mu orders signals with reaping: once the process is reaped its id
	// may belong to another process, so nothing is sent to it any more.
	mu       sync.Mutex
	reaped   bool
	raceOnce sync.Once
}

// SyncBuffer is a buffer safe to write from several goroutines (a
// process's output, a logger's sink).
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// StartProcess starts bin with args. The test's cleanup kills it (and its
// process group) if the test did not stop it, and prints its output when the
// test failed.
func StartProcess(t testing.TB, bin string, args ...string) *Process {
	t.Helper()
	return StartProcessEnv(t, nil, bin, args...)
}

// StartProcessEnv is StartProcess with extra environment variables (KEY=value).
func StartProcessEnv(t testing.TB, env []string, bin string, args ...string) *Process {
	t.Helper()
	return startProcess(t, env, false, bin, args...)
}

// StartCommand is StartProcess for a command whose standard output is read
// on its own (Stdout: a JSON document), apart from its standard error (the
// logs and any race report). Output is then standard error, followed by
// standard output.
func StartCommand(t testing.TB, bin string, args ...string) *Process {
	t.Helper()
	return startProcess(t, nil, true, bin, args...)
}

// StartCommandEnv is StartCommand with extra environment variables (KEY=value).
func StartCommandEnv(t testing.TB, env []string, bin string, args ...string) *Process {
	t.Helper()
	return startProcess(t, env, true, bin, args...)
}

func startProcess(t testing.TB, env []string, splitStdout bool, bin string, args ...string) *Process {
	t.Helper()
	// One pipe for both streams keeps their order, which a race report
	// needs whole (RaceReports); only a command read as a document splits.
	p := &Process{t: t, cmd: exec.Command(bin, args...), out: &SyncBuffer{}, done: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if splitStdout {
		p.stdout = &SyncBuffer{}
		p.cmd.Stdout = p.stdout
	}
	p.cmd.Env = append(append(os.Environ(), raceEnv), env...)
	// Pdeathsig follows the thread that started the child, not the process:
	// Go never ends a thread unless a goroutine locked to it exits, and no
	// test locks one, so it fires when the test binary dies.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	go func() {
		pid := p.cmd.Process.Pid
		waitExited(pid)
		p.mu.Lock()
		// Whatever the process left in its group dies with it. Until Wait
		// reaps the process, its id cannot be reused, so this kills no
		// stranger. It also ends the children's hold on the output pipes,
		// which Wait waits for.
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		p.reaped = true
		p.err = p.cmd.Wait()
		p.mu.Unlock()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.Kill()
		p.checkRace()
		if t.Failed() {
			t.Logf("output of %s (pid %d):\n%s", bin, p.cmd.Process.Pid, p.Output())
		}
	})
	return p
}

// Pid is the process id; it is also the id of the process's group.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Output is everything the process printed so far.
func (p *Process) Output() string {
	if p.stdout != nil {
		return p.out.String() + p.stdout.String()
	}
	return p.out.String()
}

// Stdout is what a process started by StartCommand printed on standard
// output so far; for other processes, everything it printed.
func (p *Process) Stdout() string {
	if p.stdout != nil {
		return p.stdout.String()
	}
	return p.out.String()
}

// Signal sends sig to the process itself (autox), not to its group.
func (p *Process) Signal(sig syscall.Signal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.reaped {
		_ = syscall.Kill(p.cmd.Process.Pid, sig)
	}
}

// Exited reports whether the process has exited.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Wait waits for the process to exit, at most timeout, and returns its exit code.
func (p *Process) Wait(timeout time.Duration) (int, error) {
	select {
	case <-p.done:
		p.checkRace()
		return p.exitCode()
	case <-time.After(timeout):
		return -1, fmt.Errorf("process %d still running after %s", p.Pid(), timeout)
	}
}

func (p *Process) exitCode() (int, error) {
	if p.err == nil {
		return 0, nil
	}
	if ee, ok := p.err.(*exec.ExitError); ok {
		return ee.ExitCode(), nil
	}
	return -1, p.err
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

// Kill sends SIGKILL (kill -9) to the process's whole group and waits for
// the process to be gone. (When the process exits by itself, its group is
// killed then.)
func (p *Process) Kill() {
	p.mu.Lock()
	if !p.reaped {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	}
	p.mu.Unlock()
	<-p.done
}

// waitExited blocks until process pid has exited, without reaping it
// (waitid with WNOWAIT, as the os package does before it reaps).
func waitExited(pid int) {
	const pPID = 1 // P_PID
	var siginfo [16]uint64
	for {
		_, _, errno := syscall.Syscall6(syscall.SYS_WAITID, pPID, uintptr(pid), uintptr(unsafe.Pointer(&siginfo)),
			syscall.WEXITED|syscall.WNOWAIT, 0, 0)
		if errno != syscall.EINTR {
			return
		}
	}
}

// checkRace fails the test, once, when the exited process found a data race.
func (p *Process) checkRace() {
	p.raceOnce.Do(func() {
		reports := RaceReports(p.out.String())
		code, _ := p.exitCode()
		switch {
		case reports != "":
			p.t.Errorf("%s (pid %d) found a data race:\n%s", p.cmd.Path, p.Pid(), reports)
		case code == raceExitCode:
			p.t.Errorf("%s (pid %d) exited with the race detector's exit code %d", p.cmd.Path, p.Pid(), raceExitCode)
		}
	})
}

// RaceReports returns the race detector's reports in a process's output,
// each between its ================== lines; "" when there is none.
func RaceReports(out string) string {
	const sep = "==================\n"
	var reports []string
	for _, block := range strings.Split(out, sep) {
		if strings.HasPrefix(block, "WARNING: DATA RACE") {
			reports = append(reports, sep+block+sep)
		}
	}
	return strings.Join(reports, "")
}
