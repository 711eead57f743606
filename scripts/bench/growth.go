package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Each run can write its results (--out DIR) as DIR/<mode>-<triggers>.json,
// one size per invocation; --plot DIR reads them all, writes DIR/growth.svg
// (convergence and floor time against fleet size) and prints the growth
// table, one column per run.

// save writes r to dir, when dir is set.
func (r results) save(dir string) error {
	if dir == "" {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	path := filepath.Join(dir, r.name()+".json")
	note("results written to %s", path)
	return os.WriteFile(path, append(data, '\n'), 0o644)
}

// name tells runs apart: mode, size, and whether seeded or paged.
func (r results) name() string {
	n := fmt.Sprintf("%s-%d", r.Mode, r.Triggers)
	if r.Replicas != nil {
		n += fmt.Sprintf("-r%d-s%d", r.Replicas.Replicas, r.Replicas.Shards)
	}
	if r.Drift != "" {
		n += "-drift-" + r.Drift
	}
	if r.Seeded {
		n += "-seed"
	}
	if r.PageSize > 0 {
		n += fmt.Sprintf("-p%d", r.PageSize)
	}
	return n
}

// MarshalJSON writes request counts as {"verb resource": n}.
func (c requestCounts) MarshalJSON() ([]byte, error) {
	m := make(map[string]int64, len(c))
	for k, v := range c {
		m[k.verb+" "+k.resource] = v
	}
	return json.Marshal(m)
}

// UnmarshalJSON reads what MarshalJSON wrote.
func (c *requestCounts) UnmarshalJSON(data []byte) error {
	var m map[string]int64
	if err := json.Unmarshal(data, &m); err != nil {
		return err
	}
	*c = requestCounts{}
	for k, v := range m {
		verb, resource, _ := strings.Cut(k, " ")
		(*c)[requestKind{verb, resource}] = v
	}
	return nil
}

// loadResults reads every run's results in dir: the fleet runs by size,
// then the selector runs by size.
func loadResults(dir string) ([]results, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	var out []results
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		var r results
		if err := json.Unmarshal(data, &r); err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		if r.Mode == "replicas" {
			continue // a table of its own, not a fleet size
		}
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Mode != out[j].Mode {
			return out[i].Mode == "fleet"
		}
		if out[i].Triggers != out[j].Triggers {
			return out[i].Triggers < out[j].Triggers
		}
		return out[i].name() < out[j].name()
	})
	if len(out) == 0 {
		return nil, fmt.Errorf("no results (*.json) in %s: run the bench with --out %s first", dir, dir)
	}
	return out, nil
}

func growth(dir string) error {
	runs, err := loadResults(dir)
	if err != nil {
		return err
	}
	svg := plot(runs)
	path := filepath.Join(dir, "growth.svg")
	if err := os.WriteFile(path, []byte(svg), 0o644); err != nil {
		return err
	}
	note("plot written to %s", path)
	fmt.Print(growthTable(runs))
	return nil
}

// growthTable is one column per run.
func growthTable(runs []results) string {
	var b strings.Builder
	b.WriteString("| measure |")
	for _, r := range runs {
		head := thousands(r.Triggers)
		if r.Mode == "selector" {
			head = "selector, " + head + " objects"
		}
		if r.Seeded {
			head += ", seeded"
		}
		if r.PageSize > 0 {
			head += fmt.Sprintf(", --list-page-size %d", r.PageSize)
		}
		fmt.Fprintf(&b, " %s |", head)
	}
	b.WriteString("\n|---|" + strings.Repeat("---|", len(runs)) + "\n")
	row := func(name string, cell func(r results) string) {
		b.WriteString("| " + name + " |")
		for _, r := range runs {
			b.WriteString(" " + cell(r) + " |")
		}
		b.WriteString("\n")
	}
	cold := func(f func(r results) string) func(r results) string {
		return func(r results) string {
			if r.Seeded {
				return "seeded"
			}
			return f(r)
		}
	}
	perRelease := func(n int64, r results) string { return fmt.Sprintf("%.2f", float64(n)/float64(r.Releases)) }
	row("releases", func(r results) string { return thousands(r.Releases) })
	row("cold convergence, autox", cold(func(r results) string { return secs(r.Cold) }))
	row("floor (16 workers)", func(r results) string { return secs(r.Floor) })
	row("autox's speed as a share of the floor's", cold(func(r results) string { return fmt.Sprintf("%.0f %%", r.share()) }))
	row("API requests per release installed: all / writes", cold(func(r results) string {
		return perRelease(r.ColdByKind.total(), r) + " / " + perRelease(r.ColdByKind.writes(), r)
	}))
	row("… reads by verb and resource", cold(func(r results) string {
		var parts []string
		for _, k := range r.ColdByKind.sorted() {
			if v := float64(r.ColdByKind[k]) / float64(r.Releases); (k.verb == "get" || k.verb == "list") && v >= 0.01 {
				parts = append(parts, fmt.Sprintf("%s %s %.2f", k.verb, k.resource, v))
			}
		}
		return strings.Join(parts, ", ")
	}))
	row("kube-apiserver + etcd CPU per release: autox / floor", cold(func(r results) string {
		return fmt.Sprintf("%.1f / %.1f ms", ms(r.ColdServerCPU)/float64(r.Releases), ms(r.FloorServerCPU)/float64(r.Releases))
	}))
	row("autox CPU per release", cold(func(r results) string { return fmt.Sprintf("%.1f ms", ms(r.ColdCPU)/float64(r.Releases)) }))
	row("quiet pass: time", func(r results) string { return secs(r.NoopPass) })
	row("quiet pass: API requests, Helm writes", func(r results) string { return fmt.Sprintf("%d, %d", r.NoopRequests, r.NoopWrites) })
	row("restart → first complete pass (Helm writes)", func(r results) string { return fmt.Sprintf("%s (%d)", secs(r.Restart), r.RestartWrites) })
	row("reaction p99 (relabel → both upgraded)", func(r results) string {
		if len(r.Reactions) == 0 {
			return "—"
		}
		return secs(percentile(r.Reactions, 0.99))
	})
	row("peak RSS, highest phase", func(r results) string { return mib(max(r.ColdRSS, r.NoopRSS, r.RestartRSS, r.ReactionRSS)) })
	row("kube-apiserver peak RSS, highest phase", func(r results) string {
		var top int64
		for _, v := range r.ServerPeak {
			top = max(top, v)
		}
		return mib(top)
	})
	sizes := map[int64]bool{}
	for _, r := range runs {
		for _, l := range r.Lists {
			sizes[l.PageSize] = true
		}
	}
	var sorted []int64
	for s := range sizes {
		sorted = append(sorted, s)
	}
	sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
	for _, size := range sorted {
		row("LIST records / triggers, "+pageLabel(size)+": latency, kube-apiserver peak", func(r results) string {
			for _, l := range r.Lists {
				if l.PageSize == size {
					return fmt.Sprintf("%s / %s, %s", msecs(l.RecordsTook), msecs(l.TriggersTook), mib(l.ServerPeak))
				}
			}
			return "—"
		})
	}
	row("load average (1 min) at the end of cold / quiet / restart", func(r results) string {
		return fmt.Sprintf("%.1f / %.1f / %.1f", r.Load["cold"], r.Load["quiet"], r.Load["restart"])
	})
	row("run", func(r results) string { return r.Date })
	return b.String()
}

func ms(d interface{ Seconds() float64 }) float64 { return d.Seconds() * 1000 }

func thousands(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// plot draws cold convergence (autox, named triggers and selector) and the
// floor against the number of releases, both axes logarithmic.
func plot(runs []results) string {
	type point struct{ x, y float64 }
	series := []struct {
		name, color string
		dash        bool
		pts         []point
	}{
		{name: "autox, named triggers", color: "#1f77b4"},
		{name: "autox, one selector spec", color: "#2ca02c"},
		{name: "floor (Helm's writes, 16 workers)", color: "#7f7f7f", dash: true},
	}
	floorAt := map[int]bool{}
	for _, r := range runs {
		if r.PageSize > 0 {
			continue // the default build's figures only
		}
		if !r.Seeded && r.Cold > 0 {
			i := 0
			if r.Mode == "selector" {
				i = 1
			}
			series[i].pts = append(series[i].pts, point{float64(r.Releases), r.Cold.Seconds()})
		}
		if r.Mode == "fleet" && r.Floor > 0 && !floorAt[r.Releases] {
			floorAt[r.Releases] = true
			series[2].pts = append(series[2].pts, point{float64(r.Releases), r.Floor.Seconds()})
		}
	}
	minX, maxX, minY, maxY := math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1)
	for _, s := range series {
		for _, p := range s.pts {
			minX, maxX, minY, maxY = math.Min(minX, p.x), math.Max(maxX, p.x), math.Min(minY, p.y), math.Max(maxY, p.y)
		}
	}
	if math.IsInf(minX, 1) {
		minX, maxX, minY, maxY = 100, 1000, 1, 10
	}
	// Whole decades around the data.
	x0, x1 := math.Floor(math.Log10(minX)), math.Ceil(math.Log10(maxX))
	y0, y1 := math.Floor(math.Log10(minY)), math.Ceil(math.Log10(maxY))
	if x1 == x0 {
		x1++
	}
	if y1 == y0 {
		y1++
	}
	const w, h, left, right, top, bottom = 720.0, 440.0, 70.0, 20.0, 30.0, 60.0
	px := func(x float64) float64 { return left + (math.Log10(x)-x0)/(x1-x0)*(w-left-right) }
	py := func(y float64) float64 { return h - bottom - (math.Log10(y)-y0)/(y1-y0)*(h-top-bottom) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="sans-serif" font-size="12">`+"\n", w, h, w, h)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%.0f" y="18" font-size="14">Cold convergence against the floor (scripts/bench.sh), log–log</text>`+"\n", left)
	for d := x0; d <= x1; d++ {
		x := px(math.Pow(10, d))
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", x, top, x, h-bottom)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", x, h-bottom+16, thousands(int(math.Pow(10, d))))
	}
	for d := y0; d <= y1; d++ {
		y := py(math.Pow(10, d))
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", left, y, w-right, y)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="end">%g s</text>`+"\n", left-6, y+4, math.Pow(10, d))
	}
	fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">releases in one namespace</text>`+"\n", (left+w-right)/2, h-bottom+36)
	for i, s := range series {
		sort.Slice(s.pts, func(a, c int) bool { return s.pts[a].x < s.pts[c].x })
		var path []string
		for _, p := range s.pts {
			path = append(path, fmt.Sprintf("%.1f,%.1f", px(p.x), py(p.y)))
		}
		dash := ""
		if s.dash {
			dash = ` stroke-dasharray="6,4"`
		}
		if len(path) > 1 {
			fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2"%s points="%s"/>`+"\n", s.color, dash, strings.Join(path, " "))
		}
		for _, p := range s.pts {
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s"><title>%s: %s releases, %.2f s</title></circle>`+"\n", px(p.x), py(p.y), s.color, s.name, thousands(int(p.x)), p.y)
		}
		ly := top + 14 + float64(i)*16
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2"%s/>`+"\n", left+12, ly-4, left+36, ly-4, s.color, dash)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f">%s</text>`+"\n", left+42, ly, s.name)
	}
	b.WriteString("</svg>\n")
	return b.String()
}
