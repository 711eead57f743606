package main

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The drift phase (--drift, --drift-edits): after the quiet passes, edits
// of release objects by another field manager, as a person with kubectl
// would make them, each until autox reports it: put back (correct) or
// detected (warn). Every release of the bench's chart is one ConfigMap
// named as the release; an edit changes a field the chart sets.

// driftEditor is the field manager of the bench's edits.
const driftEditor = "bench-editor"

// driftReason is the Event (and log line) that ends an edit's wait.
func driftReason(mode string) string {
	if mode == "correct" {
		return "DriftCorrected"
	}
	return "DriftDetected"
}

// editRelease changes the field "values" of release name's ConfigMap to
// a value of the edit's own and returns the value it had and when the
// edit was sent.
func (b *run) editRelease(ctx context.Context, name string, edit int) (old string, at time.Time, err error) {
	cms := b.cluster.Client.CoreV1().ConfigMaps("bench")
	cm, err := cms.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", time.Time{}, fmt.Errorf("drift edit %d: %w", edit, err)
	}
	old = cm.Data["values"]
	cm.Data["values"] = fmt.Sprintf(`{"editedByBench":%d}`, edit)
	at = time.Now()
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{FieldManager: driftEditor}); err != nil {
		return "", time.Time{}, fmt.Errorf("drift edit %d: %w", edit, err)
	}
	return old, at, nil
}

// awaitReport waits until p logs reason for release name after t, and
// returns when it read that line.
func awaitReport(ctx context.Context, p *process, reason, name string, t time.Time, timeout time.Duration) (time.Time, error) {
	var seen time.Time
	err := p.waitFor(ctx, timeout, func(l line) bool {
		if l.Reason == reason && l.Release == "bench/"+name && l.at.After(t) {
			seen = l.at
			return true
		}
		return false
	})
	return seen, err
}

// driftEdits is the phase; its figures go to b.r.
func (b *run) driftEdits(ctx context.Context, p *process, httpAddr string) error {
	r := &b.r
	cs := b.cluster.Client
	reason := driftReason(b.o.drift)
	before, err := readRecords(ctx, cs, "bench")
	if err != nil {
		return err
	}
	correctedBefore, err := scrapeMetric(httpAddr, `autox_drift_corrections_total{result="corrected"}`)
	if err != nil {
		return err
	}
	p.resetPeak()
	start := time.Now()
	convergedAt := p.started.Add(r.Cold)
	// The loop learns of releases at its refresh (30s) and watches their
	// objects from then on; until it does, only its periodic re-check
	// (--drift-period) sees an edit. The first release is edited again
	// every 5s until its edit is reported: the loop is ready by then.
	note("drift: waiting until the drift loop reports an edit (%s)", reason)
	first := releaseName(0)
	period := b.o.driftPeriod
	if period == 0 {
		period = 10 * time.Minute
	}
	for edit := 0; ; edit++ {
		_, at, err := b.editRelease(ctx, first, edit)
		if err != nil {
			return err
		}
		seen, err := awaitReport(ctx, p, reason, first, at, 5*time.Second)
		if err == nil {
			r.DriftReady = seen.Sub(convergedAt)
			break
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Since(start) > period+2*time.Minute {
			return fmt.Errorf("drift: no %s for %s within %s: %w", reason, first, time.Since(start).Round(time.Second), err)
		}
	}
	note("drift: %d edits", b.o.driftEdits)
	for i := 0; i < b.o.driftEdits; i++ {
		name := releaseName(1 + (i*7919)%(b.total-1))
		old, at, err := b.editRelease(ctx, name, 1000+i)
		if err != nil {
			return err
		}
		seen, err := awaitReport(ctx, p, reason, name, at, time.Minute)
		if err != nil {
			note("drift edit %d (%s) not reported within a minute", i, name)
			r.DriftMissed++
			continue
		}
		r.DriftLatencies = append(r.DriftLatencies, seen.Sub(at))
		if b.o.drift == "correct" {
			cm, err := cs.CoreV1().ConfigMaps("bench").Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if cm.Data["values"] != old {
				r.DriftNotPutBack++
			}
		}
	}
	// Every release's first check ends before the quiet window: at
	// --drift-qps Q the first checks of N releases take N / Q, and a window
	// during them measures them, not a quiet loop.
	note("drift: waiting until every release (%d) was checked once", b.total)
	firstFrom := time.Now()
	for {
		checked, err := scrapeMetric(httpAddr, `autox_drift_checks_total{result="checked"}`)
		if err != nil {
			return err
		}
		if int(checked) >= b.total {
			r.DriftFirstChecks = time.Since(convergedAt)
			break
		}
		if time.Since(firstFrom) > 30*time.Minute {
			note("drift: only %d of %d releases checked after 30 min: the quiet window includes first checks", int(checked), b.total)
			break
		}
		select {
		case <-time.After(5 * time.Second):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	// A quiet window with the loop running and every release learnt:
	// what drift costs while nothing changes (its periodic re-checks,
	// spread over --drift-period), to set beside the quiet period above.
	time.Sleep(3 * time.Second) // the last correction's Event goes out
	quietFrom, err := scrapeRequests(httpAddr)
	if err != nil {
		return err
	}
	t := time.Now()
	select {
	case <-time.After(max(b.o.resync, 30*time.Second)):
	case <-ctx.Done():
		return ctx.Err()
	}
	quietTo, err := scrapeRequests(httpAddr)
	if err != nil {
		return err
	}
	r.DriftQuiet, r.DriftQuietWindow = quietTo.minus(quietFrom), time.Since(t)
	after, err := readRecords(ctx, cs, "bench")
	if err != nil {
		return err
	}
	r.DriftRecordWrites = changedRecords(before, after)
	r.DriftHelmWrites = p.writesSince(start)
	correctedAfter, err := scrapeMetric(httpAddr, `autox_drift_corrections_total{result="corrected"}`)
	if err != nil {
		return err
	}
	r.DriftCorrections = int64(correctedAfter - correctedBefore)
	r.DriftRSS = p.peakRSS()
	r.Load["drift"] = loadAvg()
	return nil
}

// releaseName is the name of the fleet's i-th release.
func releaseName(i int) string {
	return fmt.Sprintf("t%04d-r%d", i/releasesPerTrigger, i%releasesPerTrigger)
}
