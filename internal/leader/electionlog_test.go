package leader

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/autox-dev/autox/internal/testenv"
)

// logLines are the events logged to buf, decoded.
func logLines(t *testing.T, buf *testenv.SyncBuffer) []map[string]any {
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

// campaignOnce runs one campaign for the shard Lease of opts for a few
// retry periods, and returns what it logged.
func campaignOnce(t *testing.T, opts Options) []map[string]any {
	t.Helper()
	opts.setDefaults()
	buf := &testenv.SyncBuffer{}
	log := zerolog.New(buf).Level(zerolog.DebugLevel)
	ctx, cancel := context.WithTimeout(context.Background(), 8*opts.RetryPeriod)
	defer cancel()
	if _, err := campaign(ctx, opts, "me", log, func(ctx context.Context, _ *Term) error {
		t.Error("a term started")
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return logLines(t, buf)
}

// TestFairShareDeclineIsNoError: a replica at its fair share declines a
// free shard Lease at every attempt of its campaign; client-go reports that
// as a failed create, which is logged at debug level, not as an error. A
// real Lease error (the API server cannot be reached) is still logged as
// an error.
func TestFairShareDeclineIsNoError(t *testing.T) {
	ns := cluster.Namespace(t)
	opts := options(ns)
	opts.Name = ShardLeaseName("autox", 0)
	opts.gate = &shareGate{fair: func() int { return 0 }, ready: func() bool { return true }}
	declined := 0
	for _, l := range campaignOnce(t, opts) {
		e, _ := l["error"].(string)
		fair := strings.Contains(e, errFairShare.Error())
		if l["level"] == "error" {
			t.Errorf("logged as an error: %v", l)
		}
		if fair && l["level"] == "debug" && l["lock"] == ns+"/autox-shard-0" {
			declined++
		}
	}
	if declined < 2 {
		t.Errorf("%d debug lines of the declined shard, want one per attempt of the campaign", declined)
	}

	cut := &leaseRequests{}
	cut.cut.Store(true)
	opts.Client = cut.client(t)
	opts.gate = nil
	errorsLogged := 0
	for _, l := range campaignOnce(t, opts) {
		if e, _ := l["error"].(string); l["level"] == "error" && strings.Contains(e, errCut.Error()) {
			errorsLogged++
		}
	}
	if errorsLogged == 0 {
		t.Error("a Lease that cannot be read is not logged as an error")
	}
}
