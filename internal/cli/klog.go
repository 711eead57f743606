package cli

import (
	"strings"

	"github.com/rs/zerolog"
	"k8s.io/klog/v2"
)

// routeKlog sends client-go's klog output (reflector retries, leader election
// notes) through zerolog, so autox's log stays one JSON line per event.
func routeKlog(log zerolog.Logger) {
	klog.LogToStderr(false)
	klog.SetOutput(klogWriter{log: log.With().Str("component", "client-go").Logger()})
}

type klogWriter struct{ log zerolog.Logger }

// Write takes one klog line: "E1201 12:00:00.000000   1 file.go:10] message".
func (w klogWriter) Write(p []byte) (int, error) {
	line := strings.TrimRight(string(p), "\n")
	level := zerolog.InfoLevel
	if len(line) > 0 {
		switch line[0] {
		case 'W':
			level = zerolog.WarnLevel
		case 'E', 'F':
			level = zerolog.ErrorLevel
		}
	}
	if i := strings.Index(line, "] "); i >= 0 {
		line = line[i+2:]
	}
	w.log.WithLevel(level).Msg(line)
	return len(p), nil
}
