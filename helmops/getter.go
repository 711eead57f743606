package helmops

import (
	"sync"
	"time"

	chartcommon "helm.sh/helm/v4/pkg/chart/common"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// sharedDiscovery is the discovery client, REST mapper and capabilities
// every Helm action shares, those of the service account views of a Manager
// included, so that a pass over many releases asks the API server for its
// resource list once rather than once per operation, and so that what one
// operation learns (a CRD it created) every later one knows.
type sharedDiscovery struct {
	config *rest.Config
	once   sync.Once
	err    error
	disc   discovery.CachedDiscoveryInterface
	mapper meta.RESTMapper

	capsMu sync.Mutex
	caps   *chartcommon.Capabilities
	capsAt time.Time
}

func (s *sharedDiscovery) init() error {
	s.once.Do(func() {
		dc, err := discovery.NewDiscoveryClientForConfig(s.config)
		if err != nil {
			s.err = err
			return
		}
		s.disc = memory.NewMemCacheClient(dc)
		s.mapper = restmapper.NewShortcutExpander(restmapper.NewDeferredDiscoveryRESTMapper(s.disc), s.disc, nil)
	})
	return s.err
}

// restGetter is the genericclioptions.RESTClientGetter Helm's action package
// wants, bound to one namespace: Helm's clients are built from config (the
// Manager's: autox's one rest.Config, or a copy impersonating a service
// account, see identity.go), its discovery and REST mapping are shared.
type restGetter struct {
	shared    *sharedDiscovery
	config    *rest.Config
	namespace string
}

var _ genericclioptions.RESTClientGetter = (*restGetter)(nil)

func (g *restGetter) ToRESTConfig() (*rest.Config, error) {
	return rest.CopyConfig(g.config), nil
}

func (g *restGetter) ToDiscoveryClient() (discovery.CachedDiscoveryInterface, error) {
	if err := g.shared.init(); err != nil {
		return nil, err
	}
	return g.shared.disc, nil
}

func (g *restGetter) ToRESTMapper() (meta.RESTMapper, error) {
	if err := g.shared.init(); err != nil {
		return nil, err
	}
	return g.shared.mapper, nil
}

// ToRawKubeConfigLoader only serves the namespace: Helm asks it which namespace
// objects without one go to.
func (g *restGetter) ToRawKubeConfigLoader() clientcmd.ClientConfig {
	return namespaceOnly{namespace: g.namespace, config: g.config}
}

type namespaceOnly struct {
	namespace string
	config    *rest.Config
}

func (n namespaceOnly) RawConfig() (clientcmdapi.Config, error) { return clientcmdapi.Config{}, nil }
func (n namespaceOnly) ClientConfig() (*rest.Config, error)     { return rest.CopyConfig(n.config), nil }
func (n namespaceOnly) Namespace() (string, bool, error)        { return n.namespace, true, nil }
func (n namespaceOnly) ConfigAccess() clientcmd.ConfigAccess {
	return clientcmd.NewDefaultClientConfigLoadingRules()
}
