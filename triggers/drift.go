package triggers

import (
	"context"
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/helmops"
	"github.com/autox-dev/autox/internal/format"
	"github.com/autox-dev/autox/triggers/driftwatch"
	"github.com/autox-dev/autox/triggers/observe"
	"github.com/autox-dev/autox/triggers/plan"
)

// DriftTargets are the releases the drift loop (triggers/driftwatch) checks
// now: autox's own (the Inventory's instance, this shard's), newest
// revision deployed and written by autox (its revision label names it: no
// other Helm client wrote since), not locked (deployed is neither pending
// nor uninstalling), whose release spec is in the config with drift warn or
// correct, and whose queue key is neither being reconciled nor failing (a
// key in backoff is not known to be in sync). It reads the release records
// through the record index: no request while the index is synced.
func (c *Controller) DriftTargets(ctx context.Context) ([]driftwatch.Target, error) {
	cfg := c.Config()
	if !driftOn(cfg) {
		return nil, nil // drift off everywhere: not even a read
	}
	recs, err := c.opts.Inventory.Managed(ctx, c.state.GCNamespaces())
	var nsErr *helmops.NamespacesError
	if err != nil && !errors.As(err, &nsErr) {
		return nil, err
	}
	now := time.Now()
	var out []driftwatch.Target
	for _, r := range recs {
		spec := cfg.Specs[r.Spec]
		if spec == nil || spec.ReleaseSpecs[r.ReleaseSpec] == nil {
			continue
		}
		rs := spec.ReleaseSpecs[r.ReleaseSpec]
		if !rs.Drift.Enabled() || r.Status != "deployed" || r.Digest == "" || r.AutoxRevision != r.Revision {
			continue
		}
		key := driftKey(r)
		if !c.opts.Shard.OwnsKey(cfg, key) || c.inBackoff(key, now) || c.busyKey(key) {
			continue
		}
		t := helmops.DriftTarget{Namespace: r.Namespace, Name: r.Name, Revision: r.Revision, Policy: rs.Drift,
			Suspended: spec.Suspended(r.ReleaseSpec) != ""}
		if sa := config.RunsAs(spec, rs, c.rec.opts.DefaultServiceAccount); sa != "" {
			t.ServiceAccount = helmops.ServiceAccount{Namespace: r.Namespace, Name: sa}
		}
		out = append(out, driftwatch.Target{DriftTarget: t, Spec: r.Spec, ObjectNamespace: r.ObjectNamespace, ObjectName: r.ObjectName})
	}
	return out, nil
}

// driftKey is the queue key that reconciles release r.
func driftKey(r format.Record) string {
	if r.ObjectName == "" {
		return r.Spec
	}
	return plan.ObjectKey(r.Spec, format.Object{Namespace: r.ObjectNamespace, Name: r.ObjectName})
}

// busyKey says whether key, or its spec's own key, is being reconciled.
func (c *Controller) busyKey(key string) bool {
	_, running := c.inFlight.Load(key)
	_, spec := c.inFlight.Load(specOf(key))
	return running || spec
}

// DriftBusy says whether release namespace/name is being operated on (its
// key or its spec's is being reconciled): its drift check waits, so that
// drift never races an install, upgrade or uninstall.
func (c *Controller) DriftBusy(namespace, name string) bool {
	busy := false
	c.inFlight.Range(func(k, _ any) bool {
		spec, _ := parseKey(k.(string))
		s := c.Config().Specs[spec]
		if s == nil {
			return true
		}
		for _, rs := range s.ReleaseSpecs {
			if rs.Namespace == "" || rs.Namespace == namespace {
				busy = true // conservative: any release the spec may touch
				return false
			}
		}
		return true
	})
	return busy
}

// DriftRef is the object the drift Events of a release go on, as other
// Events of its spec: its trigger object (a selector spec's object, or the
// named trigger); nil when its spec left the config or the trigger's kind
// is not known.
func (c *Controller) DriftRef(mapper meta.RESTMapper) func(driftwatch.Target) *corev1.ObjectReference {
	return func(t driftwatch.Target) *corev1.ObjectReference {
		spec := c.Config().Specs[t.Spec]
		if spec == nil || mapper == nil {
			return nil
		}
		gvk, err := mapper.KindFor(observe.GVR(spec.Trigger))
		if err != nil {
			return nil
		}
		ref := &corev1.ObjectReference{Kind: gvk.Kind, APIVersion: gvk.GroupVersion().String(), Namespace: spec.Trigger.Namespace, Name: spec.Trigger.Name}
		if t.ObjectName != "" {
			ref.Namespace, ref.Name = t.ObjectNamespace, t.ObjectName
		}
		return ref
	}
}

// driftOn says whether any release spec of cfg has drift on.
func driftOn(cfg *config.Config) bool {
	for _, s := range cfg.Specs {
		for _, rs := range s.ReleaseSpecs {
			if rs.Drift.Enabled() {
				return true
			}
		}
	}
	return false
}
