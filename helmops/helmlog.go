package helmops

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/rs/zerolog"

	"github.com/autox-dev/autox/internal/redact"
)

// helmLog is the slog.Handler Helm 4's action configuration, kube client
// and storage drivers log through: every record goes to zerolog at debug
// level (Helm's warnings too: they are details of an operation whose outcome
// autox logs itself), redacted. Helm 4 puts much of what it says into
// attributes — errors as slog.Any("error", err), which may quote an API
// server's message and with it a value — so the message and every attribute
// value, inside groups too, pass through hide; an error or any other value is
// formatted first, then redacted. It is set on each configuration before
// Init, which hands it to the kube client and the driver Init makes, and on
// autox's own secret driver; it is never made the process's default
// (slog.SetDefault): Helm's package-level slog calls go to slog.Default,
// whose text the standard logger's route withholds (RouteStdLog).
type helmLog struct {
	log  zerolog.Logger
	hide *redact.Redactor
	// attrs are those WithAttrs added, already redacted, their keys
	// qualified by the groups open when they were added.
	attrs []field
	// group is the dotted prefix of the groups WithGroup opened.
	group string
}

// field is one attribute as it is logged: a dotted key and a redacted text.
type field struct{ key, value string }

func newHelmLog(log zerolog.Logger, hide *redact.Redactor) *helmLog {
	return &helmLog{log: log, hide: hide}
}

func (h *helmLog) Enabled(context.Context, slog.Level) bool {
	return h.log.Debug().Enabled()
}

func (h *helmLog) Handle(_ context.Context, r slog.Record) error {
	ev := h.log.Debug()
	if !ev.Enabled() {
		return nil // neither format nor redact a line nobody reads
	}
	fields := append([]field(nil), h.attrs...)
	r.Attrs(func(a slog.Attr) bool {
		fields = h.flatten(fields, h.group, a)
		return true
	})
	if len(fields) > 0 {
		attrs := zerolog.Dict()
		for _, f := range fields {
			attrs = attrs.Str(f.key, f.value)
		}
		ev = ev.Dict("helm", attrs) // apart from autox's own fields, which may share a name
	}
	if r.Level >= slog.LevelWarn {
		ev = ev.Str("helmLevel", r.Level.String())
	}
	ev.Msg(h.hide.String(r.Message))
	return nil
}

func (h *helmLog) WithAttrs(attrs []slog.Attr) slog.Handler {
	c := *h
	c.attrs = append([]field(nil), h.attrs...)
	for _, a := range attrs {
		c.attrs = h.flatten(c.attrs, h.group, a)
	}
	return &c
}

func (h *helmLog) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	c := *h
	c.group = qualified(h.group, name)
	return &c
}

// flatten appends a as fields, a group's members each under its dotted key,
// every value formatted and redacted.
func (h *helmLog) flatten(out []field, prefix string, a slog.Attr) []field {
	v := a.Value.Resolve()
	if v.Kind() == slog.KindGroup {
		if a.Key != "" {
			prefix = qualified(prefix, a.Key)
		}
		for _, m := range v.Group() {
			out = h.flatten(out, prefix, m)
		}
		return out
	}
	if a.Key == "" && v.Any() == nil {
		return out // an empty attribute, which slog says to ignore
	}
	return append(out, field{key: qualified(prefix, a.Key), value: h.hide.String(formatted(v))})
}

// formatted is the text of an attribute value: an error's message, any
// other value as %v prints it.
func formatted(v slog.Value) string {
	if v.Kind() == slog.KindAny {
		if err, ok := v.Any().(error); ok {
			return err.Error()
		}
		return fmt.Sprintf("%+v", v.Any())
	}
	return v.String()
}

func qualified(prefix, key string) string {
	if prefix == "" {
		return key
	}
	return strings.Join([]string{prefix, key}, ".")
}
