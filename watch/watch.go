// Package watch turns changes of the mounted config file into accepted
// configs. Watcher reports "the file may have changed" however the file
// changes (kubelet ..data symlink swaps, editor renames, truncate and write,
// delete and recreate), from directory events when fsnotify works and from a
// periodic check always, so a watch that fails or is lost degrades to polling
// instead of ending. Reloader reads the file, applies it only when its content
// differs from the config in force and is valid, and tells apart a new
// rejection from the same rejected content seen again.
package watch

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
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
	// for lost or missed events, and (re)establishes a lost or failed
	// directory watch.
	CheckInterval time.Duration
	// OnChange is called, from Watch's goroutine, whenever the file may have changed.
	OnChange func()
	// OnWatchError, if set, is called from Watch's goroutine when the
	// directory watch fails: fsnotify cannot start or add the directory (once
	// until the watch works again, not at every check), its channels close, or
	// it reports an error such as an event queue overflow. Watch goes on with
	// the periodic check either way.
	OnWatchError func(error)
	// Metrics (optional) counts the watch's failures.
	Metrics *Metrics
	Log     zerolog.Logger
}

// Stats counts what a Watcher did since it was created. Every count only
// grows, so a test or a metric can wait for one to move.
type Stats struct {
	// EventChanges are changes reported after directory events (debounced)
	// or after a fsnotify error that may have lost some.
	EventChanges int64
	// TickChanges are changes reported by the periodic check.
	TickChanges int64
	// Events are directory events that can change what the config path
	// reads; IgnoredEvents are those that cannot (other files).
	Events, IgnoredEvents int64
	// Repairs are periodic checks that re-established the directory watch
	// after it was lost (the directory removed or renamed) or had failed.
	Repairs int64
	// WatchErrors are the failures also passed to Options.OnWatchError.
	WatchErrors int64
}

// notifier is what Watch uses of *fsnotify.Watcher; tests replace
// Watcher.newNotifier to make it fail.
type notifier interface {
	Add(dir string) error
	WatchList() []string
	Close() error
	channels() (<-chan fsnotify.Event, <-chan error)
}

type fsNotifier struct{ *fsnotify.Watcher }

func (n fsNotifier) channels() (<-chan fsnotify.Event, <-chan error) { return n.Events, n.Errors }

func newFSNotifier() (notifier, error) {
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, err
	}
	return fsNotifier{fw}, nil
}

// Watcher watches the config file's directory, never the file itself: the
// watch on a file is lost when the kubelet swaps the ..data symlink.
type Watcher struct {
	opts        Options
	dir         string
	name        string
	newNotifier func() (notifier, error)
	// heartbeat is the Unix nano time the loop last went round; 0 when not running.
	heartbeat atomic.Int64

	eventChanges, tickChanges, events, ignored, repairs, watchErrors atomic.Int64

	mu sync.Mutex
	// live is the notifier Watch currently uses, nil when it has none.
	live notifier
}

// Stuck reports a watch loop that has not gone round for several check
// intervals (its OnChange hangs, or the loop died). A Watcher that is not
// running is not stuck, and a failing directory watch does not make it stuck:
// the periodic check still goes round.
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

// Watching reports whether directory events are being received now, as
// opposed to the periodic check alone.
func (w *Watcher) Watching() bool {
	w.mu.Lock()
	n := w.live
	w.mu.Unlock()
	return n != nil && w.watchesDir(n)
}

// Stats returns the counts so far; it is safe for concurrent use.
func (w *Watcher) Stats() Stats {
	return Stats{
		EventChanges:  w.eventChanges.Load(),
		TickChanges:   w.tickChanges.Load(),
		Events:        w.events.Load(),
		IgnoredEvents: w.ignored.Load(),
		Repairs:       w.repairs.Load(),
		WatchErrors:   w.watchErrors.Load(),
	}
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
	return &Watcher{opts: opts, dir: filepath.Dir(abs), name: filepath.Base(abs), newNotifier: newFSNotifier}, nil
}

// relevant reports whether an event in the directory can change what the
// config path reads: the file itself, or the kubelet's ..data link.
func (w *Watcher) relevant(ev fsnotify.Event) bool {
	base := filepath.Base(ev.Name)
	return base == w.name || base == kubeletDataLink || ev.Name == w.dir
}

// watchesDir reports whether n has the directory in its watch list; fsnotify
// drops it there when the directory is removed or renamed.
func (w *Watcher) watchesDir(n notifier) bool {
	return slices.Contains(n.WatchList(), w.dir)
}

// Watch runs until ctx ends and then returns nil; it has no other way to end.
// It must not run twice at once. When fsnotify cannot start, cannot add the
// directory (inotify limits are common on busy nodes) or stops, Watch goes on
// with the periodic check alone and tries to restore the watch at each check.
func (w *Watcher) Watch(ctx context.Context) error {
	s := &session{w: w}
	defer s.drop()
	s.establish(false)
	w.heartbeat.Store(time.Now().UnixNano())
	defer w.heartbeat.Store(0)

	ticker := time.NewTicker(w.opts.CheckInterval)
	defer ticker.Stop()
	debounce := time.NewTimer(time.Hour)
	debounce.Stop()
	defer debounce.Stop()

	for {
		// Without a notifier both channels are nil and never ready.
		events, errs := s.channels()
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-events:
			if !ok {
				s.lose(errors.New("the file watcher stopped: its event channel closed"))
				continue
			}
			if w.relevant(ev) {
				w.events.Add(1)
				debounce.Reset(w.opts.Debounce)
			} else {
				w.ignored.Add(1)
			}
		case err, ok := <-errs:
			if !ok {
				s.lose(errors.New("the file watcher stopped: its error channel closed"))
				continue
			}
			w.failed(fmt.Errorf("file watcher error: %w", err))
			// An overflow drops events: check soon rather than at the next tick.
			debounce.Reset(w.opts.Debounce)
		case <-debounce.C:
			w.opts.OnChange()
			w.eventChanges.Add(1)
		case <-ticker.C:
			// The directory may have been removed and recreated, which ends
			// its watch, or fsnotify may have failed; this repairs both.
			s.establish(true)
			w.opts.OnChange()
			w.tickChanges.Add(1)
			w.heartbeat.Store(time.Now().UnixNano())
		}
	}
}

// failed logs and counts one failure of the directory watch and passes it on.
func (w *Watcher) failed(err error) {
	w.watchErrors.Add(1)
	w.opts.Log.Warn().Err(err).Str("dir", w.dir).
		Msg("config directory watch failed; the periodic check picks up changes until it works again")
	w.opts.Metrics.watchError()
	if w.opts.OnWatchError != nil {
		w.opts.OnWatchError(err)
	}
}

// session is the state of one Watch run, owned by its goroutine.
type session struct {
	w  *Watcher
	fs notifier
	// failing is set once a failure is reported and cleared when the watch
	// works again, so that a failure lasting many checks is reported once.
	failing bool
}

func (s *session) channels() (<-chan fsnotify.Event, <-chan error) {
	if s.fs == nil {
		return nil, nil
	}
	return s.fs.channels()
}

func (s *session) setNotifier(n notifier) {
	s.fs = n
	s.w.mu.Lock()
	s.w.live = n
	s.w.mu.Unlock()
}

// establish makes sure the directory is watched. repair says whether this is
// a periodic check, where re-adding a lost watch counts as a repair.
func (s *session) establish(repair bool) {
	added, err := s.ensure()
	if err != nil {
		if !s.failing {
			s.failing = true
			s.w.failed(err)
		}
		s.w.opts.Metrics.onFallback(true)
		return
	}
	s.failing = false
	s.w.opts.Metrics.onFallback(false)
	if !added {
		return
	}
	if repair {
		s.w.repairs.Add(1)
		s.w.opts.Log.Info().Str("dir", s.w.dir).Msg("watching the config directory again")
		return
	}
	s.w.opts.Log.Debug().Str("dir", s.w.dir).Msg("watching the config directory")
}

// ensure starts a notifier if there is none and adds the directory to it if
// it is not watched; added reports that it had to add it.
func (s *session) ensure() (added bool, err error) {
	if s.fs == nil {
		n, err := s.w.newNotifier()
		if err != nil {
			return false, fmt.Errorf("cannot start the file watcher: %w", err)
		}
		s.setNotifier(n)
	}
	if s.w.watchesDir(s.fs) {
		return false, nil
	}
	if err := s.fs.Add(s.w.dir); err != nil {
		return false, fmt.Errorf("cannot watch the config directory: %w", err)
	}
	return true, nil
}

// lose drops a notifier that stopped; the next periodic check starts a new one.
func (s *session) lose(err error) {
	s.drop()
	s.failing = true
	s.w.failed(err)
	s.w.opts.Metrics.onFallback(true)
}

func (s *session) drop() {
	if s.fs == nil {
		return
	}
	fs := s.fs
	s.setNotifier(nil)
	if err := fs.Close(); err != nil {
		s.w.opts.Log.Debug().Err(err).Msg("closing the file watcher")
	}
}
