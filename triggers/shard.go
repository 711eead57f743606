package triggers

import (
	"context"
	"strings"
	"time"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/internal/format"
	"github.com/autox-dev/autox/internal/shard"
)

// Shard is the one shard a controller works for, with --shards above 1
// (DESIGN §9): every replica runs one controller per shard it holds, each
// through that shard's term and fence. A controller without a Shard works
// for everything.
type Shard struct {
	Count shard.Count
	Index int
	// Releases, if set, is told how many release records of the shard the
	// last pass listed (the per-shard metric).
	Releases func(n int)
}

// OwnsKey reports whether the controller of this shard reconciles a queue
// key under cfg. A named spec's key is its shard's, a selector object's key
// its object's. The key of a selector spec (its sweep) and of a spec the
// config no longer has is every shard's: each sees only its own releases
// (ShardReleases), so each removes or hands on only what is its own.
func (s *Shard) OwnsKey(cfg *config.Config, key string) bool {
	if s == nil {
		return true
	}
	spec, obj := parseKey(key)
	if !obj.IsZero() {
		return s.Count.OfObject(obj) == s.Index
	}
	if sp := cfg.Specs[spec]; sp != nil && !sp.Trigger.IsSelector() {
		return s.Count.OfSpec(spec) == s.Index
	}
	return true
}

// watchesSpec reports whether the controller of this shard watches spec's
// trigger and values sources: a named spec's shard does, and every shard
// watches a selector spec's, whose objects spread over all of them.
func (s *Shard) watchesSpec(cfg *config.Config, spec string) bool {
	if s == nil {
		return true
	}
	sp := cfg.Specs[spec]
	return sp == nil || sp.Trigger.IsSelector() || s.Count.OfSpec(spec) == s.Index
}

// ownsOutcome reports whether a release spec outcome of spec's object (its
// String, "" for a spec's own key) is this shard's, as the metrics keep it:
// an object's is its object's shard's, any other its spec's.
func (s *Shard) ownsOutcome(spec, object string) bool {
	if ns, name, ok := strings.Cut(object, "/"); ok {
		return s.Count.OfObject(format.Object{Namespace: ns, Name: name}) == s.Index
	}
	return s.Count.OfSpec(spec) == s.Index
}

// OwnsRecord reports whether a release is this shard's, by its labels.
func (s *Shard) OwnsRecord(r format.Record) bool {
	return s == nil || s.Count.OfRecord(r) == s.Index
}

// ShardReleases is h seeing only the releases of shard s when it reads them
// by owner (a spec's, an object's): what a reconcile decides on, removes or
// upgrades is then always its shard's. Lookups by name and names in use are
// not filtered: a name taken by a release of another shard is taken.
func ShardReleases(h Helm, s *Shard) Helm {
	if s == nil {
		return h
	}
	return shardHelm{Helm: h, shard: s}
}

type shardHelm struct {
	Helm
	shard *Shard
}

func (h shardHelm) SpecReleases(ctx context.Context, namespaces []string, spec string) ([]*format.Release, error) {
	rels, err := h.Helm.SpecReleases(ctx, namespaces, spec)
	return h.only(rels), err
}

func (h shardHelm) ObjectReleases(ctx context.Context, namespaces []string, spec string, obj format.Object) ([]*format.Release, error) {
	rels, err := h.Helm.ObjectReleases(ctx, namespaces, spec, obj)
	return h.only(rels), err
}

// only keeps the shard's releases. An error is kept as it is: a namespace
// that could not be read may hold releases of this shard, and a release that
// cannot be decoded holds back whichever shard's reconcile reads it.
func (h shardHelm) only(rels []*format.Release) []*format.Release {
	out := rels[:0:0]
	for _, r := range rels {
		if h.shard.OwnsRecord(r.Record) {
			out = append(out, r)
		}
	}
	return out
}

// addOwned queues an event's key after delay (0: now) when this controller
// reconciles it: with Watches, the events of an informer that several of a
// replica's shards need reach each of their controllers, and a key of
// another shard would only wait in this queue to be dropped.
func (c *Controller) addOwned(key string, delay time.Duration) {
	switch {
	case !c.opts.Shard.OwnsKey(c.Config(), key):
	case delay > 0:
		c.queue.AddAfter(key, delay)
	default:
		c.queue.Add(key)
	}
}

// countShardReleases tells the shard how many of the listed records are
// its, and sets its autox_releases from them.
func (c *Controller) countShardReleases(recs []format.Record) {
	s := c.opts.Shard
	if s == nil {
		return
	}
	n := 0
	byStatus := map[string]int{}
	for _, r := range recs {
		if s.OwnsRecord(r) {
			n++
			byStatus[string(r.Status)]++
		}
	}
	c.opts.Metrics.setShardReleases(byStatus)
	if s.Releases != nil {
		s.Releases(n)
	}
}
