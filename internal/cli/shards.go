package cli

import (
	"context"
	"fmt"
	"io"
	"slices"

	"k8s.io/client-go/metadata"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/helmops"
	"github.com/autox-dev/autox/internal/format"
	"github.com/autox-dev/autox/internal/shard"
	"github.com/autox-dev/autox/triggers"
	"github.com/autox-dev/autox/triggers/plan"
)

// stepShard is the shard of a plan step: its object's for a selector
// spec's object, else its spec's.
func stepShard(n shard.Count, s plan.Step) int {
	if s.Object != "" {
		ns, name, _ := cutObject(s.Object)
		return n.OfObject(format.Object{Namespace: ns, Name: name})
	}
	return n.OfSpec(s.Spec)
}

// cutObject splits namespace/name.
func cutObject(s string) (namespace, name string, ok bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == '/' {
			return s[:i], s[i+1:], true
		}
	}
	return "", s, false
}

// printSpecShards prints, for `autox validate --shards N`, the shard of
// each named spec; a selector spec's objects are spread over every shard.
func printSpecShards(w io.Writer, n shard.Count, cfg *config.Config) error {
	names := make([]string, 0, len(cfg.Specs))
	for name := range cfg.Specs {
		names = append(names, name)
	}
	slices.Sort(names)
	tw := newTable(w, "SPEC\tSHARD")
	for _, name := range names {
		where := fmt.Sprint(n.OfSpec(name))
		if cfg.Specs[name].Trigger.IsSelector() {
			where = "by object"
		}
		fmt.Fprintf(tw, "%s\t%s\n", name, where)
	}
	return tw.Flush()
}

// sharedWatches are what the shard terms of one replica share: the
// informers of triggers and values sources, the record index every term's
// Manager reads through, and the LISTs that answer their installs'
// conflict reads.
type sharedWatches struct {
	watches   *triggers.Watches
	records   *helmops.RecordIndex
	conflicts *helmops.SharedConflictReads
}

// newSharedWatches builds the replica's watches for its shard terms. They
// only read, with the replica's own client (its rate limit, not a term's
// fence), and run until ctx ends.
func (r *runner) newSharedWatches(ctx context.Context) (*sharedWatches, error) {
	mc, err := metadata.NewForConfig(r.base)
	if err != nil {
		return nil, fmt.Errorf("cannot create metadata client: %w", err)
	}
	records := helmops.NewSharedRecordIndex(mc, r.f.storageDriver, r.f.recordPageSize, r.log)
	return &sharedWatches{records: records, conflicts: helmops.NewSharedConflictReads(mc),
		watches: triggers.NewWatches(ctx, triggers.WatchesOptions{Metadata: mc, Records: records, Log: r.log})}, nil
}
