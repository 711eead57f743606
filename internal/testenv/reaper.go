package testenv

import (
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// The control plane's processes are children of the test binary. envtest
// stops them when the tests end, but a test binary killed from outside (a
// signal, `go test -timeout`) cannot, and they would outlive it. So each run
// records their process ids, and the next Start stops the ones whose test
// binary is gone — only processes still running one of our cached binaries.

func pidDir(assets string) string { return filepath.Join(assets, "running") }

// children are the ids of this process's children that run a binary from
// assets.
func children(assets string) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || parentOf(pid) != os.Getpid() || !runsFrom(pid, assets) {
			continue
		}
		pids = append(pids, pid)
	}
	return pids
}

// recordChildren writes the ids of this process's children that run a
// binary from assets.
func recordChildren(assets string) {
	var pids []string
	for _, pid := range children(assets) {
		pids = append(pids, strconv.Itoa(pid))
	}
	if len(pids) == 0 {
		return
	}
	if err := os.MkdirAll(pidDir(assets), 0o700); err != nil {
		return
	}
	_ = os.WriteFile(filepath.Join(pidDir(assets), strconv.Itoa(os.Getpid())), []byte(strings.Join(pids, "\n")), 0o600)
}

// forgetChildren removes this process's record after a clean stop.
func forgetChildren(assets string) {
	_ = os.Remove(filepath.Join(pidDir(assets), strconv.Itoa(os.Getpid())))
}

// reapOrphans stops, by id, the recorded processes of test binaries that no
// longer run.
func reapOrphans(assets string) {
	entries, _ := os.ReadDir(pidDir(assets))
	for _, e := range entries {
		owner, err := strconv.Atoi(e.Name())
		if err != nil || processExists(owner) {
			continue
		}
		data, _ := os.ReadFile(filepath.Join(pidDir(assets), e.Name()))
		for _, f := range strings.Fields(string(data)) {
			if pid, err := strconv.Atoi(f); err == nil && runsFrom(pid, assets) {
				fmt.Fprintf(os.Stderr, "testenv: stopping process %d left by test binary %d\n", pid, owner)
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		_ = os.Remove(filepath.Join(pidDir(assets), e.Name()))
	}
}

// processExists reports a live process; a zombie (exited, not yet reaped by
// its parent) counts as gone.
func processExists(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(data)
	f := strings.Fields(s[strings.LastIndex(s, ")")+1:])
	return len(f) > 0 && f[0] != "Z" && f[0] != "X"
}

func parentOf(pid int) int {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return -1
	}
	s := string(data)
	f := strings.Fields(s[strings.LastIndex(s, ")")+1:])
	if len(f) < 2 {
		return -1
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}

func runsFrom(pid int, dir string) bool {
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	return err == nil && strings.HasPrefix(exe, dir+string(filepath.Separator))
}

// stopOnSignal stops the cluster when the test binary is interrupted, and
// keeps a closed stdout (go test ... | head) from killing it before it can.
func stopOnSignal(c *Cluster) func() {
	signal.Ignore(syscall.SIGPIPE)
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		select {
		case s := <-ch:
			fmt.Fprintf(os.Stderr, "testenv: %s: stopping the control plane\n", s)
			_ = c.Stop()
			os.Exit(1)
		case <-done:
		}
	}()
	return func() {
		signal.Stop(ch)
		close(done)
	}
}
