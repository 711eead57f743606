package cli

import (
	"context"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/rs/zerolog"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/triggers"
)

// liveController is the controller of the current leadership term, if any,
// and the config state every term shares. Config reloads go through it, so a
// reload is applied by the running controller, or kept for the next term.
type liveController struct {
	state *triggers.ConfigState
	log   zerolog.Logger
	// sharded: one controller per shard held (--shards above 1), each with
	// a config state of its own started from state's config; state then
	// only keeps the config for the shard terms to come.
	sharded bool

	mu    sync.Mutex
	ctrls map[int]*triggers.Controller
}

// reconfigure is the reloader's callback for a new valid config.
func (l *liveController) reconfigure(ctx context.Context, cfg *config.Config) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.ctrls) == 0 || l.sharded {
		l.state.Replace(cfg)
	}
	if len(l.ctrls) == 0 {
		l.log.Info().Int("specs", len(cfg.Specs)).Msg("config kept for when this process leads")
		return
	}
	for i, c := range l.ctrls {
		ch := c.Reconfigure(ctx, cfg)
		ev := l.log.Info()
		if l.sharded {
			ev = ev.Int("shard", i)
		}
		ev.Strs("removedSpecs", ch.RemovedSpecs).Strs("addedSpecs", ch.AddedSpecs).
			Strs("changedSpecs", ch.ChangedSpecs).Int("removedReleaseSpecs", len(ch.RemovedReleaseSpecs)).Msg("config changes")
	}
}

// attach builds the term's controller; no reload can slip in between the
// config it starts from and its registration.
// shard is the key of the one controller without shards.
func (l *liveController) attach(shard int, build func(*triggers.ConfigState) *triggers.Controller) *triggers.Controller {
	l.mu.Lock()
	defer l.mu.Unlock()
	state := l.state
	if l.sharded {
		state = triggers.NewConfigState(l.state.Config())
	}
	if l.ctrls == nil {
		l.ctrls = map[int]*triggers.Controller{}
	}
	c := build(state)
	l.ctrls[shard] = c
	return c
}

func (l *liveController) detach(shard int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.ctrls, shard)
}

// current is the controller of the term without shards, if any.
func (l *liveController) current() *triggers.Controller {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ctrls[0]
}

// all are the controllers of every term running.
func (l *liveController) all() []*triggers.Controller {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]*triggers.Controller, 0, len(l.ctrls))
	for _, c := range l.ctrls {
		out = append(out, c)
	}
	return out
}

// signalContext is cancelled by the first SIGINT or SIGTERM; a second one
// exits at once.
func signalContext(log zerolog.Logger) (context.Context, func()) {
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		s, ok := <-ch
		if !ok {
			return
		}
		log.Info().Str("signal", s.String()).Msg("stopping; a second signal exits at once")
		cancel()
		if _, ok := <-ch; ok {
			os.Exit(1)
		}
	}()
	var once sync.Once
	return ctx, func() {
		once.Do(func() {
			signal.Stop(ch)
			close(ch)
			cancel()
		})
	}
}
