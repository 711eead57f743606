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
}

func main() {
	var o options
	flag.IntVar(&o.triggers, "triggers", 200, "trigger Deployments (each with 2 releases)")
	flag.IntVar(&o.relabels, "relabels", 50, "relabels for the reaction latency")
	flag.IntVar(&o.workers, "workers", 0, "autox --workers (0: autox's default)")
	flag.IntVar(&o.floorWorkers, "floor-workers", 16, "releases the floor client installs in parallel")
	flag.StringVar(&o.chart, "chart", "one", "chart of testdata/charts every release installs")
	flag.BoolVar(&o.seed, "seed", false, "instead of timing autox's cold convergence, write the releases autox would install (the floor's way, with autox's labels) and start autox on them: for fleets too big to converge within a run")
	flag.BoolVar(&o.selector, "selector", false, "instead: one selector spec serving --triggers matching Deployments with one release each (cold convergence, no-op pass, restart, RSS)")
	flag.IntVar(&o.baselineSample, "baseline-sample", 0, "run the helm baseline for only this many releases and extrapolate (0: all)")
	flag.DurationVar(&o.resync, "resync", 20*time.Second, "autox --resync (the no-op pass is the first periodic pass after convergence)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := bench(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "bench failed:", err)
		os.Exit(1)
	}
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
	total   int
	r       results
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
	build := exec.CommandContext(ctx, "go", "build", "-o", helm, "helm.sh/helm/v3/cmd/helm")
	build.Dir = filepath.Join(root, "scripts", "helmcli")
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("build helm: %w\n%s", err, out)
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
	chart := filepath.Join(root, "testdata", "charts", o.chart)
	if o.selector {
		return benchSelector(ctx, o, cluster, autox, work, chart)
	}
	note("creating %d trigger Deployments", o.triggers)
	if err := createTriggers(ctx, cluster.Client, o.triggers); err != nil {
		return err
	}
	b := &run{o: o, cluster: cluster, autox: autox, helm: helm, work: work, chart: chart, total: o.triggers * releasesPerTrigger,
		r: results{Triggers: o.triggers, Releases: o.triggers * releasesPerTrigger}}
	if err := b.baseline(ctx); err != nil {
		return err
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
	restarted, err := b.restart(ctx, p, args)
	if err != nil {
		return err
	}
	p = restarted
	if err := b.relabels(ctx, p); err != nil {
		return err
	}
	p.stop()
	fmt.Print(b.r.table(o))
	return nil
}

// ---- the autox process and its log ----

// ---- the table ----

// ---- autox's API requests, from its /metrics ----
