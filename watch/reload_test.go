package watch

import (
	"context"
	"os"
	"path/filepath"
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

func TestReloader(t *testing.T) {
	k := testenv.NewKubeletDir(t, "config.yaml", goodA)
	path := k.Path()
	var applied []*config.Config
	r, cfg, err := NewReloader(path, func(_ context.Context, c *config.Config) { applied = append(applied, c) }, zerolog.Nop())
	if err != nil || len(cfg.Specs) != 1 {
		t.Fatalf("NewReloader: %v %v", cfg, err)
	}
	ctx := context.Background()
	var outcomes []Outcome
	r.OnOutcome = func(o Outcome) { outcomes = append(outcomes, o) }

	steps := []struct {
		name    string
		change  func()
		want    Outcome
		applied int
	}{
		{"nothing changed", func() {}, Unchanged, 0},
		{"good edit", func() { k.Update(goodB) }, Applied, 1},
		{"same content again", func() { k.Update(goodB) }, Unchanged, 1},
		{"invalid edit", func() { k.Update("namespaces: [default]\nspecs: {a: {trigger: {}}}\n") }, Rejected, 1},
		{"half-written file", func() { k.Update(goodB[:len(goodB)/2]) }, Rejected, 1},
		{"empty file", func() { k.Update("") }, Rejected, 1},
		{"fixed: back to the applied content", func() { k.Update(goodB) }, Unchanged, 1},
		{"deleted file", func() { must(t, os.Remove(path)) }, Rejected, 1},
		{"recreated with a new good config", func() {
			must(t, os.Symlink(filepath.Join("..data", "config.yaml"), path))
			k.Update(goodA)
		}, Applied, 2},
	}
	for _, s := range steps {
		s.change()
		if got := r.Check(ctx); got != s.want {
			t.Errorf("%s: outcome %s, want %s", s.name, got, s.want)
		}
		if len(applied) != s.applied {
			t.Errorf("%s: %d configs applied, want %d", s.name, len(applied), s.applied)
		}
	}
	if len(applied) == 2 && (len(applied[0].Specs) != 2 || len(applied[1].Specs) != 1) {
		t.Errorf("applied the wrong configs: %d then %d specs", len(applied[0].Specs), len(applied[1].Specs))
	}
	if len(outcomes) != len(steps) {
		t.Errorf("OnOutcome called %d times, want %d", len(outcomes), len(steps))
	}
}

func TestNewReloaderRejectsInvalidStart(t *testing.T) {
	p := filepath.Join(t.TempDir(), "config.yaml")
	must(t, os.WriteFile(p, []byte("specs: {}\n"), 0o644))
	if _, _, err := NewReloader(p, func(context.Context, *config.Config) {}, zerolog.Nop()); err == nil {
		t.Fatal("an invalid config at start must be an error")
	}
}
