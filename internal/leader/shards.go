package leader

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/autox-dev/autox/internal/shard"
)

// ShardLead does one shard term's work, like Lead for one shard: it must
// return soon after ctx ends, which happens when the process stops, when
// the term ends, or when the shard is handed over to another replica (then
// after its running operations, as on a stop).
type ShardLead func(ctx context.Context, index int, term *Term) error

// ShardLeaseName is the Lease of shard index of the election named name.
func ShardLeaseName(name string, index int) string { return fmt.Sprintf("%s-shard-%d", name, index) }

// RunShards campaigns for the Lease of each of n shards (ShardLeaseName in
// opts.Namespace) until ctx ends, and runs lead for every shard term this
// process wins: each shard has its own terms and fences, by the same rules
// as Run's one Lease. It holds at most its fair share of the shards
// (shard.Count.FairShare of the live replicas, counted from one heartbeat
// Lease each): it takes no shard beyond it, and hands surplus shards over
// when replicas join, each after its running operations have ended (its
// term ends and its Lease is released, as on a stop). opts.OnLeading is
// not called; OnShard, if set, is told when a shard's term starts and ends.
func RunShards(ctx context.Context, opts Options, n shard.Count, onShard func(index int, leading bool), lead ShardLead) error {
	opts.setDefaults()
	if err := opts.checkTiming(); err != nil {
		return err
	}
	id, err := opts.identity()
	if err != nil {
		return err
	}
	log := opts.Log.With().Str("identity", id).Logger()
	log.Info().Int("shards", int(n)).Str("leases", opts.Namespace+"/"+ShardLeaseName(opts.Name, 0)+"…").Msg("campaigning for the shard Leases")
	// One informer of the namespace's Leases serves every shard's
	// candidate and the count of the replicas; it stops last.
	opts.cache = newLeaseCache(opts.Client, opts.Namespace)
	cacheCtx, stopCache := context.WithCancel(context.WithoutCancel(ctx))
	cacheDone := make(chan struct{})
	go func() {
		defer close(cacheDone)
		opts.cache.run(cacheCtx)
	}()
	defer func() {
		stopCache()
		<-cacheDone
	}()
	m := newMembers(opts, id, int(n))
	g := &shareGate{fair: func() int { return n.FairShare(m.Live()) }, ready: m.settled}
	runCtx, stopAll := context.WithCancel(ctx)
	defer stopAll()
	var wg sync.WaitGroup
	membersDone := make(chan struct{})
	membersCtx, stopMembers := context.WithCancel(context.WithoutCancel(ctx))
	go func() {
		defer close(membersDone)
		m.run(membersCtx, func(err error) { log.Warn().Err(err).Msg("replica heartbeat") })
	}()

	// autox_leader is 1 while this replica holds a shard at all.
	var heldMu sync.Mutex
	heldNow := 0
	holders := make([]*shardHolder, n)
	errs := make(chan error, int(n))
	for i := range holders {
		h := &shardHolder{index: i, gate: g}
		holders[i] = h
		sopts := opts
		sopts.Name = ShardLeaseName(opts.Name, i)
		sopts.gate = g
		sopts.Metrics = opts.Metrics.forShard(i)
		sopts.OnLeading = func(leading bool) {
			h.setLeading(leading)
			heldMu.Lock()
			if leading {
				heldNow++
			} else {
				heldNow--
			}
			opts.Metrics.setLeading(heldNow > 0)
			heldMu.Unlock()
			if onShard != nil {
				onShard(i, leading)
			}
		}
		slog := log.With().Str("lease", opts.Namespace+"/"+sopts.Name).Int("shard", i).Logger()
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := h.campaign(runCtx, sopts, id, slog, lead); err != nil {
				errs <- err
				stopAll()
			}
		}()
	}
	blockedBefore := ""
	// Surplus shards are handed over while the process runs.
	ticker := time.NewTicker(opts.RetryPeriod)
	defer ticker.Stop()
loop:
	for {
		select {
		case <-runCtx.Done():
			break loop
		case <-ticker.C:
			opts.Metrics.setShares(m.Live(), g.fair())
			if why := m.blocked(); why != blockedBefore {
				if why != "" {
					log.Warn().Str("reason", why).Msg("taking no shard while another writer may hold its releases: " +
						"stop every replica before changing --shards")
				}
				blockedBefore = why
			}
			handOver(holders, g.fair(), log)
		}
	}
	wg.Wait()
	stopMembers()
	<-membersDone
	close(errs)
	return errors.Join(collect(errs)...)
}

func collect(errs <-chan error) []error {
	var out []error
	for err := range errs {
		out = append(out, err)
	}
	return out
}

// handOver asks the holders of the shards above fair to give them up,
// highest index first; a shard already being handed over counts as gone.
func handOver(holders []*shardHolder, fair int, log zerolog.Logger) {
	var held []*shardHolder
	for _, h := range holders {
		if h.holding() {
			held = append(held, h)
		}
	}
	if len(held) <= fair {
		return
	}
	sort.Slice(held, func(a, b int) bool { return held[a].index > held[b].index })
	for _, h := range held[:len(held)-fair] {
		log.Info().Int("shard", h.index).Int("fairShare", fair).Msg("handing a shard over: more replicas are live; its running operations end first")
		h.handOver()
	}
}

// shardHolder campaigns for one shard, again and again until the process
// stops; handOver ends the current campaign (its term after the running
// operations), which then starts anew (the gate refuses the Lease while
// this replica is at its fair share).
type shardHolder struct {
	index int
	gate  *shareGate

	mu      sync.Mutex
	leading bool
	cancel  context.CancelFunc // of the current campaign
	handing bool
}

func (h *shardHolder) setLeading(l bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.leading = l
}

// holding reports a shard held and not being handed over.
func (h *shardHolder) holding() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.leading && !h.handing
}

func (h *shardHolder) handedOver() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.handing
}

func (h *shardHolder) handOver() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.handing = true
	if h.cancel != nil {
		h.cancel()
	}
}

func (h *shardHolder) campaign(ctx context.Context, opts Options, id string, log zerolog.Logger, lead ShardLead) error {
	for ctx.Err() == nil {
		// The campaign goes on while the gate refuses the Lease: it polls
		// from the Lease cache (no request) and its decline is no error, and
		// it keeps watching the holder's renewals, so when a holder dies
		// the Lease is taken once it expired and the gate has room, not a
		// whole lease duration after a new campaign's first look. Without
		// a usable cache (not synced yet, a watch that broke, a Role
		// without list and watch) polling costs a GET each retry period:
		// a campaign without room then ends, and a new one waits here for
		// room, as the replicas poll only for shards they may take.
		if !opts.cache.usable() && !h.gate.room() {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(opts.RetryPeriod):
			}
			continue
		}
		cctx, cancel := context.WithCancel(ctx)
		h.mu.Lock()
		h.cancel, h.handing = cancel, false
		h.mu.Unlock()
		opts.idle = func() {
			if !opts.cache.usable() && !h.gate.room() {
				cancel()
			}
		}
		lost, err := campaign(cctx, opts, id, log, func(ctx context.Context, term *Term) error { return lead(ctx, h.index, term) })
		cancel()
		if err != nil {
			return err
		}
		if lost {
			log.Warn().Msg("lost a shard Lease: this shard term's writes are fenced and its work stopped; campaigning again")
		} else if ctx.Err() == nil && h.handedOver() {
			log.Info().Msg("handed the shard over: its term ended and its Lease is released")
		}
	}
	return nil
}

// shareGate lets a shard be taken only while this process holds fewer than
// its fair share, and only once the replicas have been counted.
type shareGate struct {
	fair  func() int
	ready func() bool

	mu   sync.Mutex
	held int
}

// room reports whether take would reserve a shard now.
func (g *shareGate) room() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.ready() && g.held < g.fair()
}

// take reserves a shard; give returns it.
func (g *shareGate) take() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.ready() || g.held >= g.fair() {
		return false
	}
	g.held++
	return true
}

func (g *shareGate) give() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.held--
}

// errFairShare refuses to take a shard Lease beyond the fair share: the
// election tries again at its next retry.
var errFairShare = errors.New("not taking the shard Lease: this replica holds its fair share of the shards")
