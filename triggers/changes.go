package triggers

import (
	"context"
	"slices"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/internal/format"
)

// Reconfigure puts a new, valid config in force: informers follow its
// triggers, and every spec the change touches is reconciled — removed specs
// and release specs uninstall through the same reconcile.
func (c *Controller) Reconfigure(ctx context.Context, cfg *config.Config) config.Changes {
	old := c.state.Replace(cfg)
	// Recorded before any reconcile of the new config can install there.
	c.syncManaged(ctx)
	c.index.Store(buildIndex(cfg))
	c.opts.Metrics.setSuspended(cfg)
	changes := config.Diff(old, cfg)
	c.informers.sync(ctx, cfg)
	c.sources.sync(ctx, cfg)
	if c.opts.Records != nil {
		c.opts.Records.Watch(ctx, c.state.GCNamespaces())
	}
	touched := append(append(append([]string{}, changes.RemovedSpecs...), changes.AddedSpecs...), changes.ChangedSpecs...)
	for _, r := range changes.RemovedReleaseSpecs {
		touched = append(touched, r.Spec)
	}
	if !slices.Equal(old.Namespaces, cfg.Namespaces) {
		// A selector spec without a namespace covers every managed one:
		// objects of a namespace just added are its now.
		for _, name := range cfg.SpecNames() {
			if t := cfg.Specs[name].Trigger; t.IsSelector() && t.Namespace == "" {
				touched = append(touched, name)
			}
		}
	}
	for _, key := range append(touched, claimNeighbours(old, cfg, touched)...) {
		c.queue.Add(key)
	}
	return changes
}

// keyList collects queue keys, each once, in the order first added.
type keyList struct {
	keys []string
	seen map[string]bool
}

func (l *keyList) add(key string) {
	if l.seen[key] {
		return
	}
	if l.seen == nil {
		l.seen = map[string]bool{}
	}
	l.seen[key] = true
	l.keys = append(l.keys, key)
}

// claimNeighbours are the keys whose conflicts a change of the touched
// specs may start or end: a touched named trigger's object under every
// selector spec of its resource that covers its namespace, and, for a
// touched selector spec, every other spec of its resource (a selector
// spec by its sweep). Both configs count: a removed spec's claim ends.
func claimNeighbours(old, cfg *config.Config, touched []string) []string {
	var out keyList
	for _, name := range touched {
		for _, c := range []*config.Config{old, cfg} {
			spec := c.Specs[name]
			if spec == nil {
				continue
			}
			t := spec.Trigger
			for _, other := range cfg.SpecNames() {
				ot := cfg.Specs[other].Trigger
				if other == name || ot.Group != t.Group || ot.Resource != t.Resource {
					continue
				}
				switch {
				case !t.IsSelector() && ot.IsSelector():
					if cfg.Covers(ot, t.Namespace) {
						out.add(ObjectKey(other, format.Object{Namespace: t.Namespace, Name: t.Name}))
					}
				case t.IsSelector():
					out.add(other)
				}
			}
		}
	}
	return out.keys
}
