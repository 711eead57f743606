package helmops

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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

// TestDebugLogHidesRecords: the drivers log a record they cannot decode with
// the whole object; its data (the encoded release, values included) must not
// reach the log, and redacted values must not either.
func TestDebugLogHidesRecords(t *testing.T) {
	var logs logBuffer
	m := &Manager{opts: Options{Log: zerolog.New(&logs).Level(zerolog.DebugLevel)}}
	rec := corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sh.helm.release.v1.r.v1"}, Data: map[string][]byte{"release": []byte("H4sIencoded")}}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "sh.helm.release.v1.c.v1"}, Data: map[string]string{"release": "H4sIencoded"}}
	log := m.debugLog("ns", redact.New(map[string]interface{}{"v": secret}))
	log("list: failed to decode release: %v: %s", rec, "bad gzip")
	log("list: failed to decode release: %v: %s", cm, "bad gzip")
	log("value %q refused", secret)
	got := logs.String()
	if strings.Contains(got, "H4sI") || strings.Contains(got, secret) ||
		!strings.Contains(got, "Secret sh.helm.release.v1.r.v1: bad gzip") || !strings.Contains(got, "ConfigMap sh.helm.release.v1.c.v1") ||
		!strings.Contains(got, `value \"***\" refused`) {
		t.Errorf("debug log:\n%s", got)
	}

	logs.Reset()
	m.opts.Log = zerolog.New(&logs).Level(zerolog.InfoLevel)
	m.debugLog("ns", nil)("not %s", "shown")
	if logs.String() != "" {
		t.Errorf("debug lines at info level: %q", logs.String())
	}
}
