package chartsource

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/internal/testenv"
)

// A stop cancels the work's context and waits for the work: every chart
// fetch must end with that context, even when its server accepts the
// connection and never answers. These tests give each fetch such a server,
// cancel the context once the request has reached it, and wait for the call
// to return the context's error; the download timeout is an hour, so only
// the context can end it.

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
			server := testenv.SilentServerFor(t, testCA)
			repo := server.URL
			if tc.oci {
				repo = "oci://" + server.Addr + "/charts"
			}
			c := hourLongCache(t)
			err := server.CancelOnceSent(t, func(ctx context.Context) error {
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
	server := testenv.SilentServerFor(t, testCA)
	c := hourLongCache(t)
	ref := config.Chart{Repo: server.URL, Name: "hello", Version: "0.1.0"}
	first, cancelFirst := context.WithCancel(context.Background())
	defer cancelFirst()
	firstDone := make(chan error, 1)
	go func() {
		_, err := c.Load(first, ref, "/")
		firstDone <- err
	}()
	testenv.Eventually(t, 2*time.Minute, "the first fetch reached the silent server", func() (bool, error) { return server.Requests() == 1, nil })

	second, cancelSecond := context.WithCancel(context.Background())
	secondDone := make(chan error, 1)
	go func() {
		_, err := c.Load(second, ref, "/")
		secondDone <- err
	}()
	cancelSecond()
	if err := testenv.Receive(t, "the waiting load returned after its context was cancelled", secondDone); !errors.Is(err, context.Canceled) {
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
