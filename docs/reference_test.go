package docs_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/internal/cli"
)

// The references: what the code has, the docs must name.
const (
	designDoc     = "docs/design.md"
	commandsDoc   = "docs/commands.md"
	operationsDoc = "docs/operations.md"
	configDoc     = "docs/configuration.md"
)

// designSection returns the lines [from, to) of §n of docs/design.md.
func designSection(t *testing.T, n string) (*doc, int, int) {
	t.Helper()
	d := find(t, designDoc)
	from := d.lineOf("## " + n + ". ")
	to := len(d.lines)
	for i, h := range d.headings {
		if h.line == from {
			for _, next := range d.headings[i+1:] {
				if next.level <= 2 {
					to = next.line
					break
				}
			}
		}
	}
	if from < 0 {
		t.Fatalf("%s has no section %s", designDoc, n)
	}
	return d, from, to
}

// mentions reports whether text names the metric or flag as a whole word.
func mentions(text, name string) bool {
	return regexp.MustCompile(`(^|[^A-Za-z0-9_-])` + regexp.QuoteMeta(name) + `($|[^A-Za-z0-9_-])`).MatchString(text)
}

// firstCells are the first cells of the table rows of text.
func firstCells(text string) []string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		l = strings.TrimSpace(l)
		if !strings.HasPrefix(l, "|") {
			continue
		}
		cells := strings.Split(l, "|")
		if len(cells) > 2 {
			out = append(out, cells[1])
		}
	}
	return out
}

var metricName = regexp.MustCompile(`autox_[a-z0-9_]+`)

// registeredMetrics are the metrics autox registers, checked against every
// metric name the production code spells: a component registered
// somewhere cli.MetricNames does not look is caught here.
func registeredMetrics(t *testing.T) []string {
	t.Helper()
	names, err := cli.MetricNames()
	if err != nil {
		t.Fatal(err)
	}
	var own []string
	for _, n := range names {
		if strings.HasPrefix(n, "autox_") {
			own = append(own, n)
		}
	}
	spelt := regexp.MustCompile(`Name:\s*"(autox_[a-z0-9_]+)"`)
	err = filepath.WalkDir(repoRoot, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() && (e.Name() == "testdata" || strings.HasPrefix(e.Name(), ".")) && p != repoRoot {
			return filepath.SkipDir
		}
		if e.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, m := range spelt.FindAllStringSubmatch(string(data), -1) {
			if !slices.Contains(own, m[1]) {
				t.Errorf("%s defines metric %s, which cli.MetricNames does not find: register its component there as run does", p, m[1])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(own) < 20 {
		t.Fatalf("cli.MetricNames found only %d autox metrics: %v", len(own), own)
	}
	return own
}

// TestMetricsDocumented: every metric autox registers is named in
// docs/design.md §6 and has a row in the metrics table of
// docs/operations.md; every autox_ name the docs use is one of them.
func TestMetricsDocumented(t *testing.T) {
	metrics := registeredMetrics(t)
	design, from, to := designSection(t, "6")
	section6 := strings.Join(design.lines[from:to], "\n")
	ops := find(t, operationsDoc)
	rows := strings.Join(firstCells(strings.Join(ops.lines, "\n")), "\n")
	for _, m := range metrics {
		if !mentions(section6, m) {
			t.Errorf("metric %s is missing from %s §6", m, designDoc)
		}
		if !mentions(rows, m) {
			t.Errorf("metric %s has no row in the metrics table of %s", m, operationsDoc)
		}
	}
	for _, d := range docs(t) {
		for _, name := range metricName.FindAllString(strings.Join(d.lines, "\n"), -1) {
			base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_sum"), "_count")
			if !slices.Contains(metrics, name) && !slices.Contains(metrics, base) {
				t.Errorf("%s names %s, which autox does not register", d.path, name)
			}
		}
	}
}

// commandFlags are the flags of each autox command, help left out.
func commandFlags() map[string][]*pflag.Flag {
	out := map[string][]*pflag.Flag{}
	for _, c := range cli.Commands().Commands() {
		if c.Hidden || c.Name() == "help" || c.Name() == "completion" {
			continue
		}
		out[c.Name()] = nil
		c.Flags().VisitAll(func(f *pflag.Flag) {
			if f.Name != "help" {
				out[c.Name()] = append(out[c.Name()], f)
			}
		})
	}
	return out
}

// TestFlagsDocumented: every flag of every command is documented for that
// command, in docs/design.md §6 and in docs/commands.md; and every flag
// those tables list is one of the command's.
func TestFlagsDocumented(t *testing.T) {
	flags := commandFlags()
	if len(flags["run"]) < 20 || len(flags) < 5 {
		t.Fatalf("the command tree has too few commands or flags: %v", flags)
	}
	design, from, to := designSection(t, "6")
	ops := find(t, commandsDoc)
	for _, ref := range []struct {
		d        *doc
		from, to int
	}{{design, from, to}, {ops, 0, len(ops.lines)}} {
		for name, own := range flags {
			text, shared, ok := commandSection(ref.d, name, ref.from, ref.to)
			if !ok {
				t.Errorf("%s has no section headed `autox %s`", ref.d.path, name)
				continue
			}
			// A section with a flag table lists its flags there.
			cells := strings.Join(firstCells(text), "\n")
			in := text
			if cells != "" {
				in = cells
			}
			in += "\n" + strings.Join(firstCells(shared), "\n")
			for _, f := range own {
				if !mentions(in, "--"+f.Name) && (f.Shorthand == "" || !mentions(in, "-"+f.Shorthand)) {
					t.Errorf("%s: the flag --%s of autox %s is not documented for it", ref.d.path, f.Name, name)
				}
			}
			listed := cells + "\n" + strings.Join(firstCells(shared), "\n")
			for _, l := range regexp.MustCompile("`(--?[a-z][a-z0-9-]*)").FindAllStringSubmatch(listed, -1) {
				if !hasFlag(own, l[1]) {
					t.Errorf("%s: the flag table of autox %s lists %s, which it does not have", ref.d.path, name, l[1])
				}
			}
		}
	}
}

func hasFlag(fs []*pflag.Flag, written string) bool {
	for _, f := range fs {
		if written == "--"+f.Name || (f.Shorthand != "" && written == "-"+f.Shorthand) {
			return true
		}
	}
	return false
}

// commandSection is the text under the heading naming `autox <name>`, and,
// when that text refers to the cluster flags, the section of those.
func commandSection(d *doc, name string, from, to int) (own, shared string, ok bool) {
	own, ok = d.section("`autox "+name+"`", from, to)
	if !ok {
		return "", "", false
	}
	if strings.Contains(strings.Join(strings.Fields(strings.ToLower(own)), " "), "cluster flags") {
		shared, _ = d.section("Cluster flags", from, to)
	}
	return own, shared, true
}

// TestConfigFieldsDocumented: every field of the config file, read from
// the config types, has a row in a reference table of
// docs/configuration.md (`name`, or a dotted `parent.name`).
func TestConfigFieldsDocumented(t *testing.T) {
	text := strings.Join(firstCells(strings.Join(find(t, configDoc).lines, "\n")), "\n")
	seen := map[reflect.Type]bool{}
	var walk func(reflect.Type, string)
	walk = func(typ reflect.Type, at string) {
		for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice || typ.Kind() == reflect.Map {
			typ = typ.Elem()
		}
		if typ.Kind() != reflect.Struct || seen[typ] || typ.PkgPath() != reflect.TypeOf(config.Config{}).PkgPath() {
			return
		}
		seen[typ] = true
		for i := range typ.NumField() {
			f := typ.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if !f.IsExported() || name == "" || name == "-" {
				continue
			}
			if !regexp.MustCompile("[`.]" + name + "`").MatchString(text) {
				t.Errorf("%s has no table row for the config field %s%s", configDoc, at, name)
			}
			walk(f.Type, at+name+".")
		}
	}
	walk(reflect.TypeOf(config.Config{}), "")
	if len(seen) < 6 {
		t.Errorf("walked only %d config types", len(seen))
	}
	// The selector is Kubernetes' own: its two fields are documented as such.
	all := strings.Join(find(t, configDoc).lines, "\n")
	for _, k := range []string{"matchLabels", "matchExpressions"} {
		if !strings.Contains(all, "`"+k) {
			t.Errorf("%s does not document selector.%s", configDoc, k)
		}
	}
}
