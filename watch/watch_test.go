package watch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"

	"github.com/autox-dev/autox/internal/testenv"
)

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// waitFor polls cond until it holds. The deadline only keeps a broken build
// from hanging; nothing is measured by it.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// logCounter counts the log lines a logger writes, by level; it is safe for
// the Watch goroutine to log while a test reads.
type logCounter struct {
	mu     sync.Mutex
	counts map[zerolog.Level]int
}

func (c *logCounter) Run(_ *zerolog.Event, level zerolog.Level, _ string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.counts == nil {
		c.counts = map[zerolog.Level]int{}
	}
	c.counts[level]++
}

func (c *logCounter) count(level zerolog.Level) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts[level]
}

// logger returns a logger at debug level that writes nowhere and counts into c.
func (c *logCounter) logger() zerolog.Logger {
	return zerolog.New(io.Discard).Level(zerolog.DebugLevel).Hook(c)
}

const noFile = "(no file)"

// harness runs a Watcher with short intervals and records what it reports.
type harness struct {
	*Watcher
	path    string
	logs    *logCounter
	metrics *Metrics
	stopped chan struct{}
	err     error

	mu        sync.Mutex
	seen      string // the file's content as the last OnChange read it
	watchErrs []error
}

func (h *harness) onChange() {
	data, err := os.ReadFile(h.path)
	s := string(data)
	if err != nil {
		s = noFile
	}
	h.mu.Lock()
	h.seen = s
	h.mu.Unlock()
}

func (h *harness) onWatchError(err error) {
	h.mu.Lock()
	h.watchErrs = append(h.watchErrs, err)
	h.mu.Unlock()
}

func (h *harness) errs() []error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.watchErrs)
}

// waitSeen waits until a reported change read content.
func (h *harness) waitSeen(t *testing.T, content, what string) {
	t.Helper()
	waitFor(t, "a change reported after "+what, func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		return h.seen == content
	})
}

// start runs a Watcher on path until the test ends; newNotifier, if not
// nil, replaces fsnotify.
func start(t *testing.T, path string, interval time.Duration, newNotifier func() (notifier, error)) *harness {
	t.Helper()
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{path: path, logs: &logCounter{}, metrics: m, stopped: make(chan struct{})}
	w, err := New(Options{
		Path: path, Debounce: 20 * time.Millisecond, CheckInterval: interval,
		OnChange: h.onChange, OnWatchError: h.onWatchError, Log: h.logs.logger(), Metrics: m,
	})
	if err != nil {
		t.Fatal(err)
	}
	if newNotifier != nil {
		w.newNotifier = newNotifier
	}
	h.Watcher = w
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		h.err = w.Watch(ctx)
		close(h.stopped)
	}()
	t.Cleanup(func() {
		cancel()
		<-h.stopped
		if h.err != nil {
			t.Errorf("Watch: %v", h.err)
		}
	})
	return h
}

// startWatching is start with fsnotify, once the directory is watched.
func startWatching(t *testing.T, path string, interval time.Duration) *harness {
	t.Helper()
	h := start(t, path, interval, nil)
	waitFor(t, "the directory watch", h.Watching)
	return h
}

func TestRelevant(t *testing.T) {
	w, err := New(Options{Path: "/etc/autox/config.yaml", OnChange: func() {}})
	must(t, err)
	cases := map[string]bool{
		"/etc/autox/config.yaml":                     true,
		"/etc/autox/..data":                          true,
		"/etc/autox":                                 true,
		"/etc/autox/other.yaml":                      false,
		"/etc/autox/config.yaml.tmp":                 false,
		"/etc/autox/..data_tmp":                      false,
		"/etc/autox/..2026_12_01_00_00_01.1":         false,
		"/etc/autox/..2026_12_01_00_00_01.1/x.yaml":  false,
		"/etc/autox/..2026_12_01_00_00_01.1/..data2": false,
	}
	for name, want := range cases {
		if got := w.relevant(fsnotify.Event{Name: name, Op: fsnotify.Write}); got != want {
			t.Errorf("relevant(%s) = %v, want %v", name, got, want)
		}
	}
}

func TestWatcherReportsEveryChangePattern(t *testing.T) {
	k := testenv.NewKubeletDir(t, "config.yaml", "a: 1\n")
	h := startWatching(t, k.Path(), time.Hour) // events only: no timer fallback

	// The kubelet swap, many times: a watch on the file itself would be lost
	// after the first.
	for i := 0; i < 20; i++ {
		content := fmt.Sprintf("a: %d\n", i+2)
		k.Update(content)
		h.waitSeen(t, content, fmt.Sprintf("kubelet swap %d", i))
	}

	// A plain file in a plain directory, changed every other way.
	dir := t.TempDir()
	plain := filepath.Join(dir, "config.yaml")
	must(t, os.WriteFile(plain, []byte("a: 1\n"), 0o644))
	m := startWatching(t, plain, time.Hour)

	tmp := filepath.Join(dir, "config.yaml.tmp")
	must(t, os.WriteFile(tmp, []byte("a: 2\n"), 0o644))
	must(t, os.Rename(tmp, plain))
	m.waitSeen(t, "a: 2\n", "rename over the file (editor, kubectl cp)")

	must(t, os.Truncate(plain, 0))
	must(t, os.WriteFile(plain, []byte("a: 3\n"), 0o644))
	m.waitSeen(t, "a: 3\n", "truncate then write")

	must(t, os.Remove(plain))
	m.waitSeen(t, noFile, "delete")
	must(t, os.WriteFile(plain, []byte("a: 4\n"), 0o644))
	m.waitSeen(t, "a: 4\n", "recreate")

	// Another file of the directory changing is not a change of ours. Events
	// arrive in order, so once a sibling's event is counted as ignored every
	// earlier event has been handled: the first sibling write is a fence, the
	// second must then add no relevant event.
	sibling := func(content string) Stats {
		before := m.Stats().IgnoredEvents
		must(t, os.WriteFile(filepath.Join(dir, "other.yaml"), []byte(content), 0o644))
		waitFor(t, "the sibling file's event", func() bool { return m.Stats().IgnoredEvents > before })
		return m.Stats()
	}
	fence := sibling("x")
	if after := sibling("y"); after.Events != fence.Events {
		t.Errorf("a sibling file change counted as relevant (%d -> %d events)", fence.Events, after.Events)
	}

	for _, w := range []*harness{h, m} {
		if s := w.Stats(); s.TickChanges != 0 || s.WatchErrors != 0 {
			t.Errorf("with events only, no tick change or watch error is expected: %+v", s)
		}
	}
}

func TestWatcherFallbackRepairsLostWatch(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "cfg")
	must(t, os.Mkdir(dir, 0o755))
	path := filepath.Join(dir, "config.yaml")
	must(t, os.WriteFile(path, []byte("a: 1\n"), 0o644))
	h := startWatching(t, path, 20*time.Millisecond)

	// The whole directory goes and comes back: its watch is gone, and only
	// the periodic check can notice and re-add it.
	before := h.Stats()
	must(t, os.RemoveAll(dir))
	waitFor(t, "the watch to end with its directory", func() bool { return !h.Watching() })
	waitFor(t, "the removal to be reported", func() bool { return h.Stats().EventChanges > before.EventChanges })
	must(t, os.Mkdir(dir, 0o755))
	waitFor(t, "a periodic check to re-add the watch", func() bool { return h.Stats().Repairs > before.Repairs && h.Watching() })

	// The ticks go on calling OnChange whether the watch works or not; only
	// an event-driven change shows that it does.
	repaired := h.Stats()
	must(t, os.WriteFile(path, []byte("a: 3\n"), 0o644))
	waitFor(t, "an event-driven change after the repair", func() bool { return h.Stats().EventChanges > repaired.EventChanges })
}

// fakeNotifier stands in for fsnotify; the test decides when it fails.
type fakeNotifier struct {
	events chan fsnotify.Event
	errs   chan error

	mu     sync.Mutex
	addErr error
	dirs   []string
}

func (f *fakeNotifier) Add(dir string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.addErr != nil {
		return f.addErr
	}
	f.dirs = append(f.dirs, dir)
	return nil
}

func (f *fakeNotifier) WatchList() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.dirs)
}

func (f *fakeNotifier) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dirs = nil
	return nil
}

func (f *fakeNotifier) channels() (<-chan fsnotify.Event, <-chan error) { return f.events, f.errs }

func (f *fakeNotifier) setAddErr(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.addErr = err
}

// fakes makes fakeNotifiers: none while startErr is set (fsnotify.NewWatcher
// failing), else ones whose Add fails with addErr.
type fakes struct {
	mu       sync.Mutex
	startErr error
	addErr   error
	made     []*fakeNotifier
}

func (f *fakes) new() (notifier, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.startErr != nil {
		return nil, f.startErr
	}
	n := &fakeNotifier{events: make(chan fsnotify.Event), errs: make(chan error), addErr: f.addErr}
	f.made = append(f.made, n)
	return n, nil
}

func (f *fakes) setStartErr(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.startErr = err
}

func (f *fakes) last() *fakeNotifier {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.made[len(f.made)-1]
}

// send hands the Watch loop one event or error; it blocks until the loop
// takes it, which it does only from the notifier it uses.
func send[T any](t *testing.T, ch chan T, v T) {
	t.Helper()
	select {
	case ch <- v:
	case <-time.After(30 * time.Second):
		t.Fatal("the watch loop does not read from the notifier")
	}
}

var (
	errTooManyFiles = errors.New("too many open files")
	errNoSpace      = errors.New("no space left on device")
)

// TestWatcherSurvivesWatchFailures breaks fsnotify each way it breaks on a
// busy node and checks that Watch goes on with its periodic check, reports
// the failure once however many checks it lasts, and watches again once it can.
func TestWatcherSurvivesWatchFailures(t *testing.T) {
	cases := []struct {
		name    string
		setup   func(f *fakes)                 // before Watch starts
		breakIt func(f *fakes)                 // once the directory is watched; nil: broken from the start
		heal    func(f *fakes)                 // what makes the next check succeed
		wantErr func(err error) (bool, string) // the error OnWatchError must get
	}{
		{
			name:  "fsnotify cannot start",
			setup: func(f *fakes) { f.startErr = errTooManyFiles },
			heal:  func(f *fakes) { f.setStartErr(nil) },
			wantErr: func(err error) (bool, string) {
				return errors.Is(err, errTooManyFiles), "wrapping the NewWatcher error"
			},
		},
		{
			name:  "the directory cannot be added",
			setup: func(f *fakes) { f.addErr = errNoSpace },
			heal:  func(f *fakes) { f.last().setAddErr(nil) },
			wantErr: func(err error) (bool, string) {
				return errors.Is(err, errNoSpace), "wrapping the Add error"
			},
		},
		{
			name: "the event channel closes",
			breakIt: func(f *fakes) {
				f.setStartErr(errTooManyFiles) // and no new watcher for a while
				close(f.last().events)
			},
			heal: func(f *fakes) { f.setStartErr(nil) },
			wantErr: func(err error) (bool, string) {
				return strings.Contains(err.Error(), "event channel closed"), "saying the event channel closed"
			},
		},
		{
			name: "the error channel closes",
			breakIt: func(f *fakes) {
				f.setStartErr(errTooManyFiles)
				close(f.last().errs)
			},
			heal: func(f *fakes) { f.setStartErr(nil) },
			wantErr: func(err error) (bool, string) {
				return strings.Contains(err.Error(), "error channel closed"), "saying the error channel closed"
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "config.yaml")
			must(t, os.WriteFile(path, []byte("a: 1\n"), 0o644))
			f := &fakes{}
			if tc.setup != nil {
				tc.setup(f)
			}
			h := start(t, path, 10*time.Millisecond, f.new)
			if tc.breakIt != nil {
				waitFor(t, "the directory watch", h.Watching)
				tc.breakIt(f)
			}

			waitFor(t, "the failure to be reported", func() bool { return h.Stats().WatchErrors > 0 })
			ticks := h.Stats().TickChanges
			waitFor(t, "three more periodic checks", func() bool { return h.Stats().TickChanges >= ticks+3 })
			select {
			case <-h.stopped:
				t.Fatalf("Watch returned while the watch was broken: %v", h.err)
			default:
			}
			if h.Watching() {
				t.Error("Watching() while the watch is broken")
			}
			if v := testutil.ToFloat64(h.metrics.fallback); v != 1 {
				t.Errorf("autox_config_watch_fallback = %v while the watch is broken, want 1", v)
			}
			errs := h.errs()
			if len(errs) != 1 || h.Stats().WatchErrors != 1 {
				t.Fatalf("one failure over several checks must be reported once, got %d errors (%v), WatchErrors %d", len(errs), errs, h.Stats().WatchErrors)
			}
			if ok, what := tc.wantErr(errs[0]); !ok {
				t.Errorf("OnWatchError got %v, want an error %s", errs[0], what)
			}
			if n := h.logs.count(zerolog.WarnLevel); n != 1 {
				t.Errorf("%d warnings logged, want 1", n)
			}

			tc.heal(f)
			waitFor(t, "a periodic check to repair the watch", func() bool { return h.Stats().Repairs == 1 && h.Watching() })
			if v := testutil.ToFloat64(h.metrics.fallback); v != 0 {
				t.Errorf("autox_config_watch_fallback = %v once the watch works again, want 0", v)
			}
			before := h.Stats().EventChanges
			send(t, f.last().events, fsnotify.Event{Name: path, Op: fsnotify.Write})
			waitFor(t, "an event-driven change after the repair", func() bool { return h.Stats().EventChanges > before })
			if s := h.Stats(); s.WatchErrors != 1 {
				t.Errorf("WatchErrors = %d after the repair, want 1", s.WatchErrors)
			}
		})
	}
}

// TestWatcherReportsNotifierErrors: an error from fsnotify (its queue
// overflowed, so events were lost) is reported, and the file is checked at
// once rather than at the next tick; the watch itself goes on.
func TestWatcherReportsNotifierErrors(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	must(t, os.WriteFile(path, []byte("a: 1\n"), 0o644))
	f := &fakes{}
	h := start(t, path, time.Hour, f.new)
	waitFor(t, "the directory watch", h.Watching)

	send(t, f.last().errs, fsnotify.ErrEventOverflow)
	waitFor(t, "a change reported after the overflow", func() bool { return h.Stats().EventChanges == 1 })
	if errs := h.errs(); len(errs) != 1 || !errors.Is(errs[0], fsnotify.ErrEventOverflow) {
		t.Errorf("OnWatchError got %v, want the overflow", errs)
	}
	if s := h.Stats(); s.WatchErrors != 1 || s.Repairs != 0 || !h.Watching() {
		t.Errorf("after an overflow the watch goes on: %+v, watching %v", s, h.Watching())
	}
}

func TestIsMountPoint(t *testing.T) {
	info := filepath.Join(t.TempDir(), "mountinfo")
	must(t, os.WriteFile(info, []byte(
		"22 1 8:1 / / rw - ext4 /dev/sda1 rw\n"+
			"30 22 8:1 /var/lib/kubelet/pods/x/volumes/cm/config.yaml /etc/autox/config.yaml ro - ext4 /dev/sda1 rw\n"+
			"31 22 8:1 /x /etc/with\\040space rw - ext4 /dev/sda1 rw\n"), 0o644))
	cases := map[string]bool{"/etc/autox/config.yaml": true, "/etc/autox": false, "/etc/with space": true, "/etc/other.yaml": false}
	for p, want := range cases {
		if got := isMountPoint(p, info); got != want {
			t.Errorf("isMountPoint(%q) = %v, want %v", p, got, want)
		}
	}
}

// TestStuckWatcherFailsLiveness: /healthz asks Watcher.Stuck. A watch loop
// that goes round is not stuck; one whose OnChange hangs stops going round
// and is reported once it has not checked for the limit.
func TestStuckWatcherFailsLiveness(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	must(t, os.WriteFile(path, []byte("a: 1\n"), 0o644))
	const interval = 50 * time.Millisecond
	hang, release := make(chan struct{}), make(chan struct{})
	var hanging atomic.Bool
	w, err := New(Options{Path: path, Debounce: 10 * time.Millisecond, CheckInterval: interval, Log: zerolog.Nop(),
		OnChange: func() {
			if hanging.Load() {
				close(hang)
				<-release
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Watch(ctx) }()
	defer func() {
		cancel()
		<-done
	}()
	limit := 3*interval + 10*time.Millisecond + time.Minute

	// Going round: after a tick that came after t1, t1 + limit is within it.
	t1 := time.Now()
	ticks := w.Stats().TickChanges
	waitFor(t, "a tick", func() bool { return w.Stats().TickChanges > ticks+1 })
	if err := w.Stuck(t1.Add(limit)); err != nil {
		t.Errorf("a watcher going round reported stuck: %v", err)
	}

	hanging.Store(true)
	<-hang
	tb := time.Now() // the loop has not gone round since
	if err := w.Stuck(tb.Add(limit + time.Millisecond)); err == nil {
		t.Error("a watcher hung in OnChange for longer than the limit is not reported stuck")
	}
	close(release)
}
