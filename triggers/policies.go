package triggers

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/triggers/apply"
	"github.com/autox-dev/autox/triggers/plan"
)

// The loop's part in the release policies (DESIGN §3, §5): the gauges of
// suspended specs and release specs and of used-up retries, and the bound
// of a reconcile with per release spec timeouts. Deciding is the plan's
// (triggers/plan/policies.go), acting the applier's.

// newSuspendedGauge counts, by level, what the config in force suspends.
func newSuspendedGauge() *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "autox_suspended",
		Help: "What the config in force suspends, as the leader applies it: level=spec counts specs with suspend: true, level=release_spec the release specs held (suspended themselves or by their spec). autox makes no Helm write for them.",
	}, []string{"level"})
}

// setSuspended sets the suspended gauges from cfg; m may be nil.
func (m *Metrics) setSuspended(cfg *config.Config) {
	if m == nil {
		return
	}
	var specs, releaseSpecs int
	for _, name := range cfg.SpecNames() {
		spec := cfg.Specs[name]
		specs += b2i(spec.Suspend)
		for _, id := range spec.ReleaseSpecIDs() {
			releaseSpecs += b2i(spec.Suspended(id) != "")
		}
	}
	m.suspended.WithLabelValues("spec").Set(float64(specs))
	m.suspended.WithLabelValues("release_spec").Set(float64(releaseSpecs))
}

// exhausted reports whether step s (err: its error) finds its release
// spec's retries used up: held for it, remediated for it, or the failed
// attempt that used them up.
func exhausted(s plan.Step, err error) bool {
	if errors.Is(err, apply.ErrRetriesExhausted) {
		return true
	}
	if s.Action == plan.ActionExhausted {
		return true
	}
	return s.Retries != nil && s.Retries.Exhausted && (s.Action == plan.ActionRollback || s.Action == plan.ActionUninstall)
}

// staleAfter is the longest unlock age of spec's release specs (the
// defaults' for none): what bounds one of its operations.
func staleAfter(spec *config.Spec, d config.PolicyDefaults) time.Duration {
	longest := d.Of(nil).StaleAfter()
	if spec == nil {
		return longest
	}
	for _, rs := range spec.ReleaseSpecs {
		longest = max(longest, d.Of(rs).StaleAfter())
	}
	return longest
}
