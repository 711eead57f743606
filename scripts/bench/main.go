// Command bench measures autox against the `helm upgrade --install` baseline
// on the local control plane and prints one markdown table. Run it with
// scripts/bench.sh; see BENCHMARKS.md for results and what each row means.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/autox-dev/autox/internal/testenv"
)

type options struct {
	triggers, relabels, workers, baselineSample int
	floorWorkers                                int
	seed, selector                              bool
	chart                                       string
	resync                                      time.Duration
	// pageSize is autox's --list-page-size; listPages the page sizes the
	// lists phase measures.
	pageSize  int64
	listPages []int64
	// out is the directory the run's results go to (JSON, for --plot).
	out string
	// drift is the drift mode of the bench's specs ("": none); driftEdits
	// the edits of release objects after convergence; driftPeriod and
	// driftQPS autox's flags (0: autox's default).
	drift       string
	driftEdits  int
	driftPeriod time.Duration
	driftQPS    float64
	// autoxArgs are passed to every autox process as they are.
	autoxArgs []string
	// replicas, shards and kills: the replicas run (see replicas.go).
	replicas, shards, kills int
	// serverProfile is the directory kube-apiserver's CPU profiles of the
	// floor and of cold convergence go to ("": none), each of
	// serverProfileSeconds.
	serverProfile        string
	serverProfileSeconds int
}

func main() {
	var o options
	var listPages, plot string
	flag.IntVar(&o.triggers, "triggers", 200, "trigger Deployments (each with 2 releases); with --selector, matching Deployments (one release each)")
	flag.IntVar(&o.relabels, "relabels", 50, "relabels for the reaction latency")
	flag.IntVar(&o.workers, "workers", 0, "autox --workers (0: autox's default)")
	flag.IntVar(&o.floorWorkers, "floor-workers", 16, "releases the floor client installs in parallel")
	flag.StringVar(&o.chart, "chart", "one", "chart of testdata/charts every release installs")
	flag.BoolVar(&o.seed, "seed", false, "instead of timing autox's cold convergence, write the releases autox would install (the floor's way, with autox's labels) and start autox on them: for fleets too big to converge within a run")
	flag.BoolVar(&o.selector, "selector", false, "instead: one selector spec serving --triggers matching Deployments with one release each, beside half as many it does not match (floor, cold convergence, quiet pass, lists, restart; no baseline, no relabels)")
	flag.IntVar(&o.baselineSample, "baseline-sample", 0, "run the helm baseline for only this many releases and extrapolate (0: all)")
	flag.DurationVar(&o.resync, "resync", time.Minute, "autox --resync, by default autox's own: every pass during a cold convergence costs autox CPU (at 10,000 triggers, 20s made it 30% more); the no-op pass is the first periodic pass after convergence")
	flag.Int64Var(&o.pageSize, "page-size", 0, "autox --list-page-size (0: one response)")
	flag.StringVar(&listPages, "list-pages", "0,500,5000", "page sizes at which the lists phase times the pass's two large LISTs and the API server's memory (0: one response; empty: no lists phase)")
	flag.StringVar(&o.out, "out", "", "directory to write this run's results to (fleet-N.json or selector-N.json), for --plot")
	flag.StringVar(&logDir, "log-dir", "", "keep every autox process's log in this directory (autox-1.log, …)")
	flag.StringVar(&o.drift, "drift", "", "drift mode of every spec: warn or correct (empty: drift off)")
	flag.IntVar(&o.driftEdits, "drift-edits", 0, "with --drift: after the quiet passes, this many edits of release objects by another field manager, each until corrected (correct) or reported (warn)")
	flag.DurationVar(&o.driftPeriod, "drift-period", 0, "autox --drift-period (0: autox's default)")
	flag.Float64Var(&o.driftQPS, "drift-qps", 0, "autox --drift-qps (0: autox's default)")
	var autoxArgs string
	flag.StringVar(&autoxArgs, "autox-args", "", "more arguments for every autox process, split at spaces (e.g. \"--leader-election-lease-duration 8s\")")
	flag.IntVar(&o.replicas, "replicas", 0, "instead: start this many autox replicas with --shards (cold convergence per replica, --kills failovers, a restart and a join)")
	flag.IntVar(&o.shards, "shards", 6, "with --replicas: autox --shards")
	flag.IntVar(&o.kills, "kills", 2, "with --replicas: kill -9 of a replica holding shards, this many times")
	flag.StringVar(&o.serverProfile, "server-profile", "", "write kube-apiserver's CPU profiles of the floor and of cold convergence to this directory (apiserver-floor.pprof, apiserver-cold.pprof)")
	flag.IntVar(&o.serverProfileSeconds, "server-profile-seconds", 5, "with --server-profile: the seconds each profile covers, from 1 s into the phase")
	flag.StringVar(&plot, "plot", "", "instead of a run: read the results in this directory, write growth.svg there and print the growth table")
	flag.Parse()
	o.autoxArgs = strings.Fields(autoxArgs)
	var err error
	if o.listPages, err = parsePages(listPages); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	if o.seed && o.selector {
		fmt.Fprintln(os.Stderr, "bench: --seed works with named triggers only")
		os.Exit(2)
	}
	if logDir != "" {
		// Made now, not when the first autox starts minutes into the run.
		if err := os.MkdirAll(logDir, 0o755); err != nil {
			fmt.Fprintln(os.Stderr, "bench: --log-dir:", err)
			os.Exit(2)
		}
	}
	if msg := o.check(); msg != "" {
		fmt.Fprintln(os.Stderr, "bench:", msg)
		os.Exit(2)
	}
	if plot != "" {
		if err := growth(plot); err != nil {
			fmt.Fprintln(os.Stderr, "bench failed:", err)
			os.Exit(1)
		}
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := bench(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "bench failed:", err)
		os.Exit(1)
	}
}

// check tells flags that do not go together, or "".
func (o options) check() string {
	switch {
	case o.drift != "" && o.drift != "warn" && o.drift != "correct":
		return "--drift is warn or correct"
	case o.driftEdits > 0 && (o.drift == "" || o.selector):
		return "--drift-edits needs --drift, and named triggers (no --selector)"
	case o.replicas > 0 && (o.drift != "" || o.seed || o.selector):
		return "--replicas runs named triggers without --drift, --seed or --selector"
	case o.replicas > 0 && (o.shards < 2 || o.kills < 0):
		return "--replicas needs --shards of 2 or more and --kills of 0 or more"
	}
	return ""
}

func note(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "bench: "+format+"\n", args...)
}

const releasesPerTrigger = 2

// run is one benchmark run: the binaries, the control plane and the
// fleet's triggers, shared by its phases.
type run struct {
	o       options
	cluster *testenv.Cluster
	autox   string
	helm    string
	work    string
	chart   string
	// config is autox's config file; total the releases it makes.
	config string
	total  int
	r      results
}

func bench(ctx context.Context, o options) error {
	root, err := testenv.ModuleRoot()
	if err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "autox-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)

	note("building autox and the helm CLI %s", helmVersion(root))
	autox, err := testenv.BuildAutox(work, "bench", testenv.Plain)
	if err != nil {
		return err
	}
	helm := filepath.Join(work, "helm")
	if !o.selector && o.replicas == 0 {
		build := exec.CommandContext(ctx, "go", "build", "-o", helm, "helm.sh/helm/v4/cmd/helm")
		build.Dir = filepath.Join(root, "scripts", "helmcli")
		if out, err := build.CombinedOutput(); err != nil {
			return fmt.Errorf("build helm: %w\n%s", err, out)
		}
	}

	note("starting kube-apiserver and etcd")
	cluster, err := testenv.Start()
	if err != nil {
		return err
	}
	defer func() {
		if err := cluster.Stop(); err != nil {
			note("stop control plane: %v", err)
		}
	}()
	for _, ns := range []string{"bench", "baseline", "floor"} {
		if _, err := cluster.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	b := &run{o: o, cluster: cluster, autox: autox, helm: helm, work: work, chart: filepath.Join(root, "testdata", "charts", o.chart),
		r: results{Mode: "fleet", Drift: o.drift, Triggers: o.triggers, Chart: o.chart, Workers: o.workers, PageSize: o.pageSize,
			FloorWorkers: o.floorWorkers, BaselineSample: o.baselineSample, Date: time.Now().UTC().Format("2006-01-02 15:04 MST"),
			Load: map[string]float64{}, ServerPeak: map[string]int64{}}}
	if o.selector {
		b.r.Mode, b.total, b.config = "selector", o.triggers, selectorYAML(o.triggers, b.chart, o.drift)
		note("creating %d matching and %d other Deployments", o.triggers, o.triggers/2)
		if err := createSelected(ctx, cluster.Client, o.triggers); err != nil {
			return err
		}
	} else {
		b.total, b.config = o.triggers*releasesPerTrigger, configYAML(o.triggers, b.chart, o.drift)
		note("creating %d trigger Deployments", o.triggers)
		if err := createTriggers(ctx, cluster.Client, o.triggers); err != nil {
			return err
		}
	}
	b.r.Releases = b.total
	if o.replicas > 0 {
		return b.replicaRun(ctx)
	}
	if err := b.phases(ctx); err != nil {
		return err
	}
	fmt.Print(b.r.table(o))
	return b.r.save(o.out)
}

// phases runs the phases of b in order (see phases.go).
func (b *run) phases(ctx context.Context) error {
	if !b.o.selector {
		if err := b.baseline(ctx); err != nil {
			return err
		}
	}
	if err := b.floor(ctx); err != nil {
		return err
	}
	p, args, httpAddr, err := b.cold(ctx)
	if err != nil {
		return err
	}
	defer func() { p.kill() }()
	if err := b.quiet(ctx, p, httpAddr); err != nil {
		return err
	}
	if b.o.driftEdits > 0 {
		if err := b.driftEdits(ctx, p, httpAddr); err != nil {
			return err
		}
	}
	if len(b.o.listPages) > 0 {
		if err := b.lists(ctx); err != nil {
			return err
		}
	}
	if p, err = b.restart(ctx, p, args); err != nil {
		return err
	}
	if !b.o.selector {
		if err := b.relabels(ctx, p); err != nil {
			return err
		}
	}
	p.stop()
	return nil
}
