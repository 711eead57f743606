package cli

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"

	"github.com/autox-dev/autox/helmops"
	"github.com/autox-dev/autox/helmops/chartsource"
	"github.com/autox-dev/autox/internal/eventsink"
	"github.com/autox-dev/autox/internal/leader"
	"github.com/autox-dev/autox/internal/shard"
	"github.com/autox-dev/autox/triggers"
	"github.com/autox-dev/autox/triggers/driftwatch"
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
	pprofAddr                           string
	memoryLimit                         string
	configDebounce, configCheckInterval time.Duration
	valuesCoalesce                      time.Duration
	driftFlags
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
	f.driftFlags.register(fs)
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
	fs.StringVar(&f.pprofAddr, "pprof-addr", "", "address serving Go's profiles under /debug/pprof/, e.g. 127.0.0.1:6060 (empty: off)")
	fs.StringVar(&f.memoryLimit, "memory-limit", defaultMemoryLimit, "soft memory limit of the Go runtime when the container has none (with a container limit: 90 % of it); 0 for none; GOMEMLIMIT in the environment wins")
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

// run is `autox run`: it wires the parts below in order — the config and
// its watch, the metrics, the clients, the HTTP probes — and then leads, or
// waits to, until a signal stops it. Every replica, leader or not, watches
// and validates the config file: a replica that becomes leader acts on the
// last valid config it saw.
func run(cmd *cobra.Command, f *runFlags, version string) error {
	log, err := newLogger(cmd.ErrOrStderr(), f.logLevel, f.logFormat)
	if err != nil {
		return &exitError{1, err}
	}
	routeKlog(log)
	// Helm prints some warnings with the standard logger, values included.
	defer helmops.RouteStdLog(log)()
	if err := f.check(); err != nil {
		return &exitError{1, err}
	}
	if err := setMemoryLimit(log, f.memoryLimit); err != nil {
		return &exitError{1, err}
	}
	initial, err := watch.Load(f.config)
	if err != nil {
		return configError(cmd, f.config, err)
	}
	r := &runner{f: f, version: version, log: log, live: &liveController{state: triggers.NewConfigState(initial.Config), log: log, sharded: f.shards > 1},
		// Failing specs keep their backoff from one leadership term to the next.
		backoff: triggers.NewBackoff(0, 0), events: eventsink.NewBudget(eventsink.Options{})}
	if err := r.registerMetrics(); err != nil {
		return &exitError{1, err}
	}
	r.reloader = watch.NewReloader(watch.ReloaderOptions{Initial: initial, Reconfigure: r.live.reconfigure, Metrics: r.metrics.watch, Log: log})
	if watch.LooksLikeSubPath(f.config) {
		log.Warn().Str("config", f.config).Msg("the config file is a mount point of its own, as with a subPath volume mount: " +
			"the kubelet never updates those, so config changes will not reach autox; mount the whole ConfigMap as a directory")
	}
	leaseClient, err := r.connect()
	if err != nil {
		return &exitError{1, err}
	}
	ctx, stop := signalContext(log)
	defer stop()
	w, err := watch.New(watch.Options{
		Path: f.config, Debounce: f.configDebounce, CheckInterval: f.configCheckInterval,
		OnChange: func() { r.reloader.Check(ctx) }, Metrics: r.metrics.watch, Log: log,
	})
	if err != nil {
		return &exitError{1, err}
	}
	shutdown, err := r.serve(w)
	if err != nil {
		return &exitError{1, err}
	}
	defer shutdown()

	cfg := initial.Config
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
	if err := r.elect(ctx, leaseClient); err != nil {
		return &exitError{1, err}
	}
	log.Info().Msg("autox stopped")
	return nil
}

// check validates the flags of run before anything is read or connected.
func (f *runFlags) check() error {
	if f.config == "" {
		return errors.New("--config is required")
	}
	if err := f.clusterFlags.check(); err != nil {
		return err
	}
	if f.leaderElectID == "" {
		f.leaderElectID = f.instance
	}
	if f.shards > 1 && !f.leaderElect {
		return errors.New("--shards above 1 needs --leader-elect: each shard is held through its own Lease")
	}
	return nil
}

// runner is what run wires, for the parts that use it.
type runner struct {
	f       *runFlags
	version string
	log     zerolog.Logger
	// live is the controller of the current term and the config state
	// every term shares; reloader puts reloaded configs in force through it.
	live     *liveController
	reloader *watch.Reloader
	metrics  runMetrics
	// base is the REST config every client is built from; charts the chart
	// cache every term shares; backoff the retry delays of failing specs.
	base    *rest.Config
	charts  *chartsource.ChartCache
	backoff *triggers.Backoff
	// events is the budget of every term's Event sink: with --shards, the
	// terms of the shards this replica holds spend it together.
	events *eventsink.Budget
	// identity names this process in the Leases and in the user agent of
	// its API requests: the audit log of a cluster with several replicas
	// tells which one made each write.
	identity string
	leading  atomic.Bool
	// shared are the replica's watches and record index, which the
	// controllers of the shards it holds share (--shards above 1 only).
	shared *sharedWatches
}

// runMetrics are the metrics each component registers on the one
// registry served.
type runMetrics struct {
	registry *prometheus.Registry
	watch    *watch.Metrics
	leader   *leader.Metrics
	loop     *triggers.Metrics
	events   *eventsink.Metrics
	drift    *driftwatch.Metrics
}

func (r *runner) registerMetrics() error {
	registry, err := newRegistry()
	if err != nil {
		return err
	}
	m := runMetrics{registry: registry}
	if m.watch, err = watch.NewMetrics(registry); err != nil {
		return fmt.Errorf("cannot register metrics: %w", err)
	}
	if m.leader, err = leader.NewMetrics(registry); err != nil {
		return fmt.Errorf("cannot register metrics: %w", err)
	}
	newLoopMetrics := triggers.NewMetrics
	if shard.Count(r.f.shards).Sharded() {
		newLoopMetrics = triggers.NewShardMetrics
	}
	if m.loop, err = newLoopMetrics(registry); err != nil {
		return fmt.Errorf("cannot register metrics: %w", err)
	}
	if m.events, err = eventsink.NewMetrics(registry); err != nil {
		return fmt.Errorf("cannot register metrics: %w", err)
	}
	if m.drift, err = driftwatch.NewMetrics(registry); err != nil {
		return fmt.Errorf("cannot register metrics: %w", err)
	}
	r.metrics = m
	return nil
}

// connect builds what talks to the cluster outside a term: the REST config
// (each term builds its fenced clients from it), the chart cache (its
// keyring Secrets are read with autox's identity, like values sources), and
// the Lease's client, which it returns.
func (r *runner) connect() (kubernetes.Interface, error) {
	f := r.f
	id, err := leader.NewIdentity()
	if err != nil {
		return nil, err
	}
	r.identity = id
	base, err := f.clusterFlags.restConfig(userAgent(r.version, id), r.log)
	if err != nil {
		return nil, err
	}
	r.base = base
	// The Lease is renewed outside the shared rate limit: a busy
	// convergence must not delay renewals into a lost leadership.
	leaseConfig := rest.CopyConfig(base)
	leaseConfig.RateLimiter, leaseConfig.QPS, leaseConfig.Burst = nil, -1, 0
	leaseClient, err := kubernetes.NewForConfig(leaseConfig)
	if err != nil {
		return nil, fmt.Errorf("cannot create Kubernetes client: %w", err)
	}
	own, err := kubernetes.NewForConfig(base)
	if err != nil {
		return nil, fmt.Errorf("cannot create Kubernetes client: %w", err)
	}
	r.charts, err = chartsource.NewChartCache(chartsource.ChartCacheOptions{
		Dir: f.cacheDir, RepositoryConfig: f.repositoryConfig, RegistryConfig: f.registryConfig,
		Refresh: f.indexRefresh, Timeout: f.helmTimeout, Keyrings: f.clusterFlags.keyrings(own), Log: r.log,
	})
	return leaseClient, err
}

// serve starts /metrics, /healthz and /readyz (none with --http-addr ""),
// and the profiles with --pprof-addr, and returns what shuts them down.
func (r *runner) serve(w *watch.Watcher) (shutdown func(), err error) {
	var servers []*http.Server
	shutdown = func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		for _, srv := range servers {
			_ = srv.Shutdown(sctx)
		}
	}
	if r.f.pprofAddr != "" {
		srv, err := servePprof(r.f.pprofAddr, r.log)
		if err != nil {
			return nil, err
		}
		servers = append(servers, srv)
	}
	if r.f.httpAddr == "" {
		return shutdown, nil
	}
	srv, err := serveHTTP(r.f.httpAddr, r.metrics.registry, probes{
		// A standby is ready: it holds a valid config and takes over on its own.
		// With shards, a replica is ready as soon as it runs, holding
		// shards or not: the shards move between replicas on their own.
		ready: func() error {
			if r.live.sharded {
				return nil
			}
			if c := r.live.current(); r.leading.Load() && (c == nil || !c.Ready()) {
				return errors.New("start-up cleanup has not finished or informers have not synced")
			}
			return nil
		},
		// Only stuck loops fail liveness: a bad config or chart never does.
		healthy: func() error {
			now := time.Now()
			for _, c := range r.live.all() {
				if err := c.Stuck(now); err != nil {
					return err
				}
			}
			return w.Stuck(now)
		},
	}, r.log)
	if err != nil {
		shutdown()
		return nil, err
	}
	servers = append(servers, srv)
	return shutdown, nil
}

// elect runs leadership terms (lead) until ctx ends: with leader election,
// those this replica wins; without, one term.
func (r *runner) elect(ctx context.Context, leaseClient kubernetes.Interface) error {
	f := r.f
	opts := leader.Options{
		Client: leaseClient, Namespace: f.leaderElectionNamespace, Name: f.leaderElectID,
		LeaseDuration: f.leaseDuration, RenewDeadline: f.renewDeadline, RetryPeriod: f.retryPeriod,
		OnLeading: r.leading.Store, Metrics: r.metrics.leader, Log: r.log, Identity: r.identity,
	}
	if n := shard.Count(f.shards); n.Sharded() {
		shared, err := r.newSharedWatches(ctx)
		if err != nil {
			return err
		}
		defer shared.watches.Stop()
		r.shared = shared
		return leader.RunShards(ctx, opts, n, nil, r.leadShard)
	}
	if f.leaderElect {
		return leader.Run(ctx, opts, r.lead)
	}
	return leader.RunAlone(ctx, opts, r.lead)
}

// lead runs one leadership term: everything it builds writes through the
// term's fenced clients, so nothing it started can write after the term
// has ended.
func (r *runner) lead(ctx context.Context, term *leader.Term) error {
	return r.leadFor(ctx, nil, term)
}

// leadShard runs one term of one shard: a controller that reconciles only
// the shard's keys and sees only its releases, writing through the shard
// term's fence.
func (r *runner) leadShard(ctx context.Context, index int, term *leader.Term) error {
	n := shard.Count(r.f.shards)
	defer r.metrics.leader.ShardReleased(index)
	return r.leadFor(ctx, &triggers.Shard{Count: n, Index: index,
		Releases: func(k int) { r.metrics.leader.SetShardReleases(index, k) }}, term)
}

// leadFor runs one term: of everything (sh nil) or of one shard.
func (r *runner) leadFor(ctx context.Context, sh *triggers.Shard, term *leader.Term) error {
	f := r.f
	key := 0
	if sh != nil {
		key = sh.Index
	}
	deps, err := f.clusterFlags.clients(term.RESTConfig(r.base), r.log)
	if err != nil {
		return err
	}
	// Events go out through an asynchronous sink with a budget (eventsink):
	// the broadcaster still aggregates them, but never sends them one by
	// one behind the operations that recorded them. The sink stops after
	// the broadcaster (defers run last-in first-out), draining for 2s.
	sinkCtx, stopSink := context.WithCancel(context.Background())
	sink := eventsink.New(deps.client.CoreV1().Events(""), eventsink.Options{Budget: r.events, Metrics: r.metrics.events, Log: r.log})
	sinkDone := make(chan struct{})
	go func() {
		defer close(sinkDone)
		sink.Run(sinkCtx, 2*time.Second)
	}()
	defer func() {
		stopSink()
		<-sinkDone
	}()
	events := record.NewBroadcaster()
	defer events.Shutdown()
	events.StartRecordingToSink(sink)
	// The term's reads of release records go through an index of their
	// metadata, fed by the term's own watch (started and stopped by Run);
	// a shard term's, through the replica's, which its controller shares.
	var records triggers.RecordIndex
	var watches *triggers.Watches
	if r.shared != nil {
		deps.helm.UseRecordIndex(r.shared.records)
		if err := deps.helm.UseConflictReads(r.shared.conflicts); err != nil {
			return err
		}
		watches = r.shared.watches
	} else {
		records = deps.helm.NewRecordIndex()
	}
	loopMetrics := r.metrics.loop.ForShard(sh)
	ctrl := r.live.attach(key, func(state *triggers.ConfigState) *triggers.Controller {
		// The record of managed namespaces is written through the
		// term's fence too, with or without leader election.
		managed := triggers.NewManagedSet(triggers.ManagedSetOptions{Client: deps.client.CoreV1(),
			Namespace: f.leaderElectionNamespace, Instance: f.instance, State: state, Log: r.log})
		log := r.log
		if sh != nil {
			log = log.With().Int("shard", sh.Index).Logger()
		}
		opts := deps.reconciler(state, r.charts, log)
		opts.Helm = triggers.ShardReleases(opts.Helm, sh)
		opts.Metrics, opts.Managed = loopMetrics, managed
		opts.Events = events.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "autox"})
		return triggers.NewController(triggers.Options{
			Reconciler: triggers.NewReconciler(opts), Inventory: deps.inv, Metadata: deps.meta, Records: records, Workers: f.workers,
			Resync: f.resync, ShutdownTimeout: f.shutdownTimeout, Metrics: loopMetrics, RequestCount: apiRequests.Load, Log: log,
			Backoff: r.backoff, Fenced: term.Done(), ValuesCoalesce: f.valuesCoalesce, Shard: sh, Watches: watches,
		})
	})
	defer r.live.detach(key)
	defer r.runDrift(ctx, deps, ctrl, events, term)()
	// Catch up with a file changed since the last check.
	r.reloader.Check(ctx)
	return ctrl.Run(ctx)
}
