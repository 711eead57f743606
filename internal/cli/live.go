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

	mu   sync.Mutex
	ctrl *triggers.Controller
}

// reconfigure is the reloader's callback for a new valid config.
func (l *liveController) reconfigure(ctx context.Context, cfg *config.Config) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ctrl == nil {
		l.state.Replace(cfg)
		l.log.Info().Int("specs", len(cfg.Specs)).Msg("config kept for when this process leads")
		return
	}
	ch := l.ctrl.Reconfigure(ctx, cfg)
	l.log.Info().Strs("removedSpecs", ch.RemovedSpecs).Strs("addedSpecs", ch.AddedSpecs).
		Strs("changedSpecs", ch.ChangedSpecs).Int("removedReleaseSpecs", len(ch.RemovedReleaseSpecs)).Msg("config changes")
}

// attach builds the term's controller; no reload can slip in between the
// config it starts from and its registration.
func (l *liveController) attach(build func(*triggers.ConfigState) *triggers.Controller) *triggers.Controller {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ctrl = build(l.state)
	return l.ctrl
}

func (l *liveController) detach() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ctrl = nil
}

func (l *liveController) current() *triggers.Controller {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ctrl
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
