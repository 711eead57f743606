package apply

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/autox-dev/autox/"

// TestApplyImportsNothingOfObserve: data flows observe → plan → apply and
// never back. apply acts on what the plan's steps carry; it must not read
// the observation again (nor work anything out from it), so no package it
// imports, directly or through others of this module, is triggers/observe.
func TestApplyImportsNothingOfObserve(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	forbidden := module + "triggers/observe"
	// via[p] is the package that first imported p: the path reported.
	via := map[string]string{module + "triggers/apply": ""}
	queue := []string{module + "triggers/apply"}
	for len(queue) > 0 {
		pkg := queue[0]
		queue = queue[1:]
		for _, imp := range productionImports(t, filepath.Join(root, strings.TrimPrefix(pkg, module))) {
			if !strings.HasPrefix(imp, module) {
				continue
			}
			if _, seen := via[imp]; seen {
				continue
			}
			via[imp] = pkg
			if imp == forbidden {
				path := []string{imp}
				for p := pkg; p != ""; p = via[p] {
					path = append([]string{p}, path...)
				}
				t.Fatalf("triggers/apply imports triggers/observe: %s", strings.Join(path, " -> "))
			}
			queue = append(queue, imp)
		}
	}
}

// productionImports are the import paths of the non-test Go files in dir.
func productionImports(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(dir, name), nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, spec := range f.Imports {
			path, err := strconv.Unquote(spec.Path.Value)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, path)
		}
	}
	return out
}
