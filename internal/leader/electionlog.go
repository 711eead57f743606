package leader

import (
	"errors"
	"slices"

	"github.com/go-logr/logr"
	"github.com/rs/zerolog"
)

// electionLogger is the logger client-go's leader election of one campaign
// logs to (through its context): its lines go to the campaign's zerolog
// logger, with the Lease and the identity, at client-go's levels — except
// this package's own refusal to take a shard Lease beyond the fair share
// (errFairShare), which client-go reports as a failed create or update:
// that is a replica declining by design, logged at debug level. Every other
// error stays an error. Verbose lines (V(1) and up) are dropped, as klog's
// default verbosity does.
func electionLogger(log zerolog.Logger) logr.Logger {
	return logr.New(&electionSink{log: log.With().Str("component", "client-go").Logger()})
}

type electionSink struct {
	log zerolog.Logger
	kv  []any
}

func (s *electionSink) Init(logr.RuntimeInfo) {}

func (s *electionSink) Enabled(level int) bool { return level <= 0 }

func (s *electionSink) Info(level int, msg string, kv ...any) {
	if level <= 0 {
		s.send(s.log.Info(), msg, kv)
	}
}

func (s *electionSink) Error(err error, msg string, kv ...any) {
	e := s.log.Error()
	if errors.Is(err, errFairShare) {
		e = s.log.Debug()
	}
	s.send(e.Err(err), msg, kv)
}

func (s *electionSink) WithValues(kv ...any) logr.LogSink {
	return &electionSink{log: s.log, kv: append(slices.Clip(s.kv), kv...)}
}

func (s *electionSink) WithName(string) logr.LogSink { return s }

func (s *electionSink) send(e *zerolog.Event, msg string, kv []any) {
	all := append(slices.Clip(s.kv), kv...)
	for i := 0; i+1 < len(all); i += 2 {
		key, ok := all[i].(string)
		if !ok {
			continue
		}
		switch v := all[i+1].(type) {
		case error:
			e = e.AnErr(key, v)
		case string:
			e = e.Str(key, v)
		default:
			e = e.Interface(key, v)
		}
	}
	e.Msg(msg)
}
