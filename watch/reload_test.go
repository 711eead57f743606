package watch

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/rs/zerolog"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/internal/testenv"
)

const goodA = `
namespaces: [default]
specs:
  a:
    trigger: {version: v1, resource: configmaps, name: a, namespace: default}
    releaseSpecs:
      x: {chart: {path: charts/x}}
`

const goodB = goodA + `  b:
    trigger: {version: v1, resource: configmaps, name: b, namespace: default}
    releaseSpecs:
      x: {chart: {path: charts/x}}
`

const badA = "namespaces: [default]\nspecs: {a: {trigger: {}}}\n"

func TestReloader(t *testing.T) {
	k := testenv.NewKubeletDir(t, "config.yaml", goodA)
	path := k.Path()
	var applied []*config.Config
	logs := &logCounter{}
	initial, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg := initial.Config
	var outcomes []Outcome
	r := NewReloader(ReloaderOptions{Initial: initial, Reconfigure: func(_ context.Context, c *config.Config) { applied = append(applied, c) },
		OnOutcome: func(o Outcome) { outcomes = append(outcomes, o) }, Log: logs.logger()})
	if err != nil || len(cfg.Specs) != 1 {
		t.Fatalf("NewReloader: %v %v", cfg, err)
	}
	parses := 0
	parse := r.parse
	r.parse = func(path string, data []byte) (*config.Config, error) {
		parses++
		return parse(path, data)
	}
	ctx := context.Background()

	// Another goroutine asks for the config in force all along, as a standby
	// that becomes leader would; the race detector watches.
	stop := make(chan struct{})
	reader := make(chan struct{})
	go func() {
		defer close(reader)
		for {
			select {
			case <-stop:
				return
			default:
				if r.Current() == nil {
					t.Error("Current() = nil")
					return
				}
				runtime.Gosched()
			}
		}
	}()
	defer func() { close(stop); <-reader }()

	// Each step's numbers count from the start: configs applied, parses,
	// error-level log lines.
	steps := []struct {
		name            string
		change          func()
		want            Outcome
		applied, parsed int
		errorLogs       int
	}{
		{"nothing changed", func() {}, Unchanged, 0, 0, 0},
		{"good edit", func() { k.Update(goodB) }, Applied, 1, 1, 0},
		{"same content again", func() { k.Update(goodB) }, Unchanged, 1, 1, 0},
		{"invalid edit", func() { k.Update(badA) }, Rejected, 1, 2, 1},
		{"the next periodic check", func() {}, StillRejected, 1, 2, 1},
		{"the same invalid content written again", func() { k.Update(badA) }, StillRejected, 1, 2, 1},
		{"half-written file", func() { k.Update(goodB[:len(goodB)/2]) }, Rejected, 1, 3, 2},
		{"empty file", func() { k.Update("") }, Rejected, 1, 4, 3},
		{"fixed: back to the applied content", func() { k.Update(goodB) }, Unchanged, 1, 4, 3},
		{"the last rejected content again, after the fix", func() { k.Update("") }, Rejected, 1, 5, 4},
		{"fixed again", func() { k.Update(goodB) }, Unchanged, 1, 5, 4},
		{"deleted file", func() { must(t, os.Remove(path)) }, Rejected, 1, 5, 5},
		{"still deleted", func() {}, StillRejected, 1, 5, 5},
		{"recreated with a new good config", func() {
			must(t, os.Symlink(filepath.Join("..data", "config.yaml"), path))
			k.Update(goodA)
		}, Applied, 2, 6, 5},
	}
	for _, s := range steps {
		s.change()
		if got := r.Check(ctx); got != s.want {
			t.Errorf("%s: outcome %s, want %s", s.name, got, s.want)
		}
		if len(applied) != s.applied {
			t.Errorf("%s: %d configs applied, want %d", s.name, len(applied), s.applied)
		}
		if parses != s.parsed {
			t.Errorf("%s: the file was parsed %d times so far, want %d", s.name, parses, s.parsed)
		}
		if n := logs.count(zerolog.ErrorLevel); n != s.errorLogs {
			t.Errorf("%s: %d error lines logged so far, want %d", s.name, n, s.errorLogs)
		}
		want := cfg
		if len(applied) > 0 {
			want = applied[len(applied)-1]
		}
		if r.Current() != want {
			t.Errorf("%s: Current() is not the config in force", s.name)
		}
	}
	if len(applied) == 2 && (len(applied[0].Specs) != 2 || len(applied[1].Specs) != 1) {
		t.Errorf("applied the wrong configs: %d then %d specs", len(applied[0].Specs), len(applied[1].Specs))
	}
	if len(outcomes) != len(steps) {
		t.Errorf("OnOutcome called %d times, want %d", len(outcomes), len(steps))
	}
}

// TestReloaderCanceled: a check cut short by its context judges nothing, so
// a stop is not reported as a bad config and the next check starts afresh.
func TestReloaderCanceled(t *testing.T) {
	k := testenv.NewKubeletDir(t, "config.yaml", goodA)
	logs := &logCounter{}
	initial, err := Load(k.Path())
	if err != nil {
		t.Fatal(err)
	}
	r := NewReloader(ReloaderOptions{Initial: initial, Reconfigure: func(context.Context, *config.Config) {}, Log: logs.logger()})
	must(t, err)
	k.Update(badA)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if got := r.Check(ctx); got != Canceled {
		t.Errorf("outcome %s, want %s", got, Canceled)
	}
	if n := logs.count(zerolog.ErrorLevel); n != 0 {
		t.Errorf("%d error lines logged for a canceled check", n)
	}
	if got := r.Check(context.Background()); got != Rejected {
		t.Errorf("after a canceled check, outcome %s, want %s", got, Rejected)
	}
}

func TestNewReloaderRejectsInvalidStart(t *testing.T) {
	p := filepath.Join(t.TempDir(), "config.yaml")
	must(t, os.WriteFile(p, []byte("specs: {}\n"), 0o644))
	if _, err := Load(p); err == nil {
		t.Fatal("an invalid config at start must be an error")
	}
}

// TestReloaderUnsettled: a file that changes between the two reads of one
// check is judged by the next check, not rejected: a kubelet swap caught
// mid-way is not an error.
func TestReloaderUnsettled(t *testing.T) {
	k := testenv.NewKubeletDir(t, "config.yaml", goodA)
	applied := 0
	initial, err := Load(k.Path())
	if err != nil {
		t.Fatal(err)
	}
	var outcomes []Outcome
	r := NewReloader(ReloaderOptions{Initial: initial, Reconfigure: func(context.Context, *config.Config) { applied++ },
		OnOutcome: func(o Outcome) { outcomes = append(outcomes, o) }, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	r.betweenReads = func() { k.Update(goodB) }
	if got := r.Check(context.Background()); got != Unsettled {
		t.Fatalf("a file changed during the check: outcome %s, want %s", got, Unsettled)
	}
	r.betweenReads = nil
	if got := r.Check(context.Background()); got != Applied || applied != 1 {
		t.Fatalf("the next check: outcome %s with %d applied, want %s", got, applied, Applied)
	}
	if len(outcomes) != 2 || outcomes[0] != Unsettled {
		t.Errorf("outcomes %v", outcomes)
	}
}
