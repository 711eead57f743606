package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// restartAutox stops p and starts autox again with the same arguments,
// until its first complete pass.
func restartAutox(ctx context.Context, p *process, autox string, args []string) (*process, error) {
	note("autox: restart")
	p.stop()
	p, err := startAutox(ctx, autox, args)
	if err != nil {
		return nil, err
	}
	if err := p.waitFor(ctx, 10*time.Minute, func(l line) bool { return l.Message == "pass complete" }); err != nil {
		p.kill()
		return nil, fmt.Errorf("restart: %w", err)
	}
	return p, nil
}

type line struct {
	Message     string  `json:"message"`
	Spec        string  `json:"spec"`
	Action      string  `json:"action"`
	DurationMS  float64 `json:"duration"`
	APIRequests int64   `json:"apiRequests"`
	Error       string  `json:"error"`
	// Release and Reason are a drift Event's log line's; Shard the shard
	// term's of a sharded replica; Identity its election identity.
	Release  string `json:"release"`
	Reason   string `json:"reason"`
	Shard    *int   `json:"shard"`
	Identity string `json:"identity"`
	at       time.Time
}

type process struct {
	cmd     *exec.Cmd
	started time.Time
	done    chan struct{}

	mu     sync.Mutex
	lines  []line
	counts map[string]int
	wake   chan struct{}
}

// logDir, when set (--log-dir), keeps each autox process's log there as
// autox-N.log, each line after the milliseconds since exec at which the
// bench read it (autox's own timestamps are in seconds): to see where a
// phase's time goes.
var logDir string

var logCount int

func startAutox(ctx context.Context, bin string, args []string) (*process, error) {
	p := &process{cmd: exec.Command(bin, args...), done: make(chan struct{}), counts: map[string]int{}, wake: make(chan struct{}, 1)}
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	var keep *os.File
	if logDir != "" {
		logCount++
		if keep, err = os.Create(filepath.Join(logDir, fmt.Sprintf("autox-%d.log", logCount))); err != nil {
			return nil, fmt.Errorf("keep autox's log: %w", err)
		}
	}
	p.cmd.Stdout = io.Discard
	p.started = time.Now()
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		defer close(p.done)
		if keep != nil {
			defer keep.Close()
		}
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<24)
		for sc.Scan() {
			if keep != nil {
				fmt.Fprintf(keep, "%d %s\n", time.Since(p.started).Milliseconds(), sc.Bytes())
			}
			var l line
			if json.Unmarshal(sc.Bytes(), &l) != nil {
				continue
			}
			l.at = time.Now()
			p.mu.Lock()
			p.lines = append(p.lines, l)
			if l.Error != "" {
				l.Message += " failed" // counted apart: only successes converge
			}
			p.counts[l.Message]++
			p.counts[l.Message+"|"+l.Spec]++
			p.mu.Unlock()
			select {
			case p.wake <- struct{}{}:
			default:
			}
		}
		_ = p.cmd.Wait()
	}()
	return p, nil
}

func (p *process) count(msg string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.counts[msg]
}

func (p *process) countSpec(msg string, i int) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.counts[msg+"|"+fmt.Sprintf("t%04d", i)]
}

func (p *process) lastAt() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lines[len(p.lines)-1].at
}

// firstAt is when the first line with that message was read.
func (p *process) firstAt(msg string) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, l := range p.lines {
		if l.Message == msg {
			return l.at
		}
	}
	return time.Time{}
}

// lastRequests is the apiRequests of the latest pass line, or 0.
func (p *process) lastRequests() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := len(p.lines) - 1; i >= 0; i-- {
		if p.lines[i].Message == "pass complete" {
			return p.lines[i].APIRequests
		}
	}
	return 0
}

// tail describes the last n log lines.
func (p *process) tail(n int) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var b strings.Builder
	for _, l := range p.lines[max(0, len(p.lines)-n):] {
		fmt.Fprintf(&b, "  %s %s spec=%s action=%s duration=%.0fms requests=%d\n", l.at.Format("15:04:05.000"), l.Message, l.Spec, l.Action, l.DurationMS, l.APIRequests)
	}
	return b.String()
}

// cpuTime is the user+system CPU time the process used so far.
func (p *process) cpuTime() time.Duration { return cpuTimeOf(p.cmd.Process.Pid) }

// serverCPU is the CPU time the control plane this process started
// (kube-apiserver and etcd, its children) used so far.
func serverCPU() time.Duration {
	var sum time.Duration
	for _, pid := range append(children("kube-apiserver"), children("etcd")...) {
		sum += cpuTimeOf(pid)
	}
	return sum
}

func cpuTimeOf(pid int) time.Duration {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command name (which is in parentheses): utime is the
	// 14th field of the line, stime the 15th, in clock ticks (100 per second).
	s := string(data)
	f := strings.Fields(s[strings.LastIndex(s, ")")+2:])
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+st) * 10 * time.Millisecond
}

// meanDuration is the mean logged duration of lines with that message.
func (p *process) meanDuration(msg string) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	var sum float64
	n := 0
	for _, l := range p.lines {
		if l.Message == msg {
			sum += l.DurationMS
			n++
		}
	}
	if n == 0 {
		return 0
	}
	return time.Duration(sum / float64(n) * float64(time.Millisecond))
}

// isHelmWrite tells the log line of a Helm operation (apply's "release
// <action>", failed ones included) from other lines about releases.
func isHelmWrite(msg string) bool {
	switch strings.TrimSuffix(msg, " failed") {
	case "release install", "release upgrade", "release reinstall", "release uninstall", "release rollback":
		return true
	}
	return false
}

// writesSince counts Helm writes logged after t.
func (p *process) writesSince(t time.Time) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, l := range p.lines {
		if l.at.After(t) && isHelmWrite(l.Message) {
			n++
		}
	}
	return n
}

// waitFor waits until cond holds for the latest line (it sees every line).
func (p *process) waitFor(ctx context.Context, timeout time.Duration, cond func(line) bool) error {
	deadline := time.After(timeout)
	seen := 0
	for {
		p.mu.Lock()
		lines := p.lines[seen:]
		seen = len(p.lines)
		p.mu.Unlock()
		for _, l := range lines {
			if cond(l) {
				return nil
			}
		}
		select {
		case <-p.wake:
		case <-p.done:
			return errors.New("autox exited")
		case <-deadline:
			return fmt.Errorf("timed out after %s; last log lines:\n%s", timeout, p.tail(20))
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// peakRSS is the process's peak resident set since start or resetPeak.
func (p *process) peakRSS() int64 { return statusKB(p.cmd.Process.Pid, "VmHWM") }

// resetPeak starts a new peak RSS measurement (Linux clear_refs 5).
func (p *process) resetPeak() {
	_ = os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", p.cmd.Process.Pid), []byte("5"), 0o200)
}

func (p *process) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(2 * time.Minute):
		p.kill()
	}
}

func (p *process) kill() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Kill()
	<-p.done
}
