package cli

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/helmops"
	"github.com/autox-dev/autox/helmops/chartsource"
	"github.com/autox-dev/autox/internal/apistatus"
	"github.com/autox-dev/autox/internal/format"
	"github.com/autox-dev/autox/internal/shard"
	"github.com/autox-dev/autox/triggers"
	"github.com/autox-dev/autox/triggers/attempts"
	"github.com/autox-dev/autox/triggers/observe"
	"github.com/autox-dev/autox/triggers/plan"
)

// clusterFlags are the flags of every command that talks to the cluster.
type clusterFlags struct {
	kubeconfig, storageDriver string
	instance                  string
	helmTimeout               time.Duration
	maxHistory                int
	kubeAPIQPS                float32
	kubeAPIBurst              int
	// defaultServiceAccount is what releases that name no account run as.
	defaultServiceAccount string
	// chartKeyring is --chart-keyring, for chart.verify.
	chartKeyring string
	// listPageSize pages the LISTs of triggers, recordPageSize those of
	// release records (BENCHMARKS.md, issue 23: at 20,000 records in one
	// namespace one response raised the API server's peak memory by
	// 210–280 MiB, pages of 500 by 0–60 MiB, at the same latency; a
	// trigger LIST is a quiet pass's one request, kept whole by default).
	listPageSize   int64
	recordPageSize int64
	// leaderElectionNamespace holds the Lease and the record of the
	// namespaces the instance manages, which plan and list read too.
	leaderElectionNamespace string
	// shards is --shards: how many shards the work is split into.
	shards int
}

func (c *clusterFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&c.kubeconfig, "kubeconfig", "", "kubeconfig file (default: in-cluster, else $KUBECONFIG, else ~/.kube/config)")
	fs.StringVar(&c.storageDriver, "storage-driver", helmops.DriverSecret, "Helm release storage: secret or configmap")
	fs.StringVar(&c.instance, "instance", format.DefaultInstance, "name of this autox installation (a DNS-1123 label): it owns only the releases labelled with it, so several installations can share a namespace")
	fs.DurationVar(&c.helmTimeout, "helm-timeout", 5*time.Minute, "bound of one Helm operation; a pending release older than this plus 30s is unlocked")
	fs.IntVar(&c.maxHistory, "max-history", 10, "revisions kept per release")
	fs.Float32Var(&c.kubeAPIQPS, "kube-api-qps", -1, "client-side limit of the requests per second autox sends to the API server, Helm's included; -1: no client-side limit (the API server's priority and fairness protects it, and --workers bounds the requests in flight)")
	fs.IntVar(&c.kubeAPIBurst, "kube-api-burst", 300, "requests autox may send at once above --kube-api-qps, when that is positive")
	fs.StringVar(&c.chartKeyring, "chart-keyring", "", "OpenPGP public keyring file (as `gpg --export` writes it) that chart.verify checks provenance with, for charts whose release spec names no chart.keyring Secret")
	fs.StringVar(&c.defaultServiceAccount, "default-service-account", "", "service account, in each release's namespace, that the Helm operations of release specs without serviceAccountName run as (a lockdown for multi-team clusters); empty: autox's own identity")
	fs.Int64Var(&c.listPageSize, "list-page-size", 0, "objects per page of a pass's LIST of the triggers of one resource and namespace (client-go's pager); 0: one response (see BENCHMARKS.md)")
	fs.Int64Var(&c.recordPageSize, "record-list-page-size", 500, "objects per page of the LISTs of every release record of a namespace (the record index's, at start and when its watch is lost, and their live fallback); 0: one response (see BENCHMARKS.md)")
	fs.StringVar(&c.leaderElectionNamespace, "leader-election-namespace", defaultLeaseNamespace(),
		"namespace of the leader election Lease and of the ConfigMap "+triggers.ManagedSetName("<instance>")+" that records the namespaces the instance has managed")
	fs.IntVar(&c.shards, "shards", 1, "how many shards the specs and selector objects are split into, each held by one replica through its own Lease; 1: one leader does everything (see the README on choosing it)")
}

// clusterDeps are the clients built from clusterFlags.
type clusterDeps struct {
	rest   *rest.Config
	helm   *helmops.Manager
	inv    *helmops.Inventory
	meta   metadata.Interface
	mapper meta.RESTMapper
	client kubernetes.Interface
	// storageDriver is where Helm keeps release records.
	storageDriver string
	// defaultServiceAccount is --default-service-account.
	defaultServiceAccount string
	// pageSize is --list-page-size.
	pageSize int64
	// defaults are the policies of release specs that set none.
	defaults config.PolicyDefaults
	// home is autox's own namespace (--leader-election-namespace): the
	// remediation records.
	home string
}

// connect builds the clients of a command that talks to the cluster.
func (c *clusterFlags) connect(version string, log zerolog.Logger) (*clusterDeps, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	rc, err := c.restConfig(userAgent(version, ""), log)
	if err != nil {
		return nil, err
	}
	return c.clients(rc, log)
}

// check validates the flags before anything connects.
func (c *clusterFlags) check() error {
	if errs := validation.IsDNS1123Label(c.instance); len(errs) > 0 {
		return fmt.Errorf("invalid --instance %q: %s", c.instance, strings.Join(errs, "; "))
	}
	if c.defaultServiceAccount != "" {
		if errs := validation.IsDNS1123Subdomain(c.defaultServiceAccount); len(errs) > 0 {
			return fmt.Errorf("invalid --default-service-account %q: %s", c.defaultServiceAccount, strings.Join(errs, "; "))
		}
	}
	if c.kubeAPIQPS > 0 && c.kubeAPIBurst < 1 {
		return fmt.Errorf("invalid --kube-api-burst %d: must be at least 1 when --kube-api-qps is positive", c.kubeAPIBurst)
	}
	if c.listPageSize < 0 {
		return fmt.Errorf("invalid --list-page-size %d: must be 0 (one response) or a page size", c.listPageSize)
	}
	if err := shard.Count(c.shards).Check(); err != nil {
		return err
	}
	if c.recordPageSize < 0 {
		return fmt.Errorf("invalid --record-list-page-size %d: must be 0 (one response) or a page size", c.recordPageSize)
	}
	return nil
}

// clients builds every client from rc, one of each, which helmops and
// triggers share: run builds them once per leadership term from the term's
// fenced config.
func (c *clusterFlags) clients(rc *rest.Config, log zerolog.Logger) (*clusterDeps, error) {
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("cannot create Kubernetes client: %w", err)
	}
	mc, err := metadata.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("cannot create metadata client: %w", err)
	}
	helm, err := helmops.New(helmops.Options{
		RESTConfig: rc, Clientset: cs, Metadata: mc,
		StorageDriver: c.storageDriver, Instance: c.instance, Timeout: c.helmTimeout, MaxHistory: c.maxHistory, ListPageSize: c.recordPageSize, Log: log,
	})
	if err != nil {
		return nil, err
	}
	inv, err := helm.NewInventory()
	if err != nil {
		return nil, err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("cannot create discovery client: %w", err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	return &clusterDeps{rest: rc, helm: helm, inv: inv, meta: mc, mapper: mapper, client: cs, storageDriver: c.storageDriver, pageSize: c.listPageSize,
		defaultServiceAccount: c.defaultServiceAccount, defaults: config.PolicyDefaults{Timeout: c.helmTimeout, MaxHistory: c.maxHistory},
		home: c.leaderElectionNamespace}, nil
}

// reconciler is what builds the one kind of Reconciler that run and plan
// share, so they cannot disagree about what to do: run adds its metrics,
// Events and the record of managed namespaces it keeps, plan the record as
// it read it.
func (d *clusterDeps) reconciler(state *triggers.ConfigState, charts chartsource.ChartSource, log zerolog.Logger) triggers.ReconcilerOptions {
	return triggers.ReconcilerOptions{
		Helm: d.helm, Charts: charts, Triggers: observe.TriggerReader{Client: d.meta, Mapper: d.mapper, PageSize: d.pageSize}, Inventory: d.inv,
		Sources:  d.sources(),
		Attempts: attempts.Store{Client: d.client, Instance: d.helm.Instance(), Home: d.home},
		State:    state, Defaults: d.defaults, Log: log, DefaultServiceAccount: d.defaultServiceAccount,
	}
}

// sources reads valuesFrom objects; Secrets only when release records are
// Secrets too.
func (d *clusterDeps) sources() observe.ValuesSources {
	var src observe.ValuesSources = observe.SourceReader{Client: d.client}
	if d.storageDriver == helmops.DriverConfigMap {
		src = observe.NoSecretSources{Sources: src}
	}
	return src
}

// keyrings are what chart.verify checks with: --chart-keyring, and
// chart.keyring Secrets read with client (autox's own identity).
func (c *clusterFlags) keyrings(client kubernetes.Interface) chartsource.Keyrings {
	return chartsource.Keyrings{File: c.chartKeyring, Secret: func(ctx context.Context, k config.Keyring) ([]byte, error) {
		s, err := client.CoreV1().Secrets(k.Namespace).Get(ctx, k.SecretName, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		data, ok := s.Data[k.Key]
		if !ok {
			return nil, fmt.Errorf("the Secret has no key %s", k.Key)
		}
		return data, nil
	}}
}

// restConfig follows DESIGN §6: --kubeconfig, else in-cluster, else
// $KUBECONFIG, else ~/.kube/config. version goes into the User-Agent. The
// API server's warnings are counted and logged without their text.
//
// A positive --kube-api-qps is one token bucket that every client built
// from the config shares (rest.CopyConfig keeps it): it bounds what the
// process sends, Helm's per-operation clients included, where a QPS field
// alone would give each client its own bucket. The default is no
// client-side limit, as controller-runtime and Flux (when the API server has
// priority and fairness, GA since Kubernetes 1.29) do: the server queues and
// sheds load per flow itself, and autox's requests in flight are bounded by
// its workers (each makes its requests one after another).
func (c *clusterFlags) restConfig(agent string, log zerolog.Logger) (*rest.Config, error) {
	var (
		cfg *rest.Config
		err error
	)
	if kubeconfig := c.kubeconfig; kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	} else if cfg, err = rest.InClusterConfig(); err != nil {
		rules := clientcmd.NewDefaultClientConfigLoadingRules()
		cfg, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, nil).ClientConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("cannot configure the Kubernetes client: %w", err)
	}
	cfg.QPS, cfg.Burst = c.kubeAPIQPS, c.kubeAPIBurst
	if c.kubeAPIQPS > 0 {
		cfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(c.kubeAPIQPS, c.kubeAPIBurst)
	} else {
		cfg.QPS = -1 // 0 would be client-go's default of 5 per second
	}
	// Every client of the process, Helm's kube client and storage drivers
	// included, is built from this config: none of them may take a 404
	// that a proxy or gateway answered for the API server's NotFound.
	cfg.Wrap(apistatus.Transport)
	cfg.Wrap(countRequests)
	handleWarnings(cfg, log)
	cfg.UserAgent = agent
	return cfg, nil
}

// userAgent is the user agent of autox's API requests: "autox/<version>",
// and for run the process's identity (its Leases' holder identity) in
// parentheses, so that an audit log tells the replicas apart.
func userAgent(version, identity string) string {
	if identity == "" {
		return "autox/" + version
	}
	return "autox/" + version + " (" + identity + ")"
}

// rememberManaged puts the namespaces the instance has recorded into state,
// reading only (plan, list), so that what they show covers the releases left
// in a namespace the config dropped. The error says they may be incomplete.
// Run outside the cluster, the record's namespace defaults to "default"
// while autox itself runs in its pod's namespace: an absent record there is
// most likely the wrong place, and the warning says which flag to set.
//
// It returns the record as a plan decides with it: what run would record
// before its first reconcile of this config (ConfigState.Record: what the
// record holds, the config's namespaces, the dropped ones), so an install
// waits in the plan where it would in run: when the record cannot be read,
// in every namespace.
func (d *clusterDeps) rememberManaged(ctx context.Context, c *clusterFlags, state *triggers.ConfigState, log zerolog.Logger) (*plan.ManagedNamespaces, error) {
	name := c.leaderElectionNamespace + "/" + triggers.ManagedSetName(c.instance)
	recorded, found, err := triggers.ReadManagedSet(ctx, d.client.CoreV1(), c.leaderElectionNamespace, c.instance)
	if err == nil && !found && os.Getenv("POD_NAMESPACE") == "" {
		log.Warn().Str("configMap", name).
			Msg("no record of the namespaces this instance has managed here; releases in namespaces the config dropped are not shown. " +
				"Pass --leader-election-namespace with the namespace autox runs in (its Lease's namespace)")
	}
	if err != nil {
		return &plan.ManagedNamespaces{ConfigMap: name, Err: err}, err
	}
	state.Remember(recorded)
	return &plan.ManagedNamespaces{ConfigMap: name, Namespaces: state.Record(recorded)}, nil
}
