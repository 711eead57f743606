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
// to directly instead of to its configuration's slog handler, to log at
// debug level, with the fixed stdLogMessage, the source file and line of
// Helm's call, and never the text. It returns a function that restores the
// logger as it was.
//
// In Helm v4.3, two kinds of lines reach it from autox's operations:
//   - log.Printf calls: chart/common/util's value coalescing (coalesce.go:
//     type conflicts, in `global:` and between a chart's and a subchart's
//     values, printed with %v, values included), chart/v2/util's
//     dependencies.go (conditions, tags and import-values), action's
//     hooks.go (a hook's log output or deletion failing), engine's lookup
//     errors, the loader's and sympath's warnings (requirements.yaml,
//     symbolic links), ignore's rules.go (.helmignore) and repo's index.go;
//   - package-level slog calls (slog.Debug/Info/Warn, not the
//     configuration's handler): kube's ready.go, wait.go and client.go
//     (e.g. "resource exists on cluster but not in original release"),
//     release/v1/util's manifest_sorter.go ("skipping unknown hooks"). They
//     go to slog.Default, whose default handler writes Info and above
//     through this logger. That holds only while nobody calls
//     slog.SetDefault, which autox never does (a test pins it).
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
