package watch

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/autox-dev/autox/internal/testenv"
)

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// startWatcher runs a Watcher with short intervals; the returned counter
// counts OnChange calls.
func startWatcher(t *testing.T, path string, interval time.Duration) *atomic.Int64 {
	var n atomic.Int64
	w, err := New(Options{Path: path, Debounce: 20 * time.Millisecond, CheckInterval: interval, OnChange: func() { n.Add(1) }, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Watch(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Watch: %v", err)
		}
	})
	time.Sleep(50 * time.Millisecond) // let the watch be added
	return &n
}

// waitAbove waits until the counter exceeds n and returns its value.
func waitAbove(t *testing.T, c *atomic.Int64, n int64, what string) int64 {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for c.Load() <= n {
		if time.Now().After(deadline) {
			t.Fatalf("no change reported after %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond) // let the debounced burst settle
	return c.Load()
}

func TestWatcherReportsEveryChangePattern(t *testing.T) {
	k := testenv.NewKubeletDir(t, "config.yaml", "a: 1\n")
	path := k.Path()
	n := startWatcher(t, path, time.Hour) // events only: no timer fallback

	var seen int64
	// The kubelet swap, many times: a watch on the file itself would be lost
	// after the first.
	for i := 0; i < 20; i++ {
		k.Update(fmt.Sprintf("a: %d\n", i))
		seen = waitAbove(t, n, seen, fmt.Sprintf("kubelet swap %d", i))
	}

	// A plain file in a plain directory, changed every other way.
	dir := t.TempDir()
	plain := filepath.Join(dir, "config.yaml")
	must(t, os.WriteFile(plain, []byte("a: 1\n"), 0o644))
	m := startWatcher(t, plain, time.Hour)
	seen = 0

	tmp := filepath.Join(dir, "config.yaml.tmp")
	must(t, os.WriteFile(tmp, []byte("a: 2\n"), 0o644))
	must(t, os.Rename(tmp, plain))
	seen = waitAbove(t, m, seen, "rename over the file (editor, kubectl cp)")

	must(t, os.Truncate(plain, 0))
	must(t, os.WriteFile(plain, []byte("a: 3\n"), 0o644))
	seen = waitAbove(t, m, seen, "truncate then write")

	must(t, os.Remove(plain))
	seen = waitAbove(t, m, seen, "delete")
	must(t, os.WriteFile(plain, []byte("a: 4\n"), 0o644))
	seen = waitAbove(t, m, seen, "recreate")

	// Another file of the directory changing is not a change of ours.
	must(t, os.WriteFile(filepath.Join(dir, "other.yaml"), []byte("x"), 0o644))
	time.Sleep(200 * time.Millisecond)
	if got := m.Load(); got != seen {
		t.Errorf("a sibling file change was reported (%d -> %d)", seen, got)
	}
}

func TestWatcherFallbackRepairsLostWatch(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "cfg")
	must(t, os.Mkdir(dir, 0o755))
	path := filepath.Join(dir, "config.yaml")
	must(t, os.WriteFile(path, []byte("a: 1\n"), 0o644))
	n := startWatcher(t, path, 100*time.Millisecond)

	// The whole directory goes and comes back: its watch is gone, and only
	// the periodic check can notice and re-add it.
	must(t, os.RemoveAll(dir))
	must(t, os.Mkdir(dir, 0o755))
	must(t, os.WriteFile(path, []byte("a: 2\n"), 0o644))
	seen := waitAbove(t, n, n.Load(), "directory recreated (timer fallback)")
	time.Sleep(300 * time.Millisecond) // a tick re-adds the watch
	// With the watch repaired, an event is reported well before the next tick
	// would be; counting alone cannot tell, so just check it is reported.
	must(t, os.WriteFile(path, []byte("a: 3\n"), 0o644))
	waitAbove(t, n, seen, "write after the watch was repaired")
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
