package helmops

import (
	"context"
	stdlog "log"
	"regexp"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

// TestRouteStdLog: values whose types conflict in `global:` make Helm's
// value coalescing print a value with the standard logger during a real
// install. Routed, the line reaches zerolog at debug level as the fixed
// message with Helm's source location, without the value; at info level
// nothing is written; restore puts the logger back.
func TestRouteStdLog(t *testing.T) {
	const value = "s3cr3t-in-global"
	values := map[string]interface{}{
		"global": map[string]interface{}{"db": map[string]interface{}{"password": map[string]interface{}{"file": "/x"}}},
		"sub":    map[string]interface{}{"global": map[string]interface{}{"db": map[string]interface{}{"password": value}}},
	}
	ctx := context.Background()
	m := newManager(t, DriverSecret)
	ns := cluster.Namespace(t)
	before := stdlog.Writer()

	for _, tc := range []struct {
		name  string
		level zerolog.Level
		want  *regexp.Regexp // nil: nothing written
	}{
		{"debug", zerolog.DebugLevel, regexp.MustCompile(`^\{"level":"debug","component":"helm","source":"coalesce\.go:[0-9]+","message":"` + stdLogMessage + `"\}$`)},
		{"info", zerolog.InfoLevel, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs logBuffer
			restore := RouteStdLog(zerolog.New(&logs).Level(tc.level))
			_, err := m.Install(ctx, desired(t, ns, "u-"+tc.name, "charts/umbrella", values))
			restore()
			if err != nil {
				t.Fatal(err)
			}
			got := logs.String()
			if strings.Contains(got, value) {
				t.Fatalf("the value reached the log:\n%s", got)
			}
			lines := strings.Split(strings.TrimSpace(got), "\n")
			if tc.want == nil {
				if got != "" {
					t.Errorf("written at info level:\n%s", got)
				}
				return
			}
			for _, l := range lines {
				if !tc.want.MatchString(l) {
					t.Errorf("line %s; want %s", l, tc.want)
				}
			}
		})
	}
	if stdlog.Writer() != before {
		t.Error("restore did not put the standard logger's output back")
	}
}

// TestStdLogWriterKeepsOnlyASourceLocation: a line that does not start with
// the file and line (another package changed the logger's flags) gives the
// message alone, since what comes first may be the text.
func TestStdLogWriterKeepsOnlyASourceLocation(t *testing.T) {
	for line, want := range map[string]string{
		"coalesce.go:319: warning: value (x)\n":          `{"level":"debug","source":"coalesce.go:319","message":"` + stdLogMessage + `"}`,
		"2026/12/01 10:00:00 coalesce.go:319: warning\n": `{"level":"debug","message":"` + stdLogMessage + `"}`,
		"s3cr3t-value: warning\n":                        `{"level":"debug","message":"` + stdLogMessage + `"}`,
		"no separator at all\n":                          `{"level":"debug","message":"` + stdLogMessage + `"}`,
	} {
		var logs logBuffer
		w := stdLogWriter{log: zerolog.New(&logs).Level(zerolog.DebugLevel)}
		if n, err := w.Write([]byte(line)); n != len(line) || err != nil {
			t.Errorf("Write(%q) = %d, %v", line, n, err)
		}
		if got := strings.TrimSpace(logs.String()); got != want {
			t.Errorf("Write(%q) logged %s; want %s", line, got, want)
		}
	}
}
