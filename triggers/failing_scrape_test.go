package triggers

import (
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/autox-dev/autox/internal/format"
)

// BenchmarkScrapeReleaseSpecGauges is one scrape of the release spec gauges
// of a fleet of 10,000 named specs with two release specs each (80,000
// series): the registry's gathering, as promhttp serves /metrics, and the
// text it writes. A Prometheus scrapes it every 15–30 s.
func BenchmarkScrapeReleaseSpecGauges(b *testing.B) {
	g := newReleaseSpecGauges()
	ids := []string{"hello", "job"}
	for i := 0; i < 10000; i++ {
		var got map[string]outcome
		if i%100 == 0 {
			got = map[string]outcome{"job": {failing: true}}
		}
		g.record(fmt.Sprintf("spec-%05d", i), format.Object{}, ids, got)
	}
	reg := prometheus.NewRegistry() // as autox serves /metrics (internal/cli)
	reg.MustRegister(g)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		mfs, err := reg.Gather()
		if err != nil {
			b.Fatal(err)
		}
		enc := expfmt.NewEncoder(io.Discard, expfmt.NewFormat(expfmt.TypeTextPlain))
		for _, mf := range mfs {
			if err := enc.Encode(mf); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// TestReleaseSpecGaugesCollectInOrder checks that Collect gives each
// gauge's series in the order the registry sorts them in (label values, the
// labels by name), which keeps its sort of a large fleet's series cheap.
func TestReleaseSpecGaugesCollectInOrder(t *testing.T) {
	g := newReleaseSpecGauges()
	for _, spec := range []string{"web", "api", "zeta", "b"} {
		g.record(spec, format.Object{}, []string{"job", "hello", "a"}, map[string]outcome{"job": {failing: true}})
	}
	ch := make(chan prometheus.Metric, 100)
	g.Collect(ch)
	close(ch)
	last := map[string][]string{} // by family: the label values of its last series
	n := 0
	for m := range ch {
		var d dto.Metric
		if err := m.Write(&d); err != nil {
			t.Fatal(err)
		}
		var values []string
		for _, lp := range d.Label { // sorted by name, as the registry has them
			values = append(values, lp.GetValue())
		}
		fam := m.Desc().String()
		if prev, ok := last[fam]; ok && !(strings.Join(prev, "\x00") < strings.Join(values, "\x00")) {
			t.Errorf("%s: series %v after %v: not in the registry's order", fam, values, prev)
		}
		last[fam] = values
		n++
	}
	if n != 4*4*3 {
		t.Errorf("collected %d series, want %d (4 gauges × 4 specs × 3 release specs)", n, 4*4*3)
	}
}
