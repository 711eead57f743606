package triggers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/triggers/plan"
)

// ValuesSources reads the Secrets and ConfigMaps that valuesFrom entries
// name, live: like the trigger, the cluster is the truth at every reconcile.
// SourceReader is the one implementation.
type ValuesSources interface {
	// Get returns the object's content by key, found false for NotFound.
	// Any other failure is an error: nothing is taken for absent.
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
	case objectNotFound(err, name):
		return false, nil, nil
	}
	return false, nil, fmt.Errorf("cannot read %s %s/%s: %w", kind, namespace, name, err)
}

// sourceGVR is the resource of a values source kind.
func sourceGVR(kind string) schema.GroupVersionResource {
	if kind == config.KindSecret {
		return schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	}
	return schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
}

type sourceKey struct{ Kind, Namespace, Name string }

type sourceRead struct {
	found bool
	data  map[string]string
	err   error
}

// sourceCache reads each object at most once for its lifetime: one
// observation (release specs of a spec that share a Secret), or one
// periodic pass (every spec that shares it). It is used by one goroutine.
type sourceCache struct {
	reader ValuesSources
	reads  map[sourceKey]sourceRead
}

func newSourceCache(reader ValuesSources) *sourceCache {
	return &sourceCache{reader: reader, reads: map[sourceKey]sourceRead{}}
}

// read returns the reads of rs's valuesFrom entries, in order, in the
// release's namespace. A failed read is a *plan.SourceError that names
// the reference.
func (c *sourceCache) read(ctx context.Context, rs *config.ReleaseSpec) ([]plan.SourceValue, error) {
	out := make([]plan.SourceValue, 0, len(rs.ValuesFrom))
	for _, ref := range rs.ValuesFrom {
		k := sourceKey{ref.Kind, rs.Namespace, ref.Name}
		r, done := c.reads[k]
		if !done {
			if c.reader == nil {
				r.err = errors.New("this autox has no reader of values sources")
			} else {
				r.found, r.data, r.err = c.reader.Get(ctx, k.Kind, k.Namespace, k.Name)
			}
			c.reads[k] = r
		}
		if r.err != nil {
			return nil, plan.NewSourceError(ref, rs.Namespace, r.err)
		}
		out = append(out, plan.SourceValue{Ref: ref, Namespace: rs.Namespace, Found: r.found, Data: r.data})
	}
	return out, nil
}

// sourcesOf is what a pass hands InSync for spec (as it applies to one
// object, for a selector spec): the reads of its release specs' sources
// through the pass's cache, false for any that failed.
func (c *sourceCache) sourcesOf(ctx context.Context, spec *config.Spec) plan.SourcesOf {
	return func(id string) ([]plan.SourceValue, bool) {
		rs := spec.ReleaseSpecs[id]
		if rs == nil {
			return nil, false
		}
		v, err := c.read(ctx, rs)
		return v, err == nil
	}
}

// sourceUser is a queue key that uses a values source: a named spec, or a
// selector spec — whose objects in objectNamespace, when the release
// namespace is the object's (perObject), or else all of them by its sweep.
type sourceUser struct {
	spec            string
	perObject       bool
	objectNamespace string
}

// sourceInformerKeys are the values sources cfg references, one informer
// key each: an informer per object, with a field selector on its name, so
// that RBAC can name the objects (resourceNames) and nothing else is watched.
// For a selector spec, every namespace it covers where its release spec may
// live; sourceUsers says who uses each.
func sourceInformerKeys(cfg *config.Config) []informerKey {
	users := sourceUsers(cfg)
	keys := make([]informerKey, 0, len(users))
	for k := range users {
		keys = append(keys, k)
	}
	return keys
}

// sourceUsers maps each values source informer to the keys it concerns.
func sourceUsers(cfg *config.Config) map[informerKey][]sourceUser {
	out := map[informerKey][]sourceUser{}
	add := func(rs *config.ReleaseSpec, u sourceUser) {
		for _, ref := range rs.ValuesFrom {
			k := informerKey{GVR: sourceGVR(ref.Kind), Namespace: rs.Namespace, Name: ref.Name}
			if !slices.Contains(out[k], u) {
				out[k] = append(out[k], u)
			}
		}
	}
	for _, name := range cfg.SpecNames() {
		spec := cfg.Specs[name]
		if !spec.Trigger.IsSelector() {
			for _, id := range spec.ReleaseSpecIDs() {
				add(spec.ReleaseSpecs[id], sourceUser{spec: name})
			}
			continue
		}
		// The release namespace of a selector spec may be the object's:
		// ask the config what it is in each namespace the spec covers. When
		// it is the object's everywhere, an event concerns the objects of
		// its namespace only; otherwise every object, by the sweep.
		covered := cfg.TriggerNamespaces(spec.Trigger)
		resolved := map[string]map[string]*config.ReleaseSpec{} // id -> object namespace -> release spec
		for _, ns := range covered {
			forObj, err := spec.ForObject(name, ns, "values-source-probe")
			if err != nil {
				continue
			}
			for id, rs := range forObj.ReleaseSpecs {
				if resolved[id] == nil {
					resolved[id] = map[string]*config.ReleaseSpec{}
				}
				resolved[id][ns] = rs
			}
		}
		for _, id := range spec.ReleaseSpecIDs() {
			perObject := len(resolved[id]) > 0
			for ns, rs := range resolved[id] {
				perObject = perObject && rs.Namespace == ns
			}
			for _, ns := range covered {
				rs := resolved[id][ns]
				if rs == nil {
					continue
				}
				u := sourceUser{spec: name}
				if perObject {
					u = sourceUser{spec: name, perObject: true, objectNamespace: ns}
				}
				add(rs, u)
			}
		}
	}
	return out
}

// onSourceEvent queues, after the coalescing delay, the keys that use a
// values source that was created, changed or deleted. The delay lets the
// changes of one commit (several Secrets written in a row) reach one
// reconcile: a key already waiting keeps its earlier time, so it runs once
// and reads them all. The event is a hint: the reconcile reads live.
func (c *Controller) onSourceEvent(k informerKey, _, _ string) {
	idx := c.index.Load()
	cfg := c.Config()
	for _, u := range idx.sources[k] {
		if !u.perObject {
			c.queue.AddAfter(u.spec, c.opts.ValuesCoalesce)
			continue
		}
		spec := cfg.Specs[u.spec]
		if spec == nil {
			continue
		}
		objs, known := c.rec.admissions.served(u.spec, admissionIdentity(cfg, spec.Trigger))
		if !known {
			c.queue.AddAfter(u.spec, c.opts.ValuesCoalesce) // the sweep finds them
			continue
		}
		for _, o := range objs {
			if o.Namespace == u.objectNamespace {
				c.queue.AddAfter(ObjectKey(u.spec, o), c.opts.ValuesCoalesce)
			}
		}
	}
}

// defaultValuesCoalesce is --values-coalesce's default.
const defaultValuesCoalesce = 2 * time.Second
