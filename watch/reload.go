package watch

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/autox-dev/autox/config"
)

// Outcome is what one reload check did. The outcomes are precise so that
// metrics can be: only Applied means a config was loaded (the time of the
// last successful reload), only Rejected is a failed reload to count, and
// both Rejected and StillRejected mean the file is not the config in force.
type Outcome string

const (
	// Unchanged: the file holds the config in force; nothing was loaded. It
	// is also the outcome when a rejected edit is reverted.
	Unchanged Outcome = "unchanged"
	// Applied: a new valid config was loaded and passed to apply.
	Applied Outcome = "applied"
	// Rejected: the file is missing, unreadable, still changing, empty or
	// invalid, and this content (or read error) is not the one last rejected;
	// logged at error level. The last valid config stays in force.
	Rejected Outcome = "rejected"
	// StillRejected: the file still holds the content last rejected (or fails
	// to read with the same error), and held nothing valid in between; it was
	// neither parsed nor logged at error level again. The last valid config
	// stays in force.
	StillRejected Outcome = "still-rejected"
	// Canceled: ctx ended during the check; nothing was judged.
	Canceled Outcome = "canceled"
	// Unsettled: the file changed between the two reads of one check (a
	// kubelet swap or an editor caught mid-write); nothing was judged. The
	// events of that write bring another check, so it is neither an error
	// nor a rejection: counting it would alert on every well-timed swap.
	Unsettled Outcome = "unsettled"
)

// errUnsettled is readStable's answer when its two reads differ.
var errUnsettled = errors.New("the file is still being written; will check again")

// Reloader applies the config file when its content changed and is valid.
type Reloader struct {
	path        string
	reconfigure func(context.Context, *config.Config)
	parse       func(path string, data []byte) (*config.Config, error)
	// settle is the pause between the two reads that must agree before a
	// content is trusted, so a file caught mid-write is not taken for whole.
	settle time.Duration
	// betweenReads, if set, runs between the two reads (tests write there).
	betweenReads func()
	log          zerolog.Logger
	metrics      *Metrics
	onOutcome    func(Outcome)

	current atomic.Pointer[config.Config]

	mu          sync.Mutex
	lastApplied [sha256.Size]byte
	// lastRejected identifies what the previous check rejected: the content's
	// sha256, or the read error; "" when it found the config in force. A bad
	// commit stays in the file until someone fixes it, and periodic checks
	// must not report it anew every time.
	lastRejected string
}

// Initial is the config file as loaded at start.
type Initial struct {
	Path   string
	Config *config.Config
	sum    [sha256.Size]byte
}

// Load reads the config file for the first time. An invalid config at start
// is fatal (DESIGN §5): the error lists every problem.
func Load(path string) (*Initial, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read config file: %w", err)
	}
	cfg, err := config.ParseFile(path, data)
	if err != nil {
		return nil, err
	}
	return &Initial{Path: path, Config: cfg, sum: sha256.Sum256(data)}, nil
}

// ReloaderOptions configure a Reloader.
type ReloaderOptions struct {
	// Initial is the config in force at start.
	Initial *Initial
	// Reconfigure puts a new valid config in force.
	Reconfigure func(context.Context, *config.Config)
	// Metrics (optional) records every outcome.
	Metrics *Metrics
	// OnOutcome, if set, is told every outcome.
	OnOutcome func(Outcome)
	Log       zerolog.Logger
}

// NewReloader returns a Reloader whose config in force is opts.Initial's.
func NewReloader(opts ReloaderOptions) *Reloader {
	r := &Reloader{path: opts.Initial.Path, reconfigure: opts.Reconfigure, parse: config.ParseFile, settle: 50 * time.Millisecond,
		log: opts.Log, metrics: opts.Metrics, onOutcome: opts.OnOutcome, lastApplied: opts.Initial.sum}
	r.current.Store(opts.Initial.Config)
	opts.Metrics.loaded(time.Now())
	return r
}

// Current returns the newest valid config the Reloader has seen: the one
// NewReloader loaded, or the last one passed to reconfigure (it is set just before
// reconfigure is called). It never waits for a running check, so a replica that
// becomes leader can ask for the config to act on at any time.
func (r *Reloader) Current() *config.Config {
	return r.current.Load()
}

// Check reads the file and applies it if it is new and valid. It is safe to
// call at any time and from several goroutines.
func (r *Reloader) Check(ctx context.Context) Outcome {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.check(ctx)
	r.metrics.outcome(out, time.Now())
	if r.onOutcome != nil {
		r.onOutcome(out)
	}
	return out
}

func (r *Reloader) check(ctx context.Context) Outcome {
	data, readErr := r.readStable(ctx)
	if readErr != nil && ctx.Err() != nil {
		return Canceled
	}
	if errors.Is(readErr, errUnsettled) {
		r.log.Debug().Str("config", r.path).Str("outcome", string(Unsettled)).Msg("config reload: the file changed while it was read; checking again")
		return Unsettled
	}
	sum := sha256.Sum256(data)
	if readErr == nil && sum == r.lastApplied {
		if r.lastRejected != "" {
			r.log.Info().Str("config", r.path).Str("outcome", string(Unchanged)).
				Msg("config reload: the file holds the config in force again")
		}
		r.lastRejected = ""
		return Unchanged
	}
	found := fingerprint(sum, readErr)
	if found == r.lastRejected {
		r.log.Debug().Str("config", r.path).Str("outcome", string(StillRejected)).
			Msg("config reload: the file still holds what was rejected; the last valid config stays in force")
		return StillRejected
	}
	if readErr != nil {
		return r.reject(found, r.log.Error().Err(readErr), "config reload: cannot read the file; the last valid config stays in force")
	}
	cfg, err := r.parse(r.path, data)
	if err != nil {
		ev := r.log.Error()
		var cerr *config.Error
		if errors.As(err, &cerr) {
			ev = ev.Strs("problems", cerr.Lines())
		} else {
			ev = ev.Err(err)
		}
		return r.reject(found, ev, "config reload: invalid config; the last valid config stays in force")
	}
	r.current.Store(cfg)
	r.lastApplied = sum
	r.lastRejected = ""
	r.reconfigure(ctx, cfg)
	r.log.Info().Str("config", r.path).Str("outcome", string(Applied)).Int("specs", len(cfg.Specs)).
		Str("sha256", fmt.Sprintf("%x", sum[:8])).Msg("config reload: new config applied")
	return Applied
}

// fingerprint names what a check found, so that the next check recognises
// the same rejection: the read error, or else the content's sha256.
func fingerprint(sum [sha256.Size]byte, readErr error) string {
	if readErr != nil {
		return "read error: " + readErr.Error()
	}
	return fmt.Sprintf("sha256:%x", sum)
}

// reject remembers what was rejected and logs ev with msg.
func (r *Reloader) reject(found string, ev *zerolog.Event, msg string) Outcome {
	r.lastRejected = found
	ev.Str("config", r.path).Str("outcome", string(Rejected)).Msg(msg)
	return Rejected
}

// readStable reads the file twice, settle apart, and returns the content only
// when both reads agree.
func (r *Reloader) readStable(ctx context.Context) ([]byte, error) {
	first, err := os.ReadFile(r.path)
	if err != nil {
		return nil, err
	}
	if r.betweenReads != nil {
		r.betweenReads()
	}
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(r.settle):
	}
	second, err := os.ReadFile(r.path)
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(first, second) {
		return nil, errUnsettled
	}
	return first, nil
}
