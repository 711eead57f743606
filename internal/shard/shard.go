// Package shard splits autox's work over N shards, purely: which shard a
// spec, a trigger object or a release belongs to, and how many shards one
// replica may hold. The assignment is a stable hash (FNV-1a) of names only,
// so every replica, every autox command and every version computes the same
// shard for the same release from its labels alone, with no shared state.
package shard

import (
	"fmt"
	"hash/fnv"

	"github.com/autox-dev/autox/internal/format"
)

// Count is a number of shards (--shards); 1 is one shard holding everything.
type Count int

// Sharded reports whether the work is split at all (N > 1).
func (n Count) Sharded() bool { return n > 1 }

// Check returns an error for a count autox cannot run with.
func (n Count) Check() error {
	if n < 1 {
		return fmt.Errorf("--shards must be at least 1, got %d", int(n))
	}
	if n > MaxShards {
		return fmt.Errorf("--shards must be at most %d, got %d", MaxShards, int(n))
	}
	return nil
}

// MaxShards bounds --shards: every shard is a Lease that every replica
// campaigns for.
const MaxShards = 256

// of is the shard of a hashed key.
func (n Count) of(key string) int {
	if n <= 1 {
		return 0
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	return int(h.Sum32() % uint32(n))
}

// OfSpec is the shard of a named spec: all its releases are there.
func (n Count) OfSpec(spec string) int { return n.of("spec/" + spec) }

// OfObject is the shard of one trigger object of a selector spec, and of the
// releases that serve it. The object's name is hashed in its label form
// (format.ObjectLabel), so the shard of a release follows from its labels
// even when the object's name is too long for a label.
func (n Count) OfObject(o format.Object) int {
	o = o.AsLabelled()
	return n.of("object/" + o.Namespace + "/" + o.Name)
}

// OfRecord is the shard of a release from its labels alone: the object's
// when it names one (a selector spec's release), else its spec's.
func (n Count) OfRecord(r format.Record) int {
	if o := r.LabelledObject(); !o.IsZero() {
		return n.OfObject(o)
	}
	return n.OfSpec(r.Spec)
}

// FairShare is the most shards one of live replicas holds: ⌈N/live⌉. A
// replica that knows of no live replica (not even itself yet) counts one.
func (n Count) FairShare(live int) int {
	if live < 1 {
		live = 1
	}
	return (int(n) + live - 1) / live
}
