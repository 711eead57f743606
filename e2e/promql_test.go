package e2e

import (
	"regexp"
	"strings"
)

// What a PromQL expression reads: enough of PromQL's grammar to find the
// metric names and label names an alert or a dashboard panel depends on,
// so a test can look each up in a live autox's /metrics.

var (
	stringLit = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	rangeLit  = regexp.MustCompile(`\[[^\]]*\]`)
	grouping  = regexp.MustCompile(`\b(by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)`)
	token     = regexp.MustCompile(`([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(\{([^}]*)\})?(\s*\()?`)
	matcher   = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)`)
	// labelValues is Grafana's template query label_values(metric, label).
	labelValues = regexp.MustCompile(`label_values\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s*,\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\)`)
	keywords    = map[string]bool{"and": true, "or": true, "unless": true, "bool": true, "offset": true, "inf": true, "nan": true,
		"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true}
)

// promqlRefs are the metrics an expression selects, with the label names
// its matchers use on each, and the label names it groups or matches on.
type promqlRefs struct {
	metrics map[string][]string
	groupBy []string
}

func parsePromQL(expr string) promqlRefs {
	refs := promqlRefs{metrics: map[string][]string{}}
	if m := labelValues.FindStringSubmatch(expr); m != nil {
		refs.metrics[m[1]] = matchedLabels(m[2])
		refs.groupBy = append(refs.groupBy, m[3])
		return refs
	}
	e := stringLit.ReplaceAllString(expr, `""`)
	e = rangeLit.ReplaceAllString(e, "")
	for _, g := range grouping.FindAllStringSubmatch(e, -1) {
		for _, l := range strings.Split(g[2], ",") {
			if l = strings.TrimSpace(l); l != "" {
				refs.groupBy = append(refs.groupBy, l)
			}
		}
	}
	e = grouping.ReplaceAllString(e, " ")
	for _, tok := range token.FindAllStringSubmatch(e, -1) {
		name, call := tok[1], tok[4] != ""
		if call || keywords[strings.ToLower(name)] {
			continue
		}
		refs.metrics[name] = append(refs.metrics[name], matchedLabels(tok[3])...)
	}
	return refs
}

func matchedLabels(selector string) []string {
	var out []string
	for _, m := range matcher.FindAllStringSubmatch(selector, -1) {
		out = append(out, m[1])
	}
	return out
}
