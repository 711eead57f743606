package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzParse feeds arbitrary bytes to the loader. Its seeds are the configs
// under testdata/config (run by the normal test suite); `go test -fuzz
// FuzzParse ./config` explores beyond them.
func FuzzParse(f *testing.F) {
	seeds, _ := filepath.Glob("../testdata/config/*.yaml")
	for _, s := range seeds {
		data, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(base))
	f.Add([]byte("namespaces: [default]\nspecs: {}\n"))
	f.Add([]byte("specs: {a: {trigger: {name: on}}}\n"))
	f.Add([]byte(selBase))
	f.Add([]byte(strings.Replace(selBase, "x: {chart: {path: charts/x}}", `x: {chart: {path: charts/x}, releaseName: "{{.Name}}-{{printf \"%.3s\" .Namespace}}"}`, 1)))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse(data, "/cfg")
		if err != nil {
			var cerr *Error
			if !errors.As(err, &cerr) {
				t.Fatalf("error is not a *config.Error: %v", err)
			}
			if len(cerr.Problems) == 0 {
				t.Fatal("an error with no problems")
			}
			for _, p := range cerr.Problems {
				if strings.TrimSpace(p.Message) == "" {
					t.Fatalf("problem without a message at %q", p.Path)
				}
				// Only whole-file problems may lack a YAML path.
				if p.Path == "" && !strings.Contains(p.Message, "YAML") && !strings.Contains(p.Message, "file") && !strings.Contains(p.Message, "decode") {
					t.Fatalf("problem without a YAML path: %q", p.Message)
				}
			}
			return
		}
		if cfg.Specs == nil {
			t.Fatal("a valid config with nil specs")
		}
		if d := Diff(cfg, cfg); !d.Empty() {
			t.Fatalf("Diff(cfg, cfg) = %+v", d)
		}
		// Validation rendered every selector spec's names for the sample
		// object in each of its namespaces; the run time must get the same.
		for _, name := range cfg.SpecNames() {
			spec := cfg.Specs[name]
			if !spec.Trigger.IsSelector() {
				continue
			}
			for _, ns := range cfg.TriggerNamespaces(spec.Trigger) {
				if _, err := spec.ForObject(name, ns, sampleObject); err != nil {
					t.Fatalf("valid selector spec %q, namespace %q: %v", name, ns, err)
				}
			}
		}
	})
}
