package helmops

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"k8s.io/client-go/rest"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/internal/testenv"
)

// A stop cancels the work's context and waits for the work: every I/O on
// the way must end with that context, even when its server accepts the
// connection and never answers. These tests give each I/O such a server,
// cancel the context once the request has reached it, and wait for the call
// to return the context's error; the timeouts of their own (the download
// timeout, the Helm timeout) are an hour, so only the context can end them.

func silentServer(t *testing.T) *testenv.SilentServer {
	t.Helper()
	s, err := testenv.NewSilentServer(testCA)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// cancelOnceSent runs call with a context it cancels once server has got a
// request (after those it had already), and returns call's error.
func cancelOnceSent(t *testing.T, server *testenv.SilentServer, call func(context.Context) error) error {
	t.Helper()
	before := server.Requests()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- call(ctx) }()
	waitUntil(t, "the request reached the silent server", func() (bool, error) {
		select {
		case err := <-done:
			t.Fatalf("the call returned before its request reached the server: %v", err)
		default:
		}
		return server.Requests() > before, nil
	})
	cancel()
	return receive(t, "the call returned after its context was cancelled", done)
}

// receive waits for the error a call sends on done.
func receive(t *testing.T, what string, done <-chan error) error {
	t.Helper()
	var err error
	waitUntil(t, what, func() (bool, error) {
		select {
		case err = <-done:
			return true, nil
		default:
			return false, nil
		}
	})
	return err
}

func hourLongCache(t *testing.T) *ChartCache {
	t.Helper()
	c, err := NewChartCache(ChartCacheOptions{Dir: t.TempDir(), Timeout: time.Hour, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestChartFetchesEndWithTheirContext(t *testing.T) {
	for _, tc := range []struct {
		name string
		oci  bool
	}{{"oci registry", true}, {"chart repository", false}} {
		t.Run(tc.name, func(t *testing.T) {
			server := silentServer(t)
			repo := server.URL
			if tc.oci {
				repo = "oci://" + server.Addr + "/charts"
			}
			c := hourLongCache(t)
			err := cancelOnceSent(t, server, func(ctx context.Context) error {
				_, err := c.Load(ctx, config.Chart{Repo: repo, Name: "hello", Version: "0.1.0"}, "/")
				return err
			})
			if !errors.Is(err, context.Canceled) {
				t.Errorf("a load from a server that never answers, cancelled: %v, want context.Canceled", err)
			}
		})
	}
}

// TestChartFetchLockEndsWithTheContext: a worker waiting for another's fetch
// of the same index (which hangs) stops waiting when its context ends.
func TestChartFetchLockEndsWithTheContext(t *testing.T) {
	server := silentServer(t)
	c := hourLongCache(t)
	ref := config.Chart{Repo: server.URL, Name: "hello", Version: "0.1.0"}
	first, cancelFirst := context.WithCancel(context.Background())
	defer cancelFirst()
	firstDone := make(chan error, 1)
	go func() {
		_, err := c.Load(first, ref, "/")
		firstDone <- err
	}()
	waitUntil(t, "the first fetch reached the silent server", func() (bool, error) { return server.Requests() == 1, nil })

	second, cancelSecond := context.WithCancel(context.Background())
	secondDone := make(chan error, 1)
	go func() {
		_, err := c.Load(second, ref, "/")
		secondDone <- err
	}()
	cancelSecond()
	if err := receive(t, "the waiting load returned after its context was cancelled", secondDone); !errors.Is(err, context.Canceled) {
		t.Errorf("a load waiting for another's fetch, cancelled: %v, want context.Canceled", err)
	}
	if server.Requests() != 1 {
		t.Errorf("the waiting load fetched too (%d requests)", server.Requests())
	}
	select {
	case err := <-firstDone:
		t.Fatalf("the first fetch ended before its context: %v", err)
	default:
	}
	cancelFirst()
	<-firstDone
}

// TestHelmReadsEndWithTheirContext: release reads (Helm's storage drivers,
// which read with context.Background()) and the capabilities an operation
// reads first (discovery, which takes no context) end with the caller's
// context when the API server never answers.
func TestHelmReadsEndWithTheirContext(t *testing.T) {
	for _, driver := range []string{DriverSecret, DriverConfigMap} {
		t.Run(driver, func(t *testing.T) {
			server := silentServer(t)
			cfg := &rest.Config{Host: server.URL, TLSClientConfig: rest.TLSClientConfig{CAFile: testCA.File}, QPS: -1}
			m, err := New(Options{RESTConfig: cfg, StorageDriver: driver, Timeout: time.Hour, Log: zerolog.Nop()})
			if err != nil {
				t.Fatal(err)
			}
			err = cancelOnceSent(t, server, func(ctx context.Context) error {
				_, err := m.Lookup(ctx, "ns", "r")
				return err
			})
			if !errors.Is(err, context.Canceled) {
				t.Errorf("a release read from an API server that never answers, cancelled: %v, want context.Canceled", err)
			}
			err = cancelOnceSent(t, server, func(ctx context.Context) error {
				_, err := m.ManagedReleases(ctx, []string{"ns"})
				return err
			})
			if !errors.Is(err, context.Canceled) {
				t.Errorf("a listing of releases, cancelled: %v, want context.Canceled", err)
			}
			err = cancelOnceSent(t, server, func(ctx context.Context) error {
				_, err := m.Install(ctx, desired(t, "ns", "r", "charts/hello", nil))
				return err
			})
			if !errors.Is(err, context.Canceled) {
				t.Errorf("an install whose capabilities cannot be read, cancelled: %v, want context.Canceled", err)
			}
		})
	}
}
