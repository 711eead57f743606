// Command autox runs Helm releases for Kubernetes objects, as declared in one
// mounted YAML file. main only wires flags to the packages that do the work:
// config (the file), helmops (Helm), triggers (the control loop).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/record"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/helmops"
	"github.com/autox-dev/autox/internal/metrics"
	"github.com/autox-dev/autox/triggers"
	"github.com/autox-dev/autox/watch"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// exitError carries an exit code out of a command.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }

func main() {
	cmd := newRootCommand(os.Stdout, os.Stderr)
	if err := cmd.Execute(); err != nil {
		code := 1
		var ee *exitError
		if errors.As(err, &ee) {
			code = ee.code
		}
		fmt.Fprintln(os.Stderr, "autox:", err)
		os.Exit(code)
	}
}

func newRootCommand(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "autox",
		Short:         "Run Helm releases for Kubernetes objects, declared in one YAML file",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(newRunCommand(), newValidateCommand(), newPlanCommand(), newListCommand(), newVersionCommand())
	return root
}

// bindEnv lets every flag be set as AUTOX_<FLAG> (dashes become underscores);
// a flag given on the command line wins.
func bindEnv(fs *pflag.FlagSet) error {
	var errs []error
	fs.VisitAll(func(f *pflag.Flag) {
		env := "AUTOX_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v, ok := os.LookupEnv(env); ok && !f.Changed {
			if err := fs.Set(f.Name, v); err != nil {
				errs = append(errs, fmt.Errorf("invalid %s=%q: %w", env, v, err))
			}
		}
	})
	return errors.Join(errs...)
}

// loadConfig loads the config file; an invalid one is an exit 1 with one line
// per problem on stderr.
func loadConfig(cmd *cobra.Command, path string) (*config.Config, error) {
	if path == "" {
		return nil, &exitError{1, errors.New("--config is required")}
	}
	cfg, err := config.Load(path)
	if err != nil {
		return nil, configError(cmd, path, err)
	}
	return cfg, nil
}

// configError prints a config's problems one per line on stderr and returns
// the exit-1 error.
func configError(cmd *cobra.Command, path string, err error) error {
	var cerr *config.Error
	if errors.As(err, &cerr) {
		for _, l := range cerr.Lines() {
			fmt.Fprintf(cmd.ErrOrStderr(), "%s: %s\n", path, l)
		}
		return &exitError{1, fmt.Errorf("%s is not valid: %d problem(s)", path, len(cerr.Problems))}
	}
	return &exitError{1, err}
}

func newValidateCommand() *cobra.Command {
	var path string
	cmd := &cobra.Command{
		Use:   "validate --config FILE",
		Short: "Check a config file without a cluster; exit 1 with one line per problem",
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := bindEnv(cmd.Flags()); err != nil {
				return err
			}
			cfg, err := loadConfig(cmd, path)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s is valid: %d spec(s)\n", path, len(cfg.Specs))
			return nil
		},
	}
	cmd.Flags().StringVar(&path, "config", "", "path of the config file")
	return cmd
}

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the autox version",
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintln(cmd.OutOrStdout(), "autox", version)
		},
	}
}

// clusterFlags are the flags of every command that talks to the cluster.
type clusterFlags struct {
	kubeconfig, storageDriver string
	helmTimeout               time.Duration
	maxHistory                int
}

func (c *clusterFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&c.kubeconfig, "kubeconfig", "", "kubeconfig file (default: in-cluster, else $KUBECONFIG, else ~/.kube/config)")
	fs.StringVar(&c.storageDriver, "storage-driver", helmops.DriverSecret, "Helm release storage: secret or configmap")
	fs.DurationVar(&c.helmTimeout, "helm-timeout", 5*time.Minute, "bound of one Helm operation; a pending release older than this plus 30s is unlocked")
	fs.IntVar(&c.maxHistory, "max-history", 10, "revisions kept per release")
}

// clusterDeps are the clients built from clusterFlags.
type clusterDeps struct {
	rest   *rest.Config
	helm   *helmops.Manager
	inv    *helmops.Inventory
	meta   metadata.Interface
	mapper meta.RESTMapper
	client kubernetes.Interface
}

func (c *clusterFlags) connect(log zerolog.Logger) (*clusterDeps, error) {
	rc, err := restConfig(c.kubeconfig)
	if err != nil {
		return nil, err
	}
	helm, err := helmops.New(helmops.Options{
		RESTConfig: rc, StorageDriver: c.storageDriver, Timeout: c.helmTimeout, MaxHistory: c.maxHistory, Log: log,
	})
	if err != nil {
		return nil, err
	}
	inv, err := helm.NewInventory()
	if err != nil {
		return nil, err
	}
	mc, err := metadata.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("cannot create metadata client: %w", err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("cannot create discovery client: %w", err)
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("cannot create Kubernetes client: %w", err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	return &clusterDeps{rest: rc, helm: helm, inv: inv, meta: mc, mapper: mapper, client: cs}, nil
}

// reconciler builds the one Reconciler that run, plan and list share, so they
// cannot disagree about what to do.
func (d *clusterDeps) reconciler(cfg *config.Config, charts helmops.ChartSource, helmTimeout time.Duration, log zerolog.Logger) *triggers.Reconciler {
	return &triggers.Reconciler{
		Helm: d.helm, Charts: charts, Triggers: triggers.TriggerReader{Client: d.meta, Mapper: d.mapper},
		Config: func() *config.Config { return cfg }, StaleAfter: helmTimeout + 30*time.Second, Now: time.Now, Log: log,
	}
}

type runFlags struct {
	clusterFlags
	config                                 string
	resync, shutdownTimeout                time.Duration
	workers                                int
	cacheDir, repositoryConfig             string
	registryConfig                         string
	indexRefresh                           time.Duration
	leaderElect                            bool
	leaderElectionNamespace, leaderElectID string
	leaseDuration, renewDeadline           time.Duration
	retryPeriod                            time.Duration
	httpAddr, logLevel, logFormat          string
	configDebounce, configCheckInterval    time.Duration
}

func newRunCommand() *cobra.Command {
	f := &runFlags{}
	cmd := &cobra.Command{
		Use:   "run --config FILE",
		Short: "Keep the releases of the config file in line with their trigger objects",
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := bindEnv(cmd.Flags()); err != nil {
				return err
			}
			return run(cmd, f)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&f.config, "config", "", "path of the config file (mount the whole ConfigMap as a directory, not with subPath)")
	fs.DurationVar(&f.configDebounce, "config-debounce", time.Second, "quiet time after a config file event before it is reloaded")
	fs.DurationVar(&f.configCheckInterval, "config-check-interval", 30*time.Second, "period of the config file check that backs up file events")
	f.clusterFlags.register(fs)
	fs.DurationVar(&f.resync, "resync", time.Minute, "period of the pass that reconciles every spec")
	fs.IntVar(&f.workers, "workers", 4, "specs reconciled in parallel")
	fs.DurationVar(&f.shutdownTimeout, "shutdown-timeout", 30*time.Second, "how long a stop waits for running Helm operations")
	fs.StringVar(&f.cacheDir, "cache-dir", defaultCacheDir(), "chart cache directory")
	fs.StringVar(&f.repositoryConfig, "repository-config", "", "Helm repositories.yaml with chart repository credentials")
	fs.StringVar(&f.registryConfig, "registry-config", "", "docker config.json with OCI registry credentials")
	fs.DurationVar(&f.indexRefresh, "chart-index-refresh", 10*time.Minute, "how long a fetched repository index or resolved OCI tag is trusted before it is fetched again")
	fs.BoolVar(&f.leaderElect, "leader-elect", true, "elect one writer among replicas with a Lease")
	fs.StringVar(&f.leaderElectionNamespace, "leader-election-namespace", defaultLeaseNamespace(), "namespace of the leader election Lease")
	fs.StringVar(&f.leaderElectID, "leader-election-id", "autox", "name of the leader election Lease")
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

func newLogger(w io.Writer, level, format string) (zerolog.Logger, error) {
	lvl, err := zerolog.ParseLevel(level)
	if err != nil {
		return zerolog.Nop(), fmt.Errorf("invalid --log-level %q: %w", level, err)
	}
	switch format {
	case "json":
	case "console":
		w = zerolog.ConsoleWriter{Out: w, TimeFormat: time.RFC3339}
	default:
		return zerolog.Nop(), fmt.Errorf("invalid --log-format %q: use json or console", format)
	}
	return zerolog.New(w).Level(lvl).With().Timestamp().Logger(), nil
}

// restConfig follows DESIGN §6: --kubeconfig, else in-cluster, else
// $KUBECONFIG, else ~/.kube/config.
func restConfig(kubeconfig string) (*rest.Config, error) {
	var (
		cfg *rest.Config
		err error
	)
	if kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	} else if cfg, err = rest.InClusterConfig(); err != nil {
		rules := clientcmd.NewDefaultClientConfigLoadingRules()
		cfg, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, nil).ClientConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("cannot configure the Kubernetes client: %w", err)
	}
	// client-go's default of 5 requests/s would make convergence of many
	// releases crawl; the API server's own priority and fairness protects it.
	cfg.QPS, cfg.Burst = 100, 200
	cfg.Wrap(countRequests)
	cfg.UserAgent = "autox/" + version
	return cfg, nil
}

func run(cmd *cobra.Command, f *runFlags) error {
	log, err := newLogger(cmd.ErrOrStderr(), f.logLevel, f.logFormat)
	if err != nil {
		return &exitError{1, err}
	}
	routeKlog(log)
	if f.config == "" {
		return &exitError{1, errors.New("--config is required")}
	}
	// The controller that applies reloaded configs is created below, once the
	// first config is known to be valid.
	var ctrl *triggers.Controller
	reloader, cfg, err := watch.NewReloader(f.config, func(ctx context.Context, c *config.Config) {
		ch := ctrl.ApplyConfig(ctx, c)
		log.Info().Strs("removedSpecs", ch.RemovedSpecs).Strs("addedSpecs", ch.AddedSpecs).
			Strs("changedSpecs", ch.ChangedSpecs).Int("removedReleaseSpecs", len(ch.RemovedReleaseSpecs)).Msg("config changes")
	}, log)
	if err != nil {
		return configError(cmd, f.config, err)
	}
	if watch.LooksLikeSubPath(f.config) {
		log.Warn().Str("config", f.config).Msg("the config file is a mount point of its own, as with a subPath volume mount: " +
			"the kubelet never updates those, so config changes will not reach autox; mount the whole ConfigMap as a directory")
	}
	deps, err := f.clusterFlags.connect(log)
	if err != nil {
		return &exitError{1, err}
	}

	ctx, stop := signalContext(log)
	defer stop()

	var leading atomic.Bool
	m := metrics.New(func() int { return ctrl.QueueLen() }, func() float64 { return float64(apiRequests.Load()) })
	m.ConfigLoaded(true, time.Now())
	reloader.OnOutcome = func(o watch.Outcome) {
		switch o {
		case watch.Applied:
			m.ConfigReloads.WithLabelValues(metrics.Success).Inc()
			m.ConfigLoaded(true, time.Now())
		case watch.Unchanged:
			m.ConfigLoaded(true, time.Now())
		case watch.Rejected:
			m.ConfigReloads.WithLabelValues(metrics.Error).Inc()
			m.ConfigLoaded(false, time.Now())
		}
	}
	events := record.NewBroadcaster()
	defer events.Shutdown()
	events.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: deps.client.CoreV1().Events("")})
	charts, err := helmops.NewChartCache(helmops.ChartCacheOptions{
		Dir: f.cacheDir, RepositoryConfig: f.repositoryConfig, RegistryConfig: f.registryConfig,
		Refresh: f.indexRefresh, Timeout: f.helmTimeout, Log: log,
	})
	if err != nil {
		return &exitError{1, err}
	}
	rec := deps.reconciler(cfg, charts, f.helmTimeout, log)
	rec.Metrics = m
	rec.Events = events.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "autox"})
	ctrl = triggers.NewController(cfg, triggers.Options{
		Reconciler: rec, Inventory: deps.inv, Metadata: deps.meta, Workers: f.workers, Resync: f.resync,
		ShutdownTimeout: f.shutdownTimeout, Metrics: m, RequestCount: apiRequests.Load, Log: log,
	})

	var watcher atomic.Pointer[watch.Watcher]
	if f.httpAddr != "" {
		srv, err := serveHTTP(f.httpAddr, m, probes{
			// A standby is ready: it holds a valid config and takes over on its own.
			ready: func() error {
				if leading.Load() && !ctrl.Ready() {
					return errors.New("start-up cleanup has not finished or informers have not synced")
				}
				return nil
			},
			// Only stuck loops fail liveness: a bad config or chart never does.
			healthy: func() error {
				now := time.Now()
				if err := ctrl.Stuck(now); err != nil {
					return err
				}
				if w := watcher.Load(); w != nil {
					return w.Stuck(now)
				}
				return nil
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
		Str("version", version).Msg("autox starting")
	// lead runs while this process is the one writer: it first catches up
	// with config changes made while it stood by, then watches the file.
	lead := func(ctx context.Context) error {
		reloader.Check(ctx)
		w, err := watch.New(watch.Options{
			Path: f.config, Debounce: f.configDebounce, CheckInterval: f.configCheckInterval,
			OnChange: func() { reloader.Check(ctx) }, Log: log,
		})
		if err != nil {
			return err
		}
		watcher.Store(w)
		watchCtx, stopWatch := context.WithCancel(ctx)
		watchDone := make(chan error, 1)
		go func() { watchDone <- w.Watch(watchCtx) }()
		runErr := ctrl.Run(ctx)
		stopWatch()
		if err := <-watchDone; err != nil {
			log.Error().Err(err).Msg("config watcher failed")
		}
		return runErr
	}

	var runErr error
	if f.leaderElect {
		runErr = triggers.RunAsLeader(ctx, triggers.LeaderOptions{
			Client: deps.client, Namespace: f.leaderElectionNamespace, Name: f.leaderElectID,
			LeaseDuration: f.leaseDuration, RenewDeadline: f.renewDeadline, RetryPeriod: f.retryPeriod,
			OnLeading: func(l bool) {
				leading.Store(l)
				m.Leader.Set(map[bool]float64{true: 1, false: 0}[l])
			},
			// Another process may already be writing: stop at once, and let
			// Kubernetes restart this one as a standby.
			OnLost: func() { os.Exit(1) },
			Log:    log,
		}, lead)
	} else {
		leading.Store(true)
		m.Leader.Set(1)
		runErr = lead(ctx)
	}
	if runErr != nil {
		return &exitError{1, runErr}
	}
	log.Info().Msg("autox stopped")
	return nil
}

// apiRequests counts the requests autox makes to the API server, Helm's
// included (every client is built from one rest.Config).
var apiRequests atomic.Int64

func countRequests(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		apiRequests.Add(1)
		return rt.RoundTrip(req)
	})
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

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

// probes are the checks behind /readyz and /healthz; nil error means pass.
type probes struct {
	ready, healthy func() error
}

// serveHTTP serves metrics and probes. Binding happens before returning so an
// address in use is a start-up error, not a silent log line.
func serveHTTP(addr string, m *metrics.Metrics, p probes, log zerolog.Logger) (*http.Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("cannot listen on --http-addr %s: %w", addr, err)
	}
	log.Info().Str("addr", ln.Addr().String()).Msg("serving /metrics, /healthz and /readyz")
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{}))
	probe := func(check func() error) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) {
			if err := check(); err != nil {
				http.Error(w, err.Error(), http.StatusServiceUnavailable)
				return
			}
			_, _ = io.WriteString(w, "ok\n")
		}
	}
	mux.HandleFunc("/healthz", probe(p.healthy))
	mux.HandleFunc("/readyz", probe(p.ready))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error().Err(err).Msg("http server stopped")
		}
	}()
	return srv, nil
}
