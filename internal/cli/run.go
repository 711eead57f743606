package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/helmops"
	"github.com/autox-dev/autox/helmops/chartsource"
	"github.com/autox-dev/autox/internal/leader"
	"github.com/autox-dev/autox/triggers"
	"github.com/autox-dev/autox/watch"
)

type runFlags struct {
	clusterFlags
	config                              string
	resync, shutdownTimeout             time.Duration
	workers                             int
	cacheDir, repositoryConfig          string
	registryConfig                      string
	indexRefresh                        time.Duration
	leaderElect                         bool
	leaderElectID                       string
	leaseDuration, renewDeadline        time.Duration
	retryPeriod                         time.Duration
	httpAddr, logLevel, logFormat       string
	configDebounce, configCheckInterval time.Duration
	valuesCoalesce                      time.Duration
}

func newRunCommand(version string) *cobra.Command {
	f := &runFlags{}
	cmd := &cobra.Command{
		Use:   "run --config FILE",
		Short: "Keep the releases of the config file in line with their trigger objects",
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := bindEnv(cmd.Flags()); err != nil {
				return err
			}
			return run(cmd, f, version)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&f.config, "config", "", "path of the config file (mount the whole ConfigMap as a directory, not with subPath)")
	fs.DurationVar(&f.configDebounce, "config-debounce", time.Second, "quiet time after a config file event before it is reloaded")
	fs.DurationVar(&f.configCheckInterval, "config-check-interval", 30*time.Second, "period of the config file check that backs up file events")
	f.clusterFlags.register(fs)
	fs.DurationVar(&f.resync, "resync", time.Minute, "period of the pass that reconciles every spec")
	fs.IntVar(&f.workers, "workers", 16, "specs reconciled in parallel (each runs up to 4 of its release specs at once); see the README on sizing it")
	fs.DurationVar(&f.valuesCoalesce, "values-coalesce", 2*time.Second, "how long a change of a valuesFrom Secret or ConfigMap waits before its releases are reconciled, so that sources changed together make one upgrade")
	fs.DurationVar(&f.shutdownTimeout, "shutdown-timeout", 30*time.Second, "how long a stop waits for running Helm operations")
	fs.StringVar(&f.cacheDir, "cache-dir", defaultCacheDir(), "chart cache directory")
	fs.StringVar(&f.repositoryConfig, "repository-config", "", "Helm repositories.yaml with chart repository credentials")
	fs.StringVar(&f.registryConfig, "registry-config", "", "docker config.json with OCI registry credentials")
	fs.DurationVar(&f.indexRefresh, "chart-index-refresh", 10*time.Minute, "how long a fetched repository index or resolved OCI tag is trusted before it is fetched again")
	fs.BoolVar(&f.leaderElect, "leader-elect", true, "elect one writer among replicas with a Lease")
	fs.StringVar(&f.leaderElectID, "leader-election-id", "", "name of the leader election Lease (default: the --instance name)")
	fs.DurationVar(&f.leaseDuration, "leader-election-lease-duration", 15*time.Second, "how long a standby waits after the leader's last renewal before taking over")
	fs.DurationVar(&f.renewDeadline, "leader-election-renew-deadline", 10*time.Second, "how long the leader tries to renew before it gives up leading")
	fs.DurationVar(&f.retryPeriod, "leader-election-retry-period", 2*time.Second, "period of acquire and renew attempts")
	fs.StringVar(&f.httpAddr, "http-addr", ":8080", "address serving /metrics, /healthz and /readyz (empty: off)")
	fs.StringVar(&f.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	fs.StringVar(&f.logFormat, "log-format", "json", "log format: json or console")
	return cmd
}

func defaultCacheDir() string {
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "autox")
	}
	return filepath.Join(os.TempDir(), "autox-cache")
}

func defaultLeaseNamespace() string {
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns
	}
	return "default"
}

func run(cmd *cobra.Command, f *runFlags, version string) error {
	log, err := newLogger(cmd.ErrOrStderr(), f.logLevel, f.logFormat)
	if err != nil {
		return &exitError{1, err}
	}
	routeKlog(log)
	// Helm prints some warnings with the standard logger, values included.
	defer helmops.RouteStdLog(log)()
	if f.config == "" {
		return &exitError{1, errors.New("--config is required")}
	}
	if err := f.clusterFlags.check(); err != nil {
		return &exitError{1, err}
	}
	if f.leaderElectID == "" {
		f.leaderElectID = f.instance
	}
	initial, err := watch.Load(f.config)
	if err != nil {
		return configError(cmd, f.config, err)
	}
	cfg := initial.Config
	// Each component registers its own metrics on the one registry served.
	registry, err := newRegistry()
	if err != nil {
		return &exitError{1, err}
	}
	watchMetrics, err := watch.NewMetrics(registry)
	if err != nil {
		return &exitError{1, fmt.Errorf("cannot register metrics: %w", err)}
	}
	leaderMetrics, err := leader.NewMetrics(registry)
	if err != nil {
		return &exitError{1, fmt.Errorf("cannot register metrics: %w", err)}
	}
	loopMetrics, err := triggers.NewMetrics(registry)
	if err != nil {
		return &exitError{1, fmt.Errorf("cannot register metrics: %w", err)}
	}
	live := &liveController{state: triggers.NewConfigState(cfg), log: log}
	// Every replica, leader or not, watches and validates the config file:
	// a replica that becomes leader acts on the last valid config it saw.
	reloader := watch.NewReloader(watch.ReloaderOptions{Initial: initial, Apply: live.apply, Metrics: watchMetrics, Log: log})
	if watch.LooksLikeSubPath(f.config) {
		log.Warn().Str("config", f.config).Msg("the config file is a mount point of its own, as with a subPath volume mount: " +
			"the kubelet never updates those, so config changes will not reach autox; mount the whole ConfigMap as a directory")
	}
	base, err := f.clusterFlags.restConfig(version, log)
	if err != nil {
		return &exitError{1, err}
	}
	// The Lease is renewed outside the shared rate limit: a busy
	// convergence must not delay renewals into a lost leadership.
	leaseConfig := rest.CopyConfig(base)
	leaseConfig.RateLimiter, leaseConfig.QPS, leaseConfig.Burst = nil, -1, 0
	leaseClient, err := kubernetes.NewForConfig(leaseConfig)
	if err != nil {
		return &exitError{1, fmt.Errorf("cannot create Kubernetes client: %w", err)}
	}

	ctx, stop := signalContext(log)
	defer stop()

	var leading atomic.Bool
	// Keyring Secrets are read with autox's identity, like values sources.
	own, err := kubernetes.NewForConfig(base)
	if err != nil {
		return &exitError{1, fmt.Errorf("cannot create Kubernetes client: %w", err)}
	}
	charts, err := chartsource.NewChartCache(chartsource.ChartCacheOptions{
		Dir: f.cacheDir, RepositoryConfig: f.repositoryConfig, RegistryConfig: f.registryConfig,
		Refresh: f.indexRefresh, Timeout: f.helmTimeout, Keyrings: f.clusterFlags.keyrings(own), Log: log,
	})
	if err != nil {
		return &exitError{1, err}
	}
	w, err := watch.New(watch.Options{
		Path: f.config, Debounce: f.configDebounce, CheckInterval: f.configCheckInterval,
		OnChange: func() { reloader.Check(ctx) }, Metrics: watchMetrics, Log: log,
	})
	if err != nil {
		return &exitError{1, err}
	}

	if f.httpAddr != "" {
		srv, err := serveHTTP(f.httpAddr, registry, probes{
			// A standby is ready: it holds a valid config and takes over on its own.
			ready: func() error {
				if c := live.current(); leading.Load() && (c == nil || !c.Ready()) {
					return errors.New("start-up cleanup has not finished or informers have not synced")
				}
				return nil
			},
			// Only stuck loops fail liveness: a bad config or chart never does.
			healthy: func() error {
				now := time.Now()
				if c := live.current(); c != nil {
					if err := c.Stuck(now); err != nil {
						return err
					}
				}
				return w.Stuck(now)
			},
		}, log)
		if err != nil {
			return &exitError{1, err}
		}
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = srv.Shutdown(sctx)
		}()
	}

	log.Info().Str("config", f.config).Int("specs", len(cfg.Specs)).Strs("namespaces", cfg.Namespaces).
		Str("instance", f.instance).Str("version", version).Str("defaultServiceAccount", f.defaultServiceAccount).Msg("autox starting")
	// Watch returns only when ctx ends: without fsnotify it goes on with
	// the periodic check alone.
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		_ = w.Watch(ctx)
	}()
	defer func() {
		stop()
		<-watchDone
	}()

	// Failing specs keep their backoff from one leadership term to the next.
	backoff := triggers.NewBackoff(0, 0)
	// lead runs one leadership term: everything it builds writes through
	// the term's fenced clients, so nothing it started can write after the
	// term has ended.
	lead := func(ctx context.Context, term *leader.Term) error {
		deps, err := f.clusterFlags.clients(term.RESTConfig(base), log)
		if err != nil {
			return err
		}
		events := record.NewBroadcaster()
		defer events.Shutdown()
		events.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: deps.client.CoreV1().Events("")})
		// The term's reads of release records go through an index of their
		// metadata, fed by the term's own watch (started and stopped by Run).
		records := deps.helm.NewRecordIndex()
		ctrl := live.attach(func(state *triggers.ConfigState) *triggers.Controller {
			// The record of managed namespaces is written through the
			// term's fence too, with or without leader election.
			managed := triggers.NewManagedSet(triggers.ManagedSetOptions{Client: deps.client.CoreV1(),
				Namespace: f.leaderElectionNamespace, Instance: f.instance, State: state, Log: log})
			rec := deps.reconciler(state, charts, f.helmTimeout, loopMetrics,
				events.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "autox"}), managed, log)
			return triggers.NewController(triggers.Options{
				Reconciler: rec, Inventory: deps.inv, Metadata: deps.meta, Records: records, Workers: f.workers, Resync: f.resync,
				ShutdownTimeout: f.shutdownTimeout, Metrics: loopMetrics, RequestCount: apiRequests.Load, Log: log,
				Backoff: backoff, Fenced: term.Done(), ValuesCoalesce: f.valuesCoalesce,
			})
		})
		defer live.detach()
		// Catch up with a file changed since the last check.
		reloader.Check(ctx)
		return ctrl.Run(ctx)
	}

	electionOpts := leader.Options{
		Client: leaseClient, Namespace: f.leaderElectionNamespace, Name: f.leaderElectID,
		LeaseDuration: f.leaseDuration, RenewDeadline: f.renewDeadline, RetryPeriod: f.retryPeriod,
		OnLeading: leading.Store, Metrics: leaderMetrics, Log: log,
	}
	var runErr error
	if f.leaderElect {
		runErr = leader.Run(ctx, electionOpts, lead)
	} else {
		runErr = leader.RunAlone(ctx, electionOpts, lead)
	}
	if runErr != nil {
		return &exitError{1, runErr}
	}
	log.Info().Msg("autox stopped")
	return nil
}

// liveController is the controller of the current leadership term, if any,
// and the config state every term shares. Config reloads go through it, so a
// reload is applied by the running controller, or kept for the next term.
type liveController struct {
	state *triggers.ConfigState
	log   zerolog.Logger

	mu   sync.Mutex
	ctrl *triggers.Controller
}

// apply is the reloader's callback for a new valid config.
func (l *liveController) apply(ctx context.Context, cfg *config.Config) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ctrl == nil {
		l.state.Apply(cfg)
		l.log.Info().Int("specs", len(cfg.Specs)).Msg("config kept for when this process leads")
		return
	}
	ch := l.ctrl.ApplyConfig(ctx, cfg)
	l.log.Info().Strs("removedSpecs", ch.RemovedSpecs).Strs("addedSpecs", ch.AddedSpecs).
		Strs("changedSpecs", ch.ChangedSpecs).Int("removedReleaseSpecs", len(ch.RemovedReleaseSpecs)).Msg("config changes")
}

// attach builds the term's controller; no reload can slip in between the
// config it starts from and its registration.
func (l *liveController) attach(build func(*triggers.ConfigState) *triggers.Controller) *triggers.Controller {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ctrl = build(l.state)
	return l.ctrl
}

func (l *liveController) detach() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ctrl = nil
}

func (l *liveController) current() *triggers.Controller {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ctrl
}

// signalContext is cancelled by the first SIGINT or SIGTERM; a second one
// exits at once.
func signalContext(log zerolog.Logger) (context.Context, func()) {
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		s, ok := <-ch
		if !ok {
			return
		}
		log.Info().Str("signal", s.String()).Msg("stopping; a second signal exits at once")
		cancel()
		if _, ok := <-ch; ok {
			os.Exit(1)
		}
	}()
	var once sync.Once
	return ctx, func() {
		once.Do(func() {
			signal.Stop(ch)
			close(ch)
			cancel()
		})
	}
}
