package triggers

import (
	"context"
	"net/http"
	"sync"
	"testing"

	"github.com/rs/zerolog"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/internal/testenv"
	"github.com/autox-dev/autox/triggers/observe"
)

// TestInformersListThenWatch checks on the wire that autox's informers list,
// then watch, and never open client-go's watch-list stream (a watch with
// sendInitialEvents=true): while the API server refuses connections, the
// reflector in that mode backs off for up to a minute without heeding the
// informer's stop, and a leadership term's end (then the next campaign) or a
// SIGTERM waited that long for the informers. TestAPIServerOutage showed it:
// the Lease was lost 8-10s after the term had ended.
func TestInformersListThenWatch(t *testing.T) {
	ns := cluster.Namespace(t)
	cluster.CreateDeployment(t, ns, "t", nil)
	proxy, err := cluster.NewProxy()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	kubeconfig, err := cluster.ProxyKubeconfig(proxy)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	mc, err := metadata.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	// The proxy fails no request here: its match only records what the
	// informer asks for, and everything goes on to the API server.
	var (
		mu             sync.Mutex
		lists, streams int
		asked          []string
	)
	proxy.FailMatching(http.StatusServiceUnavailable, func(r *http.Request) bool {
		if r.URL.Path == "/apis/apps/v1/namespaces/"+ns+"/deployments" {
			q := r.URL.Query()
			mu.Lock()
			asked = append(asked, r.URL.RawQuery)
			if q.Get("watch") == "" {
				lists++
			}
			if q.Get("sendInitialEvents") == "true" {
				streams++
			}
			mu.Unlock()
		}
		return false
	})

	key := observe.ListKey{GVR: schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, Namespace: ns}
	set := newInformerSet(mc, func(*config.Config) []observe.ListKey { return []observe.ListKey{key} },
		func(observe.ListKey, string, string) {}, zerolog.Nop())
	set.sync(context.Background(), &config.Config{})
	defer set.stopAll()
	testenv.Eventually(t, patience, "the informer synced", func() (bool, error) { return set.hasSynced(), nil })
	testenv.Eventually(t, patience, "the informer watching", func() (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		return len(asked) > lists, nil
	})

	mu.Lock()
	defer mu.Unlock()
	if lists == 0 {
		t.Errorf("the informer never listed; it asked %q", asked)
	}
	if streams > 0 {
		t.Errorf("the informer opened %d watch-list streams (sendInitialEvents=true), whose retry backoff ignores the informer's stop; it asked %q", streams, asked)
	}
}
