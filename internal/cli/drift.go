package cli

import (
	"context"
	"sync"
	"time"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"

	"github.com/autox-dev/autox/helmops"
	"github.com/autox-dev/autox/internal/drift"
	"github.com/autox-dev/autox/internal/leader"
	"github.com/autox-dev/autox/triggers"
	"github.com/autox-dev/autox/triggers/driftwatch"
)

// driftLimitFlags are the drift checks' own rate limit, of run, plan and
// list --drift: apart from the limit of installs and upgrades.
type driftLimitFlags struct {
	driftQPS   float64
	driftBurst int
}

func (d *driftLimitFlags) register(fs *pflag.FlagSet) {
	fs.Float64Var(&d.driftQPS, "drift-qps", helmops.DefaultDriftQPS, "requests per second of drift checks, a limit of their own apart from installs and upgrades")
	fs.IntVar(&d.driftBurst, "drift-burst", helmops.DefaultDriftBurst, "burst of drift check requests")
}

// checker is a DriftChecker of helm with the flags' rate limit.
func (d *driftLimitFlags) checker(helm *helmops.Manager, memory *drift.Memory) *helmops.DriftChecker {
	return helm.NewDriftChecker(helmops.DriftOptions{QPS: float32(d.driftQPS), Burst: d.driftBurst, Memory: memory})
}

// driftFlags are the drift loop's flags of `autox run`.
type driftFlags struct {
	driftLimitFlags
	driftWorkers int
	driftPeriod  time.Duration
	driftVerify  int
}

func (d *driftFlags) register(fs *pflag.FlagSet) {
	d.driftLimitFlags.register(fs)
	fs.IntVar(&d.driftWorkers, "drift-workers", 2, "drift checks run at once")
	fs.DurationVar(&d.driftPeriod, "drift-period", 10*time.Minute, "period of the re-check of each release with drift on, besides the checks its objects' changes trigger")
	fs.IntVar(&d.driftVerify, "drift-verify-every", 0, "make every Nth periodic re-check of a release a real one (its dry runs) even when its objects and record are unchanged since its last clean check; 0: such a re-check is skipped and costs no request")
}

// driftMemory is the one memory of corrections of the process, so that a
// new term keeps counting contested paths.
var (
	driftMemoryOnce sync.Once
	driftMemoryVal  *drift.Memory
)

func driftMemory() *drift.Memory {
	driftMemoryOnce.Do(func() { driftMemoryVal = drift.NewMemory() })
	return driftMemoryVal
}

// runDrift starts the drift loop of a term beside its controller: it checks
// the releases the controller finds in sync with drift on, as the term's
// clients (so its corrections go through the term's fence), and ends with
// the term. The returned func stops it and waits.
func (r *runner) runDrift(ctx context.Context, deps *clusterDeps, ctrl *triggers.Controller, events record.EventBroadcaster, term *leader.Term) func() {
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-term.Done():
			cancel()
		case <-ctx.Done():
		}
	}()
	f := r.f
	loop := driftwatch.New(driftwatch.Options{
		Checker:  f.checker(deps.helm, driftMemory()),
		Metadata: deps.meta, Mapper: deps.mapper, Source: ctrl.DriftTargets, Busy: ctrl.DriftBusy,
		Events: events.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "autox"}), Ref: ctrl.DriftRef(deps.mapper),
		Metrics: r.metrics.drift, Workers: f.driftWorkers, Period: f.driftPeriod, VerifyEvery: f.driftVerify, Log: r.log,
	})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = loop.Run(ctx)
	}()
	return func() {
		cancel()
		<-done
	}
}
