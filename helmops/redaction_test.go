package helmops

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"

	"github.com/autox-dev/autox/internal/redact"
)

// logBuffer collects a Manager's log; Helm logs from its own goroutines.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) Reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.Reset()
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// secret is not a valid label value, so the API server refuses the label
// chart's ConfigMap and quotes the value: `Invalid value: "Not A Label Value!"`.
const secret = "Not A Label Value!"

// TestErrorsHideValues: what the API server and Helm say about a refused
// value reaches the caller and the debug log without the value, yet still
// says what failed; without a Redactor the same operations do quote it (so
// the test proves something).
func TestErrorsHideValues(t *testing.T) {
	ctx := context.Background()
	ns := cluster.Namespace(t)
	var logs logBuffer
	m, err := New(withClients(t, Options{RESTConfig: cluster.Config, Timeout: 0, MaxHistory: 3, Log: zerolog.New(&logs).Level(zerolog.DebugLevel)}))
	if err != nil {
		t.Fatal(err)
	}
	bad := map[string]interface{}{"label": secret}
	hide := redact.New(bad)
	badRelease := func(name string, r *redact.Redactor) Target {
		d := desired(t, ns, name, "charts/label", bad)
		d.Redact = r
		return d
	}
	for _, name := range []string{"up", "up-plain", "re"} {
		if _, err := m.Install(ctx, desired(t, ns, name, "charts/label", nil)); err != nil {
			t.Fatal(err)
		}
	}

	// Without a Redactor the value is there: the API server quotes it.
	_, err = m.Install(ctx, badRelease("in-plain", nil))
	if err == nil || !strings.Contains(err.Error(), secret) {
		t.Fatalf("unredacted install error = %v; want the API server to quote the value", err)
	}
	logs.Reset()
	if _, err := m.Upgrade(ctx, badRelease("up-plain", nil)); err == nil || !strings.Contains(err.Error(), secret) || !strings.Contains(logs.String(), secret) {
		t.Fatalf("unredacted upgrade: error %v; the debug log must quote the value too:\n%s", err, logs.String())
	}
	logs.Reset()

	for _, tc := range []struct {
		name string
		run  func() error
		says string
	}{
		{"install", func() error { _, err := m.Install(ctx, badRelease("in", hide)); return err }, "cannot install release " + ns + "/in: "},
		{"upgrade", func() error { _, err := m.Upgrade(ctx, badRelease("up", hide)); return err }, "cannot upgrade release " + ns + "/up: "},
		{"reinstall", func() error { _, err := m.Reinstall(ctx, badRelease("re", hide)); return err }, "cannot reinstall release " + ns + "/re: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.run()
			if err == nil {
				t.Fatal("the API server must refuse the label")
			}
			msg := err.Error()
			if strings.Contains(msg, secret) || !strings.HasPrefix(msg, tc.says) ||
				!strings.Contains(msg, `metadata.labels: Invalid value: "***"`) {
				t.Errorf("error = %q; want it to start %q and say which field was refused, without the value", msg, tc.says)
			}
		})
	}
	if got := logs.String(); strings.Contains(got, secret) || !strings.Contains(got, `Invalid value: \"***\"`) {
		t.Errorf("debug log must quote the refusal without the value:\n%s", got)
	}
}

// TestUninstallAndRollbackHideValues: their errors go through the Redactor
// the caller passes. The refusal here is the test's transport, whose message
// carries the secret as an API error might.
func TestUninstallAndRollbackHideValues(t *testing.T) {
	ctx := context.Background()
	ns := cluster.Namespace(t)
	rr := &recordRequests{why: ": " + secret}
	m := managerThrough(t, DriverSecret, rr)
	if _, err := m.Install(ctx, desired(t, ns, "r", "charts/label", nil)); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Upgrade(ctx, desired(t, ns, "r", "charts/label", map[string]interface{}{"label": "two"})); err != nil {
		t.Fatal(err)
	}
	hide := redact.New(map[string]interface{}{"token": secret})
	for _, tc := range []struct {
		name   string
		method string
		run    func(*redact.Redactor) error
		says   string
	}{
		{"rollback", http.MethodPut, func(r *redact.Redactor) error { return m.Rollback(ctx, ns, "r", 0, 1, r) }, "cannot roll back release " + ns + "/r to revision 1: "},
		{"uninstall", http.MethodDelete, func(r *redact.Redactor) error { return m.Uninstall(ctx, ns, "r", 0, r) }, "cannot uninstall release " + ns + "/r: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rr.refuse = isMethod(tc.method)
			defer func() { rr.refuse = nil }()
			if err := tc.run(nil); err == nil || !strings.Contains(err.Error(), secret) {
				t.Fatalf("without a Redactor: %v; want the refusal quoted", err)
			}
			err := tc.run(hide)
			if err == nil || strings.Contains(err.Error(), secret) || !strings.HasPrefix(err.Error(), tc.says) || !strings.Contains(err.Error(), "test refuses") {
				t.Errorf("error = %v; want it to start %q and keep the cause without the value", err, tc.says)
			}
		})
	}
}

// TestHelmLogHidesValues: Helm 4 logs through slog, much of it in
// attributes (an API error as slog.Any("error", err), which may quote a
// value): the message and every attribute, in groups and in attributes
// added with WithAttrs too, reach the log without the value, and say the
// rest; at info level nothing is logged.
func TestHelmLogHidesValues(t *testing.T) {
	var logs logBuffer
	m := &Manager{opts: Options{Log: zerolog.New(&logs).Level(zerolog.DebugLevel)}}
	log := slog.New(m.helmLog("ns", redact.New(map[string]interface{}{"v": secret})))
	refused := fmt.Errorf("Secret \"s\" is invalid: data[token]: Invalid value: %q", secret)
	log.Warn("value "+secret+" refused", slog.Any("error", refused), slog.String("name", "s"))
	log.With("value", secret).WithGroup("object").Debug("applying", "kind", "Secret", slog.Group("data", "token", secret))
	log.Debug("a record that does not decode", "key", "sh.helm.release.v1.r.v1", slog.Any("cause", struct{ Data string }{secret}))
	got := logs.String()
	for _, want := range []string{
		`"message":"value *** refused"`, `data[token]: Invalid value: \"***\"`, `"name":"s"`, `"helmLevel":"WARN"`,
		`"value":"***"`, `"object.kind":"Secret"`, `"object.data.token":"***"`, `"key":"sh.helm.release.v1.r.v1"`, `"cause":"{Data:***}"`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the log lacks %s:\n%s", want, got)
		}
	}
	if strings.Contains(got, secret) {
		t.Errorf("the log quotes the value:\n%s", got)
	}

	logs.Reset()
	m.opts.Log = zerolog.New(&logs).Level(zerolog.InfoLevel)
	slog.New(m.helmLog("ns", nil)).Warn("not shown", "error", errors.New("shown neither"))
	if logs.String() != "" {
		t.Errorf("Helm's lines at info level: %q", logs.String())
	}
}
