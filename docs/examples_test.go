package docs_test

import (
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/internal/cli"
)

// configFragmentKeys are keys of a spec or release spec: a YAML block that
// starts with one is a piece of a config, which no test can load.
var configFragmentKeys = []string{"trigger", "releaseSpecs", "chart", "valuesFrom", "releaseName", "onChange"}

// TestConfigExamples loads every YAML config shown: it must be valid, or,
// marked invalid, fail with exactly the lines the next block shows. Every
// other YAML block must at least parse, and the kustomize recipes build.
func TestConfigExamples(t *testing.T) {
	configs := 0
	for _, d := range docs(t) {
		files := map[string]string{}
		var builds []string
		for i, f := range d.fences {
			if f.info != "yaml" && f.info != "yml" {
				continue
			}
			where := d.where(f.line)
			isConfig := false
			for _, part := range regexp.MustCompile(`(?m)^---\s*$`).Split(f.body, -1) {
				var m map[string]interface{}
				if err := yaml.Unmarshal([]byte(part), &m); err != nil {
					t.Errorf("%s: not valid YAML: %v", where, err)
					continue
				}
				if m["specs"] != nil || m["namespaces"] != nil {
					isConfig = true
				}
				for _, k := range configFragmentKeys {
					if _, ok := m[k]; ok {
						t.Errorf("%s: a piece of a config (key %s at the top): show a whole file, so it can be loaded", where, k)
					}
				}
			}
			switch {
			case f.marker == "invalid":
				configs++
				checkInvalid(t, d, i)
			case isConfig:
				configs++
				if _, err := config.ParseFile("config.yaml", []byte(f.body)); err != nil {
					t.Errorf("%s: the config example does not load (mark it <!-- invalid --> if it should not):\n%v", where, err)
				}
			}
			if p, ok := strings.CutPrefix(f.marker, "file: "); ok {
				files[p] = f.body
			}
			if dir, ok := strings.CutPrefix(f.marker, "kustomization: "); ok {
				files[path.Join(dir, "kustomization.yaml")] = f.body
				builds = append(builds, dir)
			}
		}
		for _, dir := range builds {
			build(t, d.path, dir, files)
		}
	}
	if configs < 10 {
		t.Errorf("found %d config examples in the docs; the parser lost them", configs)
	}
}

// checkInvalid loads the invalid config of fence i of d and compares its
// problems with the `config.yaml: ` lines of the next fence.
func checkInvalid(t *testing.T, d *doc, i int) {
	t.Helper()
	f := d.fences[i]
	where := d.where(f.line)
	if i+1 >= len(d.fences) {
		t.Errorf("%s: an invalid config needs the block of its `autox validate` lines after it", where)
		return
	}
	var want []string
	for _, l := range strings.Split(d.fences[i+1].body, "\n") {
		if p, ok := strings.CutPrefix(l, "config.yaml: "); ok {
			want = append(want, p)
		}
	}
	_, err := config.ParseFile("config.yaml", []byte(f.body))
	var cerr *config.Error
	if !errors.As(err, &cerr) {
		t.Errorf("%s: marked invalid, but it loads (err %v)", where, err)
		return
	}
	if got := cerr.Lines(); !slices.Equal(got, want) {
		t.Errorf("%s: the invalid config fails with\n  %s\nbut the docs show\n  %s", where, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// build runs kustomize on dir of a copy of manifests/ with files written
// over it; an overlay without its own config.yaml gets the example's.
func build(t *testing.T, docPath, dir string, files map[string]string) {
	t.Helper()
	mem := filesys.MakeFsInMemory()
	err := filepath.WalkDir(filepath.Join(repoRoot, "manifests"), func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() || strings.HasSuffix(p, ".go") {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(repoRoot, p)
		return mem.WriteFile("/"+filepath.ToSlash(rel), data)
	})
	if err != nil {
		t.Fatal(err)
	}
	for p, body := range files {
		if err := mem.WriteFile("/"+p, []byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if !mem.Exists("/" + path.Join(dir, "config.yaml")) {
		data, err := os.ReadFile(filepath.Join(repoRoot, "manifests/overlays/example/config.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if err := mem.WriteFile("/"+path.Join(dir, "config.yaml"), data); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(mem, "/"+dir); err != nil {
		t.Errorf("%s: the kustomization of %s does not build: %v", docPath, dir, err)
	}
}

// shellFences are the info strings of blocks whose lines are commands.
var shellFences = []string{"sh", "bash", "shell", "console"}

// commandLines returns the commands of the shell blocks and the code spans
// of d, each as its words, with where it is.
func commandLines(d *doc) (lines [][]string, wheres []string) {
	add := func(words []string, where string) {
		// A line may run several commands.
		start := 0
		for i := 0; i <= len(words); i++ {
			if i < len(words) && !slices.Contains([]string{"|", "||", "&&", ";"}, words[i]) {
				continue
			}
			cmd := words[start:i]
			start = i + 1
			for len(cmd) > 0 && regexp.MustCompile(`^[A-Z_][A-Z0-9_]*=`).MatchString(cmd[0]) {
				cmd = cmd[1:] // an environment variable for the command
			}
			if len(cmd) > 0 {
				lines, wheres = append(lines, cmd), append(wheres, where)
			}
		}
	}
	for _, f := range d.fences {
		if !slices.Contains(shellFences, f.info) {
			continue
		}
		body := strings.ReplaceAll(f.body, "\\\n", " ")
		for n, l := range strings.Split(body, "\n") {
			l = strings.TrimPrefix(strings.TrimSpace(l), "$ ")
			add(words(l), d.where(f.line+1+n))
		}
	}
	for _, s := range d.spans() {
		if strings.HasPrefix(s.text, "autox ") || strings.HasPrefix(s.text, "scripts/") {
			add(usageWords(s.text), d.where(s.line))
		}
	}
	return lines, wheres
}

// words splits a shell line into words, quotes removed, up to a comment.
func words(line string) []string {
	var out []string
	var cur strings.Builder
	inWord := false
	var quote rune
	for _, r := range line {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == '#' && !inWord:
			return append(out, flushWord(&cur, &inWord)...)
		case r == ' ' || r == '\t':
			out = append(out, flushWord(&cur, &inWord)...)
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	return append(out, flushWord(&cur, &inWord)...)
}

func flushWord(b *strings.Builder, inWord *bool) []string {
	if !*inWord {
		return nil
	}
	w := b.String()
	b.Reset()
	*inWord = false
	return []string{w}
}

// usageWords reads a command as usage text writes it: [optional] parts
// count as given, `table|json` as its first choice, … as nothing.
func usageWords(text string) []string {
	var out []string
	for _, w := range words(strings.NewReplacer("[", "", "]", "").Replace(text)) {
		if w == "…" || w == "..." {
			continue
		}
		if i := strings.Index(w, "|"); i > 0 {
			w = w[:i]
		}
		out = append(out, w)
	}
	return out
}

// TestCommandLines parses every `autox ...` command the docs show against
// autox's command tree: the command and each flag must exist, and no
// command takes arguments.
func TestCommandLines(t *testing.T) {
	n := 0
	for _, d := range docs(t) {
		lines, wheres := commandLines(d)
		for i, w := range lines {
			if w[0] != "autox" {
				continue
			}
			n++
			root := cli.Commands()
			cmd, rest, err := root.Find(w[1:])
			if err != nil || cmd == root {
				t.Errorf("%s: %q names no autox command (err %v)", wheres[i], strings.Join(w, " "), err)
				continue
			}
			if err := cmd.ParseFlags(rest); err != nil {
				t.Errorf("%s: %q: %v", wheres[i], strings.Join(w, " "), err)
				continue
			}
			if args := cmd.Flags().Args(); len(args) > 0 {
				t.Errorf("%s: %q: autox %s takes no arguments, got %q", wheres[i], strings.Join(w, " "), cmd.Name(), args)
			}
		}
	}
	if n < 10 {
		t.Errorf("found %d autox command lines in the docs; the parser lost them", n)
	}
}

// TestScripts checks every script the docs run: it exists, is executable,
// and knows each --flag given to it (the script or its Go program under
// scripts/<name>/ spells it).
func TestScripts(t *testing.T) {
	n := 0
	for _, d := range docs(t) {
		lines, wheres := commandLines(d)
		for i, w := range lines {
			if !strings.HasPrefix(w[0], "scripts/") || !strings.HasSuffix(w[0], ".sh") {
				continue
			}
			n++
			info, err := os.Stat(filepath.Join(repoRoot, w[0]))
			if err != nil {
				t.Errorf("%s: %s does not exist", wheres[i], w[0])
				continue
			}
			if info.Mode()&0o111 == 0 {
				t.Errorf("%s: %s is not executable", wheres[i], w[0])
			}
			source := scriptSource(t, w[0])
			for _, a := range w[1:] {
				flag, ok := strings.CutPrefix(a, "--")
				if !ok {
					continue
				}
				flag, _, _ = strings.Cut(flag, "=")
				if !strings.Contains(source, "--"+flag) && !strings.Contains(source, `"`+flag+`"`) {
					t.Errorf("%s: %s knows no flag --%s", wheres[i], w[0], flag)
				}
			}
		}
	}
	if n < 5 {
		t.Errorf("found %d script lines in the docs; the parser lost them", n)
	}
}

// scriptSource is a script's text and that of the Go files of the program
// it runs, scripts/<name>/.
func scriptSource(t *testing.T, script string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, script))
	if err != nil {
		t.Fatal(err)
	}
	src := string(data)
	goFiles, _ := filepath.Glob(filepath.Join(repoRoot, strings.TrimSuffix(script, ".sh"), "*.go"))
	for _, f := range goFiles {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		src += string(data)
	}
	return src
}

var link = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// TestLinks resolves every relative link of the docs, anchors included, and
// every runbook_url of the monitoring component's alerts.
func TestLinks(t *testing.T) {
	byPath := map[string]*doc{}
	for _, d := range docs(t) {
		byPath[d.path] = d
	}
	resolve := func(where, from, target string) {
		file, anchor, _ := strings.Cut(target, "#")
		p := from
		if file != "" {
			p = path.Clean(path.Join(path.Dir(from), file))
			if _, err := os.Stat(filepath.Join(repoRoot, p)); err != nil {
				t.Errorf("%s: the link %s goes nowhere: %v", where, target, err)
				return
			}
		}
		if anchor == "" {
			return
		}
		d := byPath[p]
		if d == nil {
			t.Errorf("%s: the link %s has an anchor into a file that is not a checked document", where, target)
			return
		}
		if !d.anchors[anchor] {
			t.Errorf("%s: the link %s names no heading of %s", where, target, p)
		}
	}
	n := 0
	for _, d := range docs(t) {
		for _, p := range d.prose {
			for _, m := range link.FindAllStringSubmatch(p.text, -1) {
				if target := m[1]; !strings.Contains(target, "://") && !strings.HasPrefix(target, "mailto:") {
					n++
					resolve(d.where(p.line), d.path, target)
				}
			}
		}
	}
	if n < 20 {
		t.Errorf("found %d relative links in the docs; the parser lost them", n)
	}
	rules, _ := filepath.Glob(filepath.Join(repoRoot, "manifests/monitoring/*.yaml"))
	runbook := regexp.MustCompile(`runbook_url: "?https://github\.com/autox-dev/autox/blob/main/([^"\s]+)`)
	urls := 0
	for _, f := range rules {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range runbook.FindAllStringSubmatch(string(data), -1) {
			urls++
			resolve(filepath.Base(f), "README.md", m[1])
		}
	}
	if urls == 0 {
		t.Error("no runbook_url found in manifests/monitoring")
	}
}

// TestPaths checks that every repository path the docs name in code spans
// exists.
func TestPaths(t *testing.T) {
	top := map[string]bool{}
	entries, err := os.ReadDir(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		top[e.Name()] = true
	}
	n := 0
	for _, d := range docs(t) {
		for _, s := range d.spans() {
			p := strings.TrimRight(strings.Fields(s.text + " x")[0], "/.,:;")
			first, _, nested := strings.Cut(p, "/")
			if !nested || !top[first] || strings.ContainsAny(p, "<>*{}…$~") {
				continue
			}
			n++
			if _, err := os.Stat(filepath.Join(repoRoot, p)); err != nil {
				t.Errorf("%s: `%s` names no file or directory of the repository", d.where(s.line), p)
			}
		}
	}
	if n < 20 {
		t.Errorf("found %d repository paths in the docs; the parser lost them", n)
	}
}
