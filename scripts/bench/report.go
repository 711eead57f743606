package main

import (
	"fmt"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"
)

// results are one run's figures; saved as JSON (--out) for --plot.
type results struct {
	// Mode is "fleet" (named triggers × 2 releases), "selector" or
	// "replicas"; Drift the specs' drift mode ("": off).
	Mode, Drift                                 string
	Triggers, Releases                          int
	Chart, Date                                 string
	Workers, FloorWorkers, BaselineSample       int
	PageSize                                    int64
	Baseline, Cold, NoopPass, Restart           time.Duration
	Floor                                       time.Duration
	FloorWrites                                 int64
	FloorServerCPU, ColdServerCPU               time.Duration
	ColdByKind, QuietByKind                     requestCounts
	BaselineSampled, Seeded                     bool
	ColdRSS, NoopRSS, RestartRSS, ReactionRSS   int64
	ColdRequests, NoopRequests, RestartRequests int64
	NoopWrites, RestartWrites                   int
	InstallMean                                 time.Duration
	// TrailingEvents are the Events autox sent in the 10 s after
	// convergence; LastTrailingEvent when the last of them was seen.
	TrailingEvents    int64
	LastTrailingEvent time.Duration
	ColdCPU           time.Duration
	Reactions         []time.Duration
	// ServerPeak is kube-apiserver's peak RSS per phase; Load the 1-minute
	// load average at the end of each phase (the machine is shared).
	ServerPeak map[string]int64
	Load       map[string]float64
	Lists      []listResult
	// The drift phase: convergence → the loop's first report of an edit;
	// each edit → its report; edits not reported within a minute, or
	// reported as corrected but not put back; corrections counted by
	// autox; record writes and Helm operations meanwhile; peak RSS.
	DriftReady        time.Duration
	DriftLatencies    []time.Duration
	DriftMissed       int
	DriftNotPutBack   int
	DriftCorrections  int64
	DriftRecordWrites recordChanges
	DriftHelmWrites   int
	DriftRSS          int64
	// DriftFirstChecks is the time from convergence until every release
	// was checked once (0: not reached).
	DriftFirstChecks time.Duration
	// DriftQuiet are the requests of a quiet window after the edits, the
	// loop having learnt every release; DriftQuietWindow its length.
	DriftQuiet       requestCounts
	DriftQuietWindow time.Duration
	// Replicas is the replicas run's (see replicas.go).
	Replicas *replicaResults `json:",omitempty"`
}

func percentile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(q*float64(len(s)-1) + 0.5)
	return s[i]
}

func mib(b int64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }

func secs(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }

func (r results) table(o options) string {
	var b strings.Builder
	workers := "default"
	if o.workers > 0 {
		workers = strconv.Itoa(o.workers)
	}
	if r.Mode == "selector" {
		fmt.Fprintf(&b, "\n### selector trigger: %d matching objects × 1 release (and %d Deployments it does not match) of chart %s, --workers %s, --list-page-size %d\n\n",
			r.Triggers, r.Triggers/2, o.chart, workers, r.PageSize)
	} else {
		fmt.Fprintf(&b, "\n### %d triggers × %d releases (%d releases) of chart %s, --workers %s, --list-page-size %d\n\n", r.Triggers, releasesPerTrigger, r.Releases, o.chart, workers, r.PageSize)
	}
	b.WriteString(machine(r.Date))
	b.WriteString("| measure | autox | baseline / target |\n|---|---|---|\n")
	drift := "off"
	if r.Drift != "" {
		drift = r.Drift + " on every spec"
		if o.driftPeriod > 0 {
			drift += ", --drift-period " + o.driftPeriod.String()
		}
		if o.driftQPS > 0 {
			drift += fmt.Sprintf(", --drift-qps %g", o.driftQPS)
		}
	}
	fmt.Fprintf(&b, "| drift | %s | |\n", drift)
	if r.Mode != "selector" {
		baseline := secs(r.Baseline) + " (`helm upgrade --install`, one after another"
		if r.BaselineSampled {
			baseline += fmt.Sprintf(", extrapolated from %d releases", o.baselineSample)
		}
		baseline += ")"
		if r.Seeded {
			fmt.Fprintf(&b, "| cold convergence | not measured: releases seeded | %s |\n", baseline)
			fmt.Fprintf(&b, "| start on the seeded releases → first complete pass | %s | |\n", secs(r.Cold))
		} else {
			fmt.Fprintf(&b, "| cold convergence, nothing → all deployed | %s | %s |\n", secs(r.Cold), baseline)
		}
	} else {
		fmt.Fprintf(&b, "| cold convergence, nothing → all deployed | %s | |\n", secs(r.Cold))
	}
	fmt.Fprintf(&b, "| floor: the same releases' writes (%.0f per release) made directly, %d workers, no rate limit | %s | |\n",
		float64(r.FloorWrites)/float64(r.Releases), o.floorWorkers, secs(r.Floor))
	if !r.Seeded {
		fmt.Fprintf(&b, "| autox's speed as a share of the floor's | %.0f %% | target ≥ 75 %% at 1,000 triggers, ≥ 65 %% at 10,000 (issue 35) |\n", r.share())
		fmt.Fprintf(&b, "| API requests per release installed, cold (all / writes) | %.2f / %.2f | floor: %.2f / %.2f; target ≤ 3.8 (all) |\n",
			float64(r.ColdByKind.total())/float64(r.Releases), float64(r.ColdByKind.writes())/float64(r.Releases),
			float64(r.FloorWrites)/float64(r.Releases), float64(r.FloorWrites)/float64(r.Releases))
		for _, k := range r.ColdByKind.sorted() {
			fmt.Fprintf(&b, "| … %s %s | %.2f | |\n", k.verb, k.resource, float64(r.ColdByKind[k])/float64(r.Releases))
		}
		fmt.Fprintf(&b, "| Events sent in the 10 s after convergence (the last seen, after convergence) | %d (%s) | none later than a few seconds |\n", r.TrailingEvents, secs(r.LastTrailingEvent))
		fmt.Fprintf(&b, "| mean time of one Helm install inside autox | %s | |\n", secs(r.InstallMean))
		fmt.Fprintf(&b, "| CPU time of autox during cold convergence | %s | |\n", secs(r.ColdCPU))
		fmt.Fprintf(&b, "| CPU time of kube-apiserver and etcd during cold convergence | %s | floor: %s |\n", secs(r.ColdServerCPU), secs(r.FloorServerCPU))
		if r.Mode != "selector" {
			fmt.Fprintf(&b, "| speed-up over the baseline | %.1f× | target ≥ 5× |\n", r.Baseline.Seconds()/r.Cold.Seconds())
		}
	}
	fmt.Fprintf(&b, "| no-op periodic pass: time | %s | target < 0.5 s at 10,000 |\n", secs(r.NoopPass))
	fmt.Fprintf(&b, "| no-op periodic pass: API requests | %d | must not grow with triggers |\n", r.NoopRequests)
	fmt.Fprintf(&b, "| no-op periodic pass: Helm writes | %d | must be 0 |\n", r.NoopWrites)
	fmt.Fprintf(&b, "| one quiet --resync period (end of a no-op pass → end of the next): API requests (writes) | %d (%d): %s | writes must be 0 |\n", r.QuietByKind.total(), r.QuietByKind.writes(), r.QuietByKind)
	fmt.Fprintf(&b, "| restart → first complete pass: time | %s | target < 3 s at 10,000 |\n", secs(r.Restart))
	fmt.Fprintf(&b, "| restart → first complete pass: API requests (first pass) | %d | |\n", r.RestartRequests)
	fmt.Fprintf(&b, "| restart: Helm writes | %d | must be 0 |\n", r.RestartWrites)
	if len(r.Reactions) > 0 {
		fmt.Fprintf(&b, "| reaction, relabel → both releases upgraded: p50 | %s | |\n", secs(percentile(r.Reactions, 0.5)))
		fmt.Fprintf(&b, "| reaction: p99 (%d relabels) | %s | target < 0.5 s at 10,000 |\n", len(r.Reactions), secs(percentile(r.Reactions, 0.99)))
	}
	if len(r.Reactions) > 0 {
		fmt.Fprintf(&b, "| peak RSS: cold convergence / no-op pass / restart / relabels | %s / %s / %s / %s | target < 300 MiB at 10,000 |\n",
			mib(r.ColdRSS), mib(r.NoopRSS), mib(r.RestartRSS), mib(r.ReactionRSS))
	} else {
		fmt.Fprintf(&b, "| peak RSS: cold convergence / no-op pass / restart | %s / %s / %s | target < 300 MiB at 10,000 |\n",
			mib(r.ColdRSS), mib(r.NoopRSS), mib(r.RestartRSS))
	}
	fmt.Fprintf(&b, "| kube-apiserver peak RSS: floor / cold / quiet / restart | %s / %s / %s / %s | |\n",
		mib(r.ServerPeak["floor"]), mib(r.ServerPeak["cold"]), mib(r.ServerPeak["quiet"]), mib(r.ServerPeak["restart"]))
	if len(r.DriftLatencies) > 0 || r.DriftMissed > 0 {
		what := "edit → put back (DriftCorrected)"
		if r.Drift == "warn" {
			what = "edit → reported (DriftDetected)"
		}
		fmt.Fprintf(&b, "| drift: convergence → first edit reported (the loop has learnt the releases) | %s | |\n", secs(r.DriftReady))
		fmt.Fprintf(&b, "| drift: convergence → every release checked once | %s | 0: not within 30 min |\n", secs(r.DriftFirstChecks))
		fmt.Fprintf(&b, "| drift: %s p50 / p99 (%d edits, %d not reported within a minute) | %s / %s | |\n", what,
			len(r.DriftLatencies)+r.DriftMissed, r.DriftMissed, secs(percentile(r.DriftLatencies, 0.5)), secs(percentile(r.DriftLatencies, 0.99)))
		fmt.Fprintf(&b, "| drift: corrections (autox_drift_corrections_total corrected); reported corrected but not put back | %d; %d | |\n", r.DriftCorrections, r.DriftNotPutBack)
		fmt.Fprintf(&b, "| drift: a quiet window of %s after the edits (every release learnt): API requests, per second | %d, %.1f/s: %s | drift off: the quiet --resync period above, before the loop learnt the releases |\n",
			secs(r.DriftQuietWindow), r.DriftQuiet.total(), float64(r.DriftQuiet.total())/r.DriftQuietWindow.Seconds(), r.DriftQuiet)
		fmt.Fprintf(&b, "| drift: release record writes / Helm operations logged during the edits | %s / %d | must be 0 |\n", r.DriftRecordWrites, r.DriftHelmWrites)
		fmt.Fprintf(&b, "| drift: peak RSS during the edits | %s | |\n", mib(r.DriftRSS))
	}
	for _, l := range r.Lists {
		fmt.Fprintf(&b, "| LIST of %d records / %d triggers (metadata), %s: median of %d | %s / %s, kube-apiserver peak RSS %s (%+.0f MiB over its RSS before) | |\n",
			l.Records, l.Triggers, pageLabel(l.PageSize), listRepeats, msecs(l.RecordsTook), msecs(l.TriggersTook), mib(l.ServerPeak), float64(l.ServerPeak-l.ServerBefore)/(1<<20))
	}
	fmt.Fprintf(&b, "| load average (1 min) at the end of: %s | %s | |\n", strings.Join(phaseOrder(r.Load), " / "), r.loads())
	return b.String()
}

// share is autox's speed as a share of the floor's, in percent.
func (r results) share() float64 {
	if r.Cold <= 0 {
		return 0
	}
	return 100 * r.Floor.Seconds() / r.Cold.Seconds()
}

var phaseNames = []string{"baseline", "floor", "cold", "quiet", "drift", "lists", "restart", "relabels", "kills", "join"}

// phaseOrder are the phases of m in the order they run.
func phaseOrder[V any](m map[string]V) []string {
	var out []string
	for _, p := range phaseNames {
		if _, ok := m[p]; ok {
			out = append(out, p)
		}
	}
	return out
}

func (r results) loads() string {
	var parts []string
	for _, p := range phaseOrder(r.Load) {
		parts = append(parts, fmt.Sprintf("%.1f", r.Load[p]))
	}
	return strings.Join(parts, " / ")
}

// machine is the line that says where and when a run ran.
func machine(date string) string {
	return fmt.Sprintf("Machine: %s, %d cores, %s, %s/%s, %s; %s.\n\n", cpuModel(), runtime.NumCPU(), memTotal(), runtime.GOOS, runtime.GOARCH, runtime.Version(), date)
}

func pageLabel(size int64) string {
	if size == 0 {
		return "one response"
	}
	return fmt.Sprintf("pages of %d", size)
}

func msecs(d time.Duration) string {
	return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond))
}

func cpuModel() string {
	data, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	for _, l := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(l, "model name") {
			if i := strings.Index(l, ":"); i >= 0 {
				return strings.TrimSpace(l[i+1:])
			}
		}
	}
	return runtime.GOARCH
}

func memTotal() string {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return "? memory"
	}
	for _, l := range strings.Split(string(data), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "MemTotal:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return fmt.Sprintf("%.0f GiB", float64(kb)/(1<<20))
		}
	}
	return "? memory"
}
