// Package watch turns changes of the mounted config file into accepted
// configs. Watcher reports "the file may have changed" however the file
// changes (kubelet ..data symlink swaps, editor renames, truncate and write,
// delete and recreate); Reloader reads the file, and applies it only when its
// content differs from the last config applied and is valid.
package watch

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/rs/zerolog"
)

// kubeletDataLink is the symlink a kubelet ConfigMap or Secret volume swaps
// atomically on every update; the visible file points through it.
const kubeletDataLink = "..data"

// Options configure a Watcher.
type Options struct {
	// Path is the config file.
	Path string
	// Debounce is how long events must be quiet before a change is reported,
	// so that a burst (a symlink swap, an editor's write) is one change.
	Debounce time.Duration
	// CheckInterval reports a possible change unconditionally, as a fallback
	// for lost or missed events, and re-adds a lost directory watch.
	CheckInterval time.Duration
	// OnChange is called, from Watch's goroutine, whenever the file may have changed.
	OnChange func()
	Log      zerolog.Logger
}

// Watcher watches the config file's directory, never the file itself: the
// watch on a file is lost when the kubelet swaps the ..data symlink.
type Watcher struct {
	opts Options
	dir  string
	name string
	// heartbeat is the Unix nano time the loop last went round; 0 when not running.
	heartbeat atomic.Int64
}

// Stuck reports a watch loop that has not gone round for several check
// intervals (its OnChange hangs, or the loop died). A Watcher that is not
// running is not stuck.
func (w *Watcher) Stuck(now time.Time) error {
	hb := w.heartbeat.Load()
	if hb == 0 {
		return nil
	}
	limit := 3*w.opts.CheckInterval + w.opts.Debounce + time.Minute
	if d := now.Sub(time.Unix(0, hb)); d > limit {
		return fmt.Errorf("the config watcher has not checked the file for %s (limit %s)", d.Round(time.Second), limit)
	}
	return nil
}

// New returns a Watcher; defaults: Debounce 1s, CheckInterval 30s.
func New(opts Options) (*Watcher, error) {
	if opts.OnChange == nil {
		return nil, errors.New("watch: OnChange is required")
	}
	if opts.Debounce <= 0 {
		opts.Debounce = time.Second
	}
	if opts.CheckInterval <= 0 {
		opts.CheckInterval = 30 * time.Second
	}
	abs, err := filepath.Abs(opts.Path)
	if err != nil {
		return nil, fmt.Errorf("cannot resolve config path %s: %w", opts.Path, err)
	}
	return &Watcher{opts: opts, dir: filepath.Dir(abs), name: filepath.Base(abs)}, nil
}

// relevant reports whether an event in the directory can change what the
// config path reads: the file itself, or the kubelet's ..data link.
func (w *Watcher) relevant(ev fsnotify.Event) bool {
	base := filepath.Base(ev.Name)
	return base == w.name || base == kubeletDataLink || ev.Name == w.dir
}

// Watch runs until ctx ends; it returns nil then, or an error when fsnotify
// cannot be used at all.
func (w *Watcher) Watch(ctx context.Context) error {
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("cannot start file watcher: %w", err)
	}
	defer fw.Close()

	ensureWatch := func() {
		if slices.Contains(fw.WatchList(), w.dir) {
			return
		}
		if err := fw.Add(w.dir); err != nil {
			w.opts.Log.Warn().Err(err).Str("dir", w.dir).Msg("cannot watch the config directory; relying on the periodic check")
			return
		}
		w.opts.Log.Debug().Str("dir", w.dir).Msg("watching the config directory")
	}
	ensureWatch()
	w.heartbeat.Store(time.Now().UnixNano())
	defer w.heartbeat.Store(0)

	ticker := time.NewTicker(w.opts.CheckInterval)
	defer ticker.Stop()
	debounce := time.NewTimer(time.Hour)
	debounce.Stop()
	defer debounce.Stop()

	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-fw.Events:
			if !ok {
				return errors.New("file watcher closed")
			}
			if w.relevant(ev) {
				debounce.Reset(w.opts.Debounce)
			}
		case err, ok := <-fw.Errors:
			if !ok {
				return errors.New("file watcher closed")
			}
			w.opts.Log.Warn().Err(err).Msg("file watcher error; the periodic check covers missed events")
		case <-debounce.C:
			w.opts.OnChange()
		case <-ticker.C:
			// The directory may have been removed and recreated, which ends
			// its watch; re-adding here repairs it.
			ensureWatch()
			w.opts.OnChange()
			w.heartbeat.Store(time.Now().UnixNano())
		}
	}
}
