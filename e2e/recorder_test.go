package e2e

import (
	"fmt"
	"math"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/autox-dev/autox/internal/testenv"
)

// scrape is one read of /metrics: every sample by its series (name and
// sorted labels, as Prometheus writes it).
type scrape map[string]float64

// get is the value of a series given as name{label="value",...} with its
// labels in any order; ok is false when autox does not export it.
func (s scrape) get(series string) (float64, bool) {
	v, ok := s[canonical(series)]
	return v, ok
}

// is reports whether series is exported with value v.
func (s scrape) is(series string, v float64) bool {
	got, ok := s.get(series)
	return ok && got == v
}

// names are the metric names of the scrape's samples (histograms by their
// _bucket, _sum and _count series).
func (s scrape) names() map[string][]map[string]string {
	out := map[string][]map[string]string{}
	for series := range s {
		name, labels := parseSeries(series)
		out[name] = append(out[name], labels)
	}
	return out
}

var seriesRe = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?$`)
var labelRe = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)

func parseSeries(series string) (string, map[string]string) {
	m := seriesRe.FindStringSubmatch(series)
	if m == nil {
		return series, nil
	}
	labels := map[string]string{}
	for _, l := range labelRe.FindAllStringSubmatch(m[2], -1) {
		labels[l[1]] = l[2]
	}
	return m[1], labels
}

func formatSeries(name string, labels map[string]string) string {
	if len(labels) == 0 {
		return name
	}
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%q", k, labels[k])
	}
	return name + "{" + strings.Join(parts, ",") + "}"
}

func canonical(series string) string { return formatSeries(parseSeries(series)) }

// scrapeMetrics reads and parses url's Prometheus text exposition.
func scrapeMetrics(url string) (scrape, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", url, err)
	}
	s := scrape{}
	for name, f := range families {
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			addSamples(s, name, f.GetType(), m, labels)
		}
	}
	return s, nil
}

// addSamples adds one metric's samples as Prometheus stores them.
func addSamples(s scrape, name string, typ dto.MetricType, m *dto.Metric, labels map[string]string) {
	with := func(k, v string) map[string]string {
		out := map[string]string{k: v}
		for lk, lv := range labels {
			out[lk] = lv
		}
		return out
	}
	switch typ {
	case dto.MetricType_COUNTER:
		s[formatSeries(name, labels)] = m.GetCounter().GetValue()
	case dto.MetricType_GAUGE:
		s[formatSeries(name, labels)] = m.GetGauge().GetValue()
	case dto.MetricType_UNTYPED:
		s[formatSeries(name, labels)] = m.GetUntyped().GetValue()
	case dto.MetricType_HISTOGRAM:
		h := m.GetHistogram()
		inf := false
		for _, b := range h.GetBucket() {
			inf = inf || math.IsInf(b.GetUpperBound(), 1)
			s[formatSeries(name+"_bucket", with("le", strconv.FormatFloat(b.GetUpperBound(), 'g', -1, 64)))] = float64(b.GetCumulativeCount())
		}
		if !inf {
			s[formatSeries(name+"_bucket", with("le", "+Inf"))] = float64(h.GetSampleCount())
		}
		s[formatSeries(name+"_sum", labels)] = h.GetSampleSum()
		s[formatSeries(name+"_count", labels)] = float64(h.GetSampleCount())
	case dto.MetricType_SUMMARY:
		sm := m.GetSummary()
		for _, q := range sm.GetQuantile() {
			s[formatSeries(name, with("quantile", strconv.FormatFloat(q.GetQuantile(), 'g', -1, 64)))] = q.GetValue()
		}
		s[formatSeries(name+"_sum", labels)] = sm.GetSampleSum()
		s[formatSeries(name+"_count", labels)] = float64(sm.GetSampleCount())
	}
}

// recorder scrapes a live autox and keeps the scrapes it takes, in phases,
// to replay them to promtool as if Prometheus had scraped them once per
// interval: the scrapes of a phase are taken once autox reached the phase's
// state, so the replay holds each state for exactly as many intervals as the
// rule tests expect.
type recorder struct {
	t       *testing.T
	url     string
	scrapes []scrape
}

// phase waits until a scrape satisfies state, then records n scrapes, each
// of which must satisfy it.
func (r *recorder) phase(what string, n int, state func(scrape) bool) {
	r.t.Helper()
	var s scrape
	testenv.Eventually(r.t, patience, what, func() (bool, error) {
		var err error
		s, err = scrapeMetrics(r.url)
		return err == nil && state(s), err
	})
	r.scrapes = append(r.scrapes, s)
	for i := 1; i < n; i++ {
		time.Sleep(50 * time.Millisecond)
		s, err := scrapeMetrics(r.url)
		if err != nil {
			r.t.Fatal(err)
		}
		if !state(s) {
			r.t.Fatalf("%s: scrape %d of the phase left the state:\n%v", what, i, s)
		}
		r.scrapes = append(r.scrapes, s)
	}
}

// inputSeries turns the scrapes of the series whose name has prefix into
// promtool's input_series: one value per scrape, `_` before a series
// appears, `stale` where it went (as Prometheus marks a series a scrape no
// longer has), and target the labels Prometheus adds to every series of
// the target.
func (r *recorder) inputSeries(prefix string, target map[string]string) []map[string]string {
	seen := map[string]bool{}
	for _, s := range r.scrapes {
		for series := range s {
			if strings.HasPrefix(series, prefix) {
				seen[series] = true
			}
		}
	}
	all := make([]string, 0, len(seen))
	for series := range seen {
		all = append(all, series)
	}
	sort.Strings(all)
	out := make([]map[string]string, 0, len(all))
	for _, series := range all {
		values := make([]string, len(r.scrapes))
		present := false
		for i, s := range r.scrapes {
			v, ok := s[series]
			switch {
			case ok:
				values[i], present = strconv.FormatFloat(v, 'g', -1, 64), true
			case present:
				values[i], present = "stale", false
			default:
				values[i] = "_"
			}
		}
		name, labels := parseSeries(series)
		for k, v := range target {
			labels[k] = v
		}
		out = append(out, map[string]string{"series": formatSeries(name, labels), "values": strings.Join(values, " ")})
	}
	return out
}
