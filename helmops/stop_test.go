package helmops

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"k8s.io/client-go/rest"

	"github.com/autox-dev/autox/internal/testenv"
)

// A stop cancels the work's context and waits for the work: every I/O on
// the way must end with that context, even when its server accepts the
// connection and never answers. These tests give each I/O such a server,
// cancel the context once the request has reached it, and wait for the call
// to return the context's error; the Helm timeout is an hour, so only the
// context can end them (the chart fetches: chartsource's stop_test.go).

// TestHelmReadsEndWithTheirContext: release reads (Helm's storage drivers,
// which read with context.Background()) and the capabilities an operation
// reads first (discovery, which takes no context) end with the caller's
// context when the API server never answers.
func TestHelmReadsEndWithTheirContext(t *testing.T) {
	for _, driver := range []string{DriverSecret, DriverConfigMap} {
		t.Run(driver, func(t *testing.T) {
			server := testenv.SilentServerFor(t, testCA)
			cfg := &rest.Config{Host: server.URL, TLSClientConfig: rest.TLSClientConfig{CAFile: testCA.File}, QPS: -1}
			m, err := New(Options{RESTConfig: cfg, StorageDriver: driver, Timeout: time.Hour, Log: zerolog.Nop()})
			if err != nil {
				t.Fatal(err)
			}
			err = server.CancelOnceSent(t, func(ctx context.Context) error {
				_, err := m.Lookup(ctx, "ns", "r")
				return err
			})
			if !errors.Is(err, context.Canceled) {
				t.Errorf("a release read from an API server that never answers, cancelled: %v, want context.Canceled", err)
			}
			err = server.CancelOnceSent(t, func(ctx context.Context) error {
				_, err := m.ManagedReleases(ctx, []string{"ns"})
				return err
			})
			if !errors.Is(err, context.Canceled) {
				t.Errorf("a listing of releases, cancelled: %v, want context.Canceled", err)
			}
			err = server.CancelOnceSent(t, func(ctx context.Context) error {
				_, err := m.Install(ctx, desired(t, "ns", "r", "charts/hello", nil))
				return err
			})
			if !errors.Is(err, context.Canceled) {
				t.Errorf("an install whose capabilities cannot be read, cancelled: %v, want context.Canceled", err)
			}
		})
	}
}
