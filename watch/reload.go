package watch

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/autox-dev/autox/config"
)

// Outcome is what one reload check did.
type Outcome string

const (
	// Unchanged: the content is the one last applied; nothing to do.
	Unchanged Outcome = "unchanged"
	// Applied: a new valid config was put in force.
	Applied Outcome = "applied"
	// Rejected: the file is missing, unreadable, still changing, empty or
	// invalid; the last valid config stays in force.
	Rejected Outcome = "rejected"
)

// Reloader applies the config file when its content changed and is valid.
type Reloader struct {
	path  string
	apply func(context.Context, *config.Config)
	// settle is the pause between the two reads that must agree before a
	// content is trusted, so a file caught mid-write is not taken for whole.
	settle time.Duration
	log    zerolog.Logger
	// OnOutcome, if set, is told every outcome (for metrics).
	OnOutcome func(Outcome)

	mu          sync.Mutex
	lastApplied [sha256.Size]byte
}

// NewReloader loads the config file for the first time. It returns the
// config, or the load error (an invalid config at start is fatal, DESIGN §5).
func NewReloader(path string, apply func(context.Context, *config.Config), log zerolog.Logger) (*Reloader, *config.Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("cannot read config file: %w", err)
	}
	cfg, err := config.ParseFile(path, data)
	if err != nil {
		return nil, nil, err
	}
	return &Reloader{path: path, apply: apply, settle: 50 * time.Millisecond, log: log, lastApplied: sha256.Sum256(data)}, cfg, nil
}

// Check reads the file and applies it if it is new and valid. It is safe to
// call at any time and from several goroutines.
func (r *Reloader) Check(ctx context.Context) Outcome {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.check(ctx)
	if r.OnOutcome != nil {
		r.OnOutcome(out)
	}
	return out
}

func (r *Reloader) check(ctx context.Context) Outcome {
	data, err := r.readStable(ctx)
	if err != nil {
		r.log.Error().Err(err).Str("config", r.path).Str("outcome", string(Rejected)).
			Msg("config reload: cannot read the file; the last valid config stays in force")
		return Rejected
	}
	sum := sha256.Sum256(data)
	if sum == r.lastApplied {
		return Unchanged
	}
	cfg, err := config.ParseFile(r.path, data)
	if err != nil {
		ev := r.log.Error().Str("config", r.path).Str("outcome", string(Rejected))
		var cerr *config.Error
		if errors.As(err, &cerr) {
			ev = ev.Strs("problems", cerr.Lines())
		} else {
			ev = ev.Err(err)
		}
		ev.Msg("config reload: invalid config; the last valid config stays in force")
		return Rejected
	}
	r.apply(ctx, cfg)
	r.lastApplied = sum
	r.log.Info().Str("config", r.path).Str("outcome", string(Applied)).Int("specs", len(cfg.Specs)).
		Str("sha256", fmt.Sprintf("%x", sum[:8])).Msg("config reload: new config applied")
	return Applied
}

// readStable reads the file twice, settle apart, and returns the content only
// when both reads agree.
func (r *Reloader) readStable(ctx context.Context) ([]byte, error) {
	first, err := os.ReadFile(r.path)
	if err != nil {
		return nil, err
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
		return nil, errors.New("the file is still being written; will check again")
	}
	return first, nil
}
