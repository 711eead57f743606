package driftwatch

import (
	"errors"
	"fmt"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/autox-dev/autox/helmops"
	"github.com/autox-dev/autox/internal/drift"
)

// Metrics are the drift loop's metrics; nil counts nothing.
type Metrics struct {
	drifted     prometheus.Gauge
	corrections *prometheus.CounterVec
	checkErrors *prometheus.CounterVec
	checks      *prometheus.CounterVec
}

// Results of a correction.
const (
	resultCorrected = "corrected"
	resultFailed    = "failed"
	resultConflict  = "conflict"
)

// Results of a check of a release.
const (
	resultChecked = "checked"
	resultSkipped = "skipped_unchanged"
	resultError   = "error"
)

// NewMetrics registers the drift loop's metrics on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		drifted: prometheus.NewGauge(prometheus.GaugeOpts{Name: "autox_drifted_releases",
			Help: "Releases whose last drift check found drift it did not correct (warn mode, a field never corrected, a failed or contested correction)."}),
		corrections: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "autox_drift_corrections_total",
			Help: "Drift corrections of objects, by result: corrected, conflict (the object changed since it was read; checked again), failed."}, []string{"result"}),
		checkErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "autox_drift_check_errors_total",
			Help: "Drift checks of objects or releases that failed, by reason: the API server's reason (Forbidden, InternalError, ...), release (its record could not be read or is not deployed), other."}, []string{"reason"}),
		checks: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "autox_drift_checks_total",
			Help: "Drift checks of releases, by result: checked (read and dry-run), skipped_unchanged (a periodic check of a release whose objects and record are as its last clean check read them: no request), error (the release or an object could not be checked)."}, []string{"result"}),
	}
	for _, r := range []string{resultCorrected, resultFailed, resultConflict} {
		m.corrections.WithLabelValues(r)
	}
	for _, r := range []string{resultChecked, resultSkipped, resultError} {
		m.checks.WithLabelValues(r)
	}
	for _, c := range []prometheus.Collector{m.drifted, m.corrections, m.checkErrors, m.checks} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// checkErrorReason is the reason label of a failed check.
func checkErrorReason(err error) string {
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		if r := st.Status().Reason; r != metav1.StatusReasonUnknown && r != "" {
			return string(r)
		}
	}
	return "other"
}

// Events of the drift loop.
const (
	EventDetected         = "DriftDetected"
	EventCorrected        = "DriftCorrected"
	EventCorrectionFailed = "DriftCorrectionFailed"
	EventContested        = "DriftContested"
)

// event is one Event the report of a check makes.
type event struct {
	Type, Reason, Message string
}

// Events are the Events a check's report makes: per object, what drifted
// by path (Secret keys are hidden by the report), never a value.
func Events(t Target, rep *helmops.DriftReport) []event {
	if rep == nil {
		return nil
	}
	rel := t.Namespace + "/" + t.Name
	var out []event
	for _, o := range rep.Objects {
		if o.CheckErr != nil || !o.Drifted() {
			continue
		}
		what := describe(o.Result)
		var contested []string
		for _, f := range o.Fields {
			if f.State == drift.Contested {
				contested = append(contested, fmt.Sprintf("%s (written by %s)", f.Path, strings.Join(f.Managers, ", ")))
			}
		}
		switch {
		case len(contested) > 0 || o.NotCorrected == string(drift.Contested):
			out = append(out, event{corev1.EventTypeWarning, EventContested,
				fmt.Sprintf("release %s: %s %s keeps changing; not corrected again for now: %s", rel, o.Object, what, strings.Join(contested, "; "))})
		case o.Corrected:
			out = append(out, event{corev1.EventTypeNormal, EventCorrected, fmt.Sprintf("release %s: %s put back: %s", rel, o.Object, what)})
		case o.CorrectErr != nil:
			out = append(out, event{corev1.EventTypeWarning, EventCorrectionFailed,
				fmt.Sprintf("release %s: %s drifted (%s), and the correction failed: %v", rel, o.Object, what, o.CorrectErr)})
		default:
			reason := o.NotCorrected
			if reason == "" {
				reason = "reported only"
			}
			out = append(out, event{corev1.EventTypeWarning, EventDetected, fmt.Sprintf("release %s: %s drifted (%s); not corrected: %s", rel, o.Object, what, reason)})
		}
	}
	return out
}

// describe names what drifted of an object: "missing", or its paths with
// their states other than plain drift.
func describe(r drift.Result) string {
	if r.Missing {
		return "missing"
	}
	var paths []string
	for _, f := range r.Fields {
		p := f.Path
		if f.State != drift.Drifted {
			p += " (" + string(f.State) + ")"
		}
		paths = append(paths, p)
	}
	return "fields " + strings.Join(paths, ", ")
}

// outstanding says whether a report leaves drift in place.
func outstanding(rep *helmops.DriftReport) bool {
	if rep == nil {
		return false
	}
	for _, o := range rep.Objects {
		if o.CheckErr == nil && o.Drifted() && !o.Corrected {
			return true
		}
	}
	return false
}

// count counts a check in m.
func (m *Metrics) count(rep *helmops.DriftReport, err error) {
	if m == nil {
		return
	}
	if err != nil {
		m.checkErrors.WithLabelValues("release").Inc()
		m.checks.WithLabelValues(resultError).Inc()
		return
	}
	if len(rep.Failed()) > 0 {
		m.checks.WithLabelValues(resultError).Inc()
	} else {
		m.checks.WithLabelValues(resultChecked).Inc()
	}
	for _, o := range rep.Objects {
		switch {
		case o.CheckErr != nil:
			m.checkErrors.WithLabelValues(checkErrorReason(o.CheckErr)).Inc()
		case o.Corrected:
			m.corrections.WithLabelValues(resultCorrected).Inc()
		case o.CorrectErr != nil && apierrors.IsConflict(o.CorrectErr):
			m.corrections.WithLabelValues(resultConflict).Inc()
		case o.CorrectErr != nil:
			m.corrections.WithLabelValues(resultFailed).Inc()
		}
	}
}

// checked counts a check of a release by result.
func (m *Metrics) checked(result string) {
	if m != nil {
		m.checks.WithLabelValues(result).Inc()
	}
}
