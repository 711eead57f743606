package cli

import (
	"fmt"
	"io"
	"regexp"
	"slices"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"

	"github.com/autox-dev/autox/internal/eventsink"
	"github.com/autox-dev/autox/internal/leader"
	"github.com/autox-dev/autox/triggers"
	"github.com/autox-dev/autox/triggers/driftwatch"
	"github.com/autox-dev/autox/watch"
)

// What the user guide and docs/design.md §6 must document, so that their
// test (docs/docs_test.go) reads it from the code rather than from a list
// kept by hand.

// Commands returns autox's command tree, as Main builds it.
func Commands() *cobra.Command { return newRootCommand("docs", io.Discard, io.Discard) }

// MetricNames returns the names of the metrics `autox run` serves, sorted:
// those of the registry it builds and those each component registers on
// it, read from the collectors' descriptions, so a vector none of whose
// series exists yet counts too.
func MetricNames() ([]string, error) {
	rec := &describedRegisterer{}
	for _, c := range processCollectors() {
		rec.MustRegister(c)
	}
	if _, err := watch.NewMetrics(rec); err != nil {
		return nil, err
	}
	if _, err := leader.NewMetrics(rec); err != nil {
		return nil, err
	}
	if _, err := eventsink.NewMetrics(rec); err != nil {
		return nil, err
	}
	if _, err := triggers.NewMetrics(rec); err != nil {
		return nil, err
	}
	if _, err := driftwatch.NewMetrics(rec); err != nil {
		return nil, err
	}
	return rec.names()
}

// describedRegisterer keeps what is registered on it, to describe it.
type describedRegisterer struct{ collectors []prometheus.Collector }

func (r *describedRegisterer) Register(c prometheus.Collector) error {
	r.collectors = append(r.collectors, c)
	return nil
}

func (r *describedRegisterer) MustRegister(cs ...prometheus.Collector) {
	r.collectors = append(r.collectors, cs...)
}

func (r *describedRegisterer) Unregister(prometheus.Collector) bool { return false }

// fqName is the name in a Desc's String(): the Desc keeps it unexported.
var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

func (r *describedRegisterer) names() ([]string, error) {
	var descs []*prometheus.Desc
	for _, c := range r.collectors {
		ch := make(chan *prometheus.Desc)
		go func() {
			c.Describe(ch)
			close(ch)
		}()
		for d := range ch {
			descs = append(descs, d)
		}
	}
	var out []string
	for _, d := range descs {
		m := fqName.FindStringSubmatch(d.String())
		if m == nil {
			return nil, fmt.Errorf("cannot read the name of metric %s", d)
		}
		out = append(out, m[1])
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}
