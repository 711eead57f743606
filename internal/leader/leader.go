// Package leader makes autox one writer among its replicas. Run campaigns for
// a Lease (client-go's leader election) for as long as the process runs; each
// time it wins, it starts a new Term and runs the caller's work for it. A term
// ends — fencing every write made through its clients — as soon as this
// process can no longer be sure it holds the Lease, before anything else
// happens; on a stop it ends before the Lease is released. A lost Lease does
// not end the process: the term's work stops and Run campaigns again.
package leader

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
)

// Options configure Lease-based leader election.
type Options struct {
	// Client reads and writes the Lease. It must not be fenced: a process
	// whose term ended must still campaign and release.
	Client    kubernetes.Interface
	Namespace string
	Name      string
	// LeaseDuration, RenewDeadline and RetryPeriod are client-go's; the
	// defaults (15s, 10s, 2s) are those of kube-controller-manager.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// OnLeading is told when a term starts (true) and when it ends (false).
	OnLeading func(bool)
	// Metrics (optional) shows leadership and counts refused writes.
	Metrics *Metrics
	Log     zerolog.Logger
	// Identity is this process's name in the Leases it holds (NewIdentity);
	// empty: a new one. The caller that makes it first can also put it in
	// its API requests' user agent, so that an audit log tells which
	// replica wrote what.
	Identity string

	// gate, for a shard Lease (RunShards), decides whether this process
	// may take the Lease; nil: always.
	gate *shareGate
	// idle, with gate, is called when the gate refuses the Lease, and
	// when a read of a Lease this process does not hold cannot come from
	// the cache (so polling costs a request).
	idle func()
	// guard, for the one Lease of --shards 1 (Run), refuses to take it
	// while a shard Lease is held; nil: always.
	guard *shardsGuard
	// cache, for shard Leases (RunShards), serves the reads of a Lease
	// this process does not hold; nil: every read is live.
	cache *leaseCache
}

// Lead does one term's work. It must return soon after ctx ends: when the
// process stops (after its in-flight work, bounded by the caller) or when the
// term ends (at once: the term's writes are refused anyway).
type Lead func(ctx context.Context, term *Term) error

// RunAlone runs lead as the one writer without an election
// (--leader-elect=false): one term from start to stop, fenced when lead returns.
func RunAlone(ctx context.Context, opts Options, lead Lead) error {
	term := NewTerm(opts.Metrics.refusedFunc())
	defer term.End()
	opts.notify(true)
	defer opts.notify(false)
	return lead(ctx, term)
}

// Run campaigns for the Lease until ctx ends, and runs lead for every term
// this process wins. It returns nil after a stop, or lead's error.
func Run(ctx context.Context, opts Options, lead Lead) error {
	opts.setDefaults()
	if err := opts.checkTiming(); err != nil {
		return err
	}
	id, err := opts.identity()
	if err != nil {
		return err
	}
	log := opts.Log.With().Str("identity", id).Str("lease", opts.Namespace+"/"+opts.Name).Logger()
	opts.guard = newShardsGuard(opts)
	for ctx.Err() == nil {
		lost, err := campaign(ctx, opts, id, log, lead)
		if err != nil || !lost {
			return err
		}
		log.Warn().Msg("lost the leader Lease: this term's writes are fenced and its work stopped; campaigning again")
	}
	return nil
}

func (o *Options) setDefaults() {
	if o.LeaseDuration <= 0 {
		o.LeaseDuration = 15 * time.Second
	}
	if o.RenewDeadline <= 0 {
		o.RenewDeadline = 10 * time.Second
	}
	if o.RetryPeriod <= 0 {
		o.RetryPeriod = 2 * time.Second
	}
}

// checkTiming: the Lease stores whole seconds: a standby waits that long
// after the last renewal it saw, and this process fences RenewDeadline after
// its last renewal. The difference is the margin that keeps the two apart.
func (o *Options) checkTiming() error {
	if leaseSeconds := o.LeaseDuration.Truncate(time.Second); leaseSeconds-o.RenewDeadline < time.Second {
		return fmt.Errorf("the leader election lease duration (%s, stored as %s) must exceed the renew deadline (%s) by at least 1s",
			o.LeaseDuration, leaseSeconds, o.RenewDeadline)
	}
	return nil
}

// campaign runs one election: it waits to lead, runs one term, and leaves
// the election. lost reports a term that ended without a stop.
func campaign(ctx context.Context, opts Options, id string, log zerolog.Logger, lead Lead) (lost bool, err error) {
	term := NewTerm(opts.Metrics.refusedFunc())
	defer term.End()
	lock := &watchedLock{
		Interface: &leaseLock{client: opts.Client.CoordinationV1(), namespace: opts.Namespace, name: opts.Name,
			identity: id, cache: opts.cache, idle: opts.idle},
		term: term, renewDeadline: opts.RenewDeadline, gate: opts.gate, refused: opts.idle, guard: opts.guard,
	}
	defer lock.stopWatchdog()
	// Runs last: the share goes back once the Lease is released.
	defer lock.giveBack()
	leading := make(chan context.Context, 1)
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:          lock,
		LeaseDuration: opts.LeaseDuration,
		RenewDeadline: opts.RenewDeadline,
		RetryPeriod:   opts.RetryPeriod,
		// Leaving the election releases the Lease; that happens only after
		// the term has ended, so a standby never starts while we may write.
		ReleaseOnCancel: true,
		Name:            opts.Name,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(leaderCtx context.Context) {
				lock.startWatchdog()
				leading <- leaderCtx
			},
			OnStoppedLeading: term.End,
			OnNewLeader: func(current string) {
				if current != id {
					log.Info().Str("leader", current).Msg("standing by: another process leads")
				}
			},
		},
	})
	if err != nil {
		return false, fmt.Errorf("cannot set up leader election: %w", err)
	}
	// The election has its own context: ending it releases the Lease, which
	// must wait until the term's work is over and the term fenced.
	electionCtx, endElection := context.WithCancel(context.WithoutCancel(ctx))
	electionDone := make(chan struct{})
	go func() {
		defer close(electionDone)
		le.Run(klog.NewContext(electionCtx, electionLogger(log)))
	}()
	leave := func() {
		endElection()
		<-electionDone
	}

	var leaderCtx context.Context
	select {
	case <-ctx.Done(): // a standby stops at once
		leave()
		return false, nil
	case <-electionDone: // cannot happen before electionCtx ends; campaign again
		endElection()
		return true, nil
	case leaderCtx = <-leading:
	}

	log.Info().Msg("leading: this process writes")
	opts.notify(true)
	stopFencing := context.AfterFunc(leaderCtx, term.End)
	runCtx, cancelRun := context.WithCancel(ctx)
	stopCancel := onClose(term.Done(), cancelRun)
	err = lead(runCtx, term)
	term.End() // before the Lease can be released
	cancelRun()
	stopCancel()
	stopFencing()
	opts.notify(false)
	leave()
	if err != nil {
		return false, err
	}
	if ctx.Err() != nil {
		log.Info().Msg("left the leader election: writes fenced, Lease released")
		return false, nil
	}
	return true, nil
}

// watchedLock is the Lease lock with a watchdog: while leading, the term
// ends RenewDeadline after the start of the last successful renewal, or at
// once when the Lease names another holder. client-go itself notices a lost
// Lease only after trying to release it, which can take another
// RenewDeadline when the API server does not answer; by then a standby may
// lead. Fencing from our own renewal times keeps the term inside the Lease:
// a standby cannot take over before LeaseDuration (> RenewDeadline) has
// passed since it saw that renewal.
type watchedLock struct {
	resourcelock.Interface
	term          *Term
	renewDeadline time.Duration

	mu        sync.Mutex
	lastRenew time.Time
	leading   bool
	timer     *time.Timer
	// seenHolder is the holder the last Get read.
	seenHolder string
	// gate (shard Leases only) lets this process take the Lease; reserved
	// says it has let it, until the campaign ends.
	gate     *shareGate
	refused  func()
	guard    *shardsGuard
	reserved bool
}

// acquiring reserves a share before a write that makes this process the
// holder; undo returns it when that write fails and no earlier write had
// reserved it.
func (l *watchedLock) acquiring() (undo func(), err error) {
	if l.gate == nil {
		return func() {}, nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.reserved {
		return func() {}, nil
	}
	if !l.gate.take() {
		if l.refused != nil {
			l.refused()
		}
		return nil, errFairShare
	}
	l.reserved = true
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.reserved && !l.leading {
			l.reserved = false
			l.gate.give()
		}
	}, nil
}

// guarded asks the guard before a write that would take the Lease (not a
// renewal: a leader's term is never cut by it).
func (l *watchedLock) guarded(ctx context.Context) error {
	if l.guard == nil {
		return nil
	}
	l.mu.Lock()
	leading := l.leading
	l.mu.Unlock()
	if leading {
		return nil
	}
	return l.guard.check(ctx)
}

func (l *watchedLock) giveBack() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.reserved {
		l.reserved = false
		l.gate.give()
	}
}

func (l *watchedLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	rec, raw, err := l.Interface.Get(ctx)
	if err == nil && rec != nil {
		l.mu.Lock()
		l.seenHolder = rec.HolderIdentity
		leading := l.leading
		l.mu.Unlock()
		if leading && rec.HolderIdentity != l.Identity() {
			l.term.End()
		}
	}
	return rec, raw, err
}

func (l *watchedLock) Create(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	if err := l.guarded(ctx); err != nil {
		return err
	}
	undo, err := l.acquiring()
	if err != nil {
		return err
	}
	start := time.Now()
	err = l.Interface.Create(ctx, rec)
	if err == nil && rec.HolderIdentity == l.Identity() {
		l.renewed(start)
	} else if err != nil {
		undo()
	}
	return err
}

// errNotOurs refuses to release a Lease another process holds.
var errNotOurs = errors.New("not releasing the Lease: the last read names another holder")

func (l *watchedLock) Update(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	if rec.HolderIdentity == "" {
		// A release. client-go reads the Lease first but still believes it
		// leads if it never saw the takeover; writing now would clear the
		// new leader's Lease (the update is conditional on what the Get
		// read) and let two processes lead. Release only what is ours.
		l.mu.Lock()
		ours := l.seenHolder == l.Identity()
		l.mu.Unlock()
		if !ours {
			return errNotOurs
		}
	}
	undo := func() {}
	if rec.HolderIdentity == l.Identity() {
		var err error
		if err = l.guarded(ctx); err != nil {
			return err
		}
		if undo, err = l.acquiring(); err != nil {
			return err
		}
	}
	start := time.Now()
	err := l.Interface.Update(ctx, rec)
	// A release writes an empty holder: that is no renewal.
	if err == nil && rec.HolderIdentity == l.Identity() {
		l.renewed(start)
	} else if err != nil {
		undo()
	}
	return err
}

func (l *watchedLock) renewed(start time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lastRenew = start
	l.term.lastsUntil(start.Add(l.renewDeadline))
	if l.timer != nil {
		l.timer.Reset(time.Until(start.Add(l.renewDeadline)))
	}
}

func (l *watchedLock) startWatchdog() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.leading = true
	l.timer = time.AfterFunc(time.Until(l.lastRenew.Add(l.renewDeadline)), l.term.End)
}

func (l *watchedLock) stopWatchdog() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.leading = false
	if l.timer != nil {
		l.timer.Stop()
	}
}

// onClose calls f once ch is closed, unless the returned stop is called first.
func onClose(ch <-chan struct{}, f func()) (stop func()) {
	quit := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		select {
		case <-ch:
			f()
		case <-quit:
		}
	}()
	return func() {
		close(quit)
		<-done
	}
}

// identity is opts.Identity, or a new one.
func (o Options) identity() (string, error) {
	if o.Identity != "" {
		return o.Identity, nil
	}
	return NewIdentity()
}

func (o Options) notify(leading bool) {
	o.Metrics.setLeading(leading)
	if o.OnLeading != nil {
		o.OnLeading(leading)
	}
}

// NewIdentity makes a process identity for the Leases: the hostname (a
// pod's name) and a random suffix, since replicas may share a host.
func NewIdentity() (string, error) {
	host, err := os.Hostname()
	if err != nil {
		return "", fmt.Errorf("cannot read the hostname for the leader identity: %w", err)
	}
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("cannot make a leader identity: %w", err)
	}
	return host + "_" + hex.EncodeToString(b), nil
}
