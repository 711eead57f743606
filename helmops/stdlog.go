package helmops

import (
	stdlog "log"
	"regexp"
	"strings"

	"github.com/rs/zerolog"
)

// stdLogMessage is the message of every line Helm writes with the standard
// log package.
const stdLogMessage = "Helm wrote a line to the standard logger; its text is withheld, it may quote values"

// RouteStdLog sends the standard library logger's output, which Helm writes
// to directly instead of to its debug log, to log at debug level, with the
// fixed stdLogMessage, the source file and line of Helm's call, and never the
// text. It returns a function that restores the logger as it was.
//
// In Helm v3.22, these are reached from autox's operations (chart loading,
// install, upgrade, rollback, uninstall): chartutil's value coalescing
// (coalesce.go: type conflicts, in `global:` and between a chart's and a
// subchart's values, printed with %v, values included), dependencies.go
// (conditions, tags and import-values), jsonschema.go (an unresolved $ref in
// a values schema), engine's lookup_func.go (lookup errors), action's
// hooks.go (a hook's log output or deletion failing), releaseutil's
// manifest_sorter.go (an unknown hook), chart/loader's load.go and
// internal/sympath (a chart's requirements.yaml or symbolic links), ignore's
// rules.go (.helmignore) and repo's index.go (invalid repository index
// entries); engine.go's only uses are in lint mode, which autox does not use.
//
// The text is withheld at every level because the standard logger is one
// for the process: a line cannot be told apart by the release whose values
// would redact it (operations run concurrently), and values are never logged
// (DESIGN §5), at debug level neither — a debug log is still a log, turned
// on where a problem is, and shipped with the rest. The source location says
// which warning it was, in Helm's source; the operation's error and Helm's
// redacted debug lines say the rest.
func RouteStdLog(log zerolog.Logger) (restore func()) {
	out, flags, prefix := stdlog.Writer(), stdlog.Flags(), stdlog.Prefix()
	// Lshortfile puts "file.go:line: " first, which is all that is kept.
	stdlog.SetFlags(stdlog.Lshortfile)
	stdlog.SetPrefix("")
	stdlog.SetOutput(stdLogWriter{log: log.With().Str("component", "helm").Logger()})
	return func() {
		stdlog.SetOutput(out)
		stdlog.SetFlags(flags)
		stdlog.SetPrefix(prefix)
	}
}

type stdLogWriter struct{ log zerolog.Logger }

// sourceLocation is what log.Lshortfile writes first; anything else (flags
// changed by another package since) is not kept, as it may be the text.
var sourceLocation = regexp.MustCompile(`^[A-Za-z0-9_.-]+\.go:[0-9]+$`)

// Write takes one line of the standard logger: "file.go:123: text".
func (w stdLogWriter) Write(p []byte) (int, error) {
	ev := w.log.Debug()
	if !ev.Enabled() {
		return len(p), nil
	}
	if source, _, ok := strings.Cut(string(p), ": "); ok && sourceLocation.MatchString(source) {
		ev = ev.Str("source", source)
	}
	ev.Msg(stdLogMessage)
	return len(p), nil
}
