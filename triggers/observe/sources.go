package observe

import (
	"context"
	"errors"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/internal/apistatus"
	"github.com/autox-dev/autox/triggers/plan"
)

// ValuesSources reads the Secrets and ConfigMaps that valuesFrom entries
// name, live: like the trigger, the cluster is the truth at every reconcile.
// SourceReader is the one implementation.
type ValuesSources interface {
	// Get returns the object's content by key, found false for the API
	// server's NotFound naming the object (apistatus.NotFound). Any other
	// failure, a 404 from a proxy included, is an error: nothing is taken
	// for absent.
	Get(ctx context.Context, kind, namespace, name string) (found bool, data map[string]string, err error)
}

// SourceReader reads values sources with the typed client: their content
// is what is needed, a GET per object per reconcile is all it costs, and
// nothing of a Secret is kept beyond the reconcile that read it.
type SourceReader struct {
	Client kubernetes.Interface
}

// NoSecretSources refuses Secrets as values sources and reads ConfigMaps
// through Sources: under --storage-driver configmap, Helm would keep a
// Secret's values in ConfigMap release records, readable by whoever may
// read ConfigMaps. The release specs that use one fail instead.
type NoSecretSources struct{ Sources ValuesSources }

// Get refuses a Secret and reads a ConfigMap.
func (r NoSecretSources) Get(ctx context.Context, kind, namespace, name string) (bool, map[string]string, error) {
	if kind == config.KindSecret {
		return false, nil, fmt.Errorf("values from Secret %s/%s are refused with --storage-driver configmap: Helm would store them in ConfigMaps; use --storage-driver secret", namespace, name)
	}
	return r.Sources.Get(ctx, kind, namespace, name)
}

// Get reads one Secret or ConfigMap.
func (r SourceReader) Get(ctx context.Context, kind, namespace, name string) (bool, map[string]string, error) {
	var (
		data map[string]string
		err  error
	)
	switch kind {
	case config.KindSecret:
		s, gerr := r.Client.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
		if err = gerr; err == nil {
			data = make(map[string]string, len(s.Data))
			for k, v := range s.Data {
				data[k] = string(v)
			}
		}
	case config.KindConfigMap:
		cm, gerr := r.Client.CoreV1().ConfigMaps(namespace).Get(ctx, name, metav1.GetOptions{})
		if err = gerr; err == nil {
			data = make(map[string]string, len(cm.Data)+len(cm.BinaryData))
			for k, v := range cm.BinaryData {
				data[k] = string(v)
			}
			for k, v := range cm.Data {
				data[k] = v
			}
		}
	default:
		return false, nil, fmt.Errorf("cannot read values from a %q: only Secret and ConfigMap", kind)
	}
	switch {
	case err == nil:
		return true, data, nil
	case apistatus.NotFound(err, name):
		return false, nil, nil
	}
	return false, nil, fmt.Errorf("cannot read %s %s/%s: %w", kind, namespace, name, err)
}

// SourceGVR is the resource of a values source kind.
func SourceGVR(kind string) schema.GroupVersionResource {
	if kind == config.KindSecret {
		return schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	}
	return schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
}

// SourceCache reads each values source object at most once for its
// lifetime: one observation (release specs of a spec that share a Secret),
// or one periodic pass (every spec that shares it). It is used by one
// goroutine.
type SourceCache struct {
	reader ValuesSources
	reads  plan.Sources
}

// NewSourceCache returns an empty cache that reads through reader (nil: every
// read fails).
func NewSourceCache(reader ValuesSources) *SourceCache {
	return &SourceCache{reader: reader, reads: plan.Sources{}}
}

// ReadAll reads the objects of keys not read yet, and returns every read so
// far.
func (c *SourceCache) ReadAll(ctx context.Context, keys []plan.SourceKey) plan.Sources {
	for _, k := range keys {
		if _, done := c.reads[k]; done {
			continue
		}
		var r plan.SourceRead
		if c.reader == nil {
			r.Err = errors.New("this autox has no reader of values sources")
		} else {
			r.Found, r.Data, r.Err = c.reader.Get(ctx, k.Kind, k.Namespace, k.Name)
		}
		c.reads[k] = r
	}
	return c.reads
}

// Read returns the reads of rs's valuesFrom entries, in order, in the
// release's namespace. A failed read is a *plan.SourceError that names
// the reference.
func (c *SourceCache) Read(ctx context.Context, rs *config.ReleaseSpec) ([]plan.SourceValue, error) {
	values, _, err := c.ReadAll(ctx, plan.KeysOf(rs)).Of(rs)
	return values, err
}
