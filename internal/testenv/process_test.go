package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

const patience = 60 * time.Second // a bound for a broken build, not a performance goal

// pidAfter waits until p printed "<word> <pid>" and returns the pid.
func pidAfter(t *testing.T, p *Process, word string) int {
	t.Helper()
	re := regexp.MustCompile(word + ` (\d+)`)
	var pid int
	Eventually(t, patience, word+" pid printed", func() (bool, error) {
		m := re.FindStringSubmatch(p.Output())
		if m == nil {
			return false, nil
		}
		var err error
		pid, err = strconv.Atoi(m[1])
		return err == nil, err
	})
	return pid
}

func waitGone(t *testing.T, pid int, what string) {
	t.Helper()
	Eventually(t, patience, what+" (pid "+strconv.Itoa(pid)+") gone", func() (bool, error) { return !processExists(pid), nil })
}

// TestHelperTestBinary is the test binary of TestKilledTestBinaryLeavesNoProcess:
// it starts a process and waits to be killed.
func TestHelperTestBinary(t *testing.T) {
	if os.Getenv("AUTOX_TESTENV_HELPER") == "" {
		t.Skip("run by TestKilledTestBinaryLeavesNoProcess")
	}
	p := StartProcess(t, "sleep", "1000")
	fmt.Printf("child %d\n", p.Pid())
	time.Sleep(time.Hour)
}

// TestKilledTestBinaryLeavesNoProcess kills a test binary (this one, run
// again) with SIGKILL, as go test -timeout or a user may: it runs no cleanup,
// so only the parent-death signal can stop what it started.
func TestKilledTestBinaryLeavesNoProcess(t *testing.T) {
	helper := StartProcessEnv(t, []string{"AUTOX_TESTENV_HELPER=1"}, os.Args[0], "-test.run=^TestHelperTestBinary$", "-test.v")
	child := pidAfter(t, helper, "child")
	// The child has a process group of its own: killing the helper's group
	// does not reach it.
	helper.Kill()
	waitGone(t, child, "the killed test binary's child")
}

// TestKillStopsTheProcessGroup: what a process started (here a shell's
// background sleep) goes with it, whether the test kills the process or it
// exits by itself.
func TestKillStopsTheProcessGroup(t *testing.T) {
	for _, tc := range []struct {
		name, script string
		stop         func(*testing.T, *Process)
	}{
		{"killed", "sleep 1000 & echo grandchild $!; wait", func(_ *testing.T, p *Process) { p.Kill() }},
		{"exited", "sleep 1000 & echo grandchild $!", func(t *testing.T, p *Process) {
			if code, err := p.Wait(patience); code != 0 || err != nil {
				t.Errorf("sh: exit code %d, %v", code, err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := StartProcess(t, "sh", "-c", tc.script)
			grandchild := pidAfter(t, p, "grandchild")
			stopped := make(chan struct{})
			t.Cleanup(func() { <-stopped })
			// Should the group not be killed, the sleep would hold the
			// output pipe and the process could never be waited for; this
			// cleanup runs first and ends it.
			t.Cleanup(func() { _ = syscall.Kill(grandchild, syscall.SIGKILL) })
			go func() {
				defer close(stopped)
				tc.stop(t, p)
			}()
			waitGone(t, grandchild, "the background sleep")
		})
	}
}

// recordingTB records what a Process reports instead of failing the test.
type recordingTB struct {
	testing.TB
	mu       sync.Mutex
	errs     []string
	cleanups []func()
}

func (r *recordingTB) Errorf(format string, args ...interface{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func (r *recordingTB) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.errs) > 0
}

func (r *recordingTB) Logf(string, ...interface{}) {}

func (r *recordingTB) Cleanup(f func()) { r.cleanups = append(r.cleanups, f) }

func (r *recordingTB) runCleanups() {
	for i := len(r.cleanups) - 1; i >= 0; i-- {
		r.cleanups[i]()
	}
}

const racyProgram = `package main

import (
	"fmt"
	"os"
	"time"
)

func main() {
	n := 0
	done := make(chan bool)
	go func() { n++; done <- true }()
	n++
	<-done
	fmt.Println("raced", n)
	if len(os.Args) > 1 {
		time.Sleep(time.Hour)
	}
}
`

// TestRaceReportFailsTheTest runs a racy program built with -race, as
// BuildAutox builds autox: a test whose process raced fails with the
// report, whether the process exits (Wait) or is killed (cleanup).
func TestRaceReportFailsTheTest(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "racy.go")
	if err := os.WriteFile(src, []byte(racyProgram), 0o600); err != nil {
		t.Fatal(err)
	}
	racy := filepath.Join(dir, "racy")
	if out, err := exec.Command("go", "build", "-race", "-o", racy, src).CombinedOutput(); err != nil {
		t.Fatalf("go build -race: %v\n%s", err, out)
	}

	for _, tc := range []struct {
		name    string
		args    []string
		end     func(*testing.T, *recordingTB, *Process)
		wantErr []string
	}{
		{"exits", nil, func(t *testing.T, _ *recordingTB, p *Process) {
			if code, err := p.Wait(patience); code != raceExitCode || err != nil {
				t.Errorf("racy program: exit code %d, %v; want %d", code, err, raceExitCode)
			}
		}, []string{"found a data race", "WARNING: DATA RACE", "racy.go:"}},
		{"killed", []string{"block"}, func(t *testing.T, r *recordingTB, p *Process) {
			Eventually(t, patience, "the race reported", func() (bool, error) { return strings.Contains(p.Output(), "raced"), nil })
			r.runCleanups()
		}, []string{"found a data race", "WARNING: DATA RACE"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &recordingTB{TB: t}
			p := StartProcess(r, racy, tc.args...)
			tc.end(t, r, p)
			r.runCleanups() // a second time: the report is made once
			if len(r.errs) != 1 {
				t.Fatalf("%d failures reported, want 1: %q", len(r.errs), r.errs)
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(r.errs[0], w) {
					t.Errorf("the failure lacks %q:\n%s", w, r.errs[0])
				}
			}
		})
	}

	// A process without a race reports nothing.
	r := &recordingTB{TB: t}
	p := StartProcess(r, "true")
	if code, err := p.Wait(patience); code != 0 || err != nil {
		t.Fatalf("true: exit code %d, %v", code, err)
	}
	r.runCleanups()
	if len(r.errs) != 0 {
		t.Errorf("a clean process failed the test: %q", r.errs)
	}
}
