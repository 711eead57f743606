package triggers

import (
	"fmt"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/internal/format"
	"github.com/autox-dev/autox/triggers/observe"
)

// onTriggerEvent queues what an informer event on one object may change:
// the named specs whose trigger it is, and, for a selector informer, that
// object under each selector spec watching with it.
func (c *Controller) onTriggerEvent(k observe.ListKey, namespace, name string) {
	c.bulk.event(k, namespace, name)
	idx := c.index.Load()
	if k.Selector == "" {
		for _, spec := range idx.specs[triggerKey{Group: k.GVR.Group, Resource: k.GVR.Resource, Namespace: namespace, Name: name}] {
			c.queueEvent(spec)
		}
		return
	}
	for _, spec := range idx.selectors[k] {
		c.queueEvent(ObjectKey(spec, format.Object{Namespace: namespace, Name: name}))
	}
}

// queueEvent queues key for an event on its trigger, marked first so that
// its reconcile reads the trigger with a GET (bulkReads.eventQueued).
func (c *Controller) queueEvent(key string) {
	if c.opts.Shard.OwnsKey(c.Config(), key) {
		c.bulk.eventQueued(key)
	}
	c.addOwned(key, 0)
}

// triggerKey identifies a trigger object; the API version is not part of it.
type triggerKey struct {
	Group, Resource, Namespace, Name string
}

func keyOf(t config.Trigger) triggerKey {
	return triggerKey{Group: t.Group, Resource: t.Resource, Namespace: t.Namespace, Name: t.Name}
}

// triggerIndex maps trigger objects to the named specs that name them,
// selector informers to the selector specs that watch with them, and values
// source informers to the keys that use the source.
type triggerIndex struct {
	specs     map[triggerKey][]string
	selectors map[observe.ListKey][]string
	sources   map[observe.ListKey][]sourceUser
}

func buildIndex(cfg *config.Config) *triggerIndex {
	idx := &triggerIndex{specs: map[triggerKey][]string{}, selectors: map[observe.ListKey][]string{}, sources: sourceUsers(cfg)}
	for _, name := range cfg.SpecNames() {
		t := cfg.Specs[name].Trigger
		if t.IsSelector() {
			for _, k := range observe.KeysFor(cfg, t) {
				idx.selectors[k] = append(idx.selectors[k], name)
			}
			continue
		}
		k := keyOf(t)
		idx.specs[k] = append(idx.specs[k], name)
	}
	return idx
}

func (k triggerKey) String() string {
	return fmt.Sprintf("%s.%s %s/%s", k.Resource, k.Group, k.Namespace, k.Name)
}
