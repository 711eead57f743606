package triggers

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// LeaderOptions configure Lease-based leader election.
type LeaderOptions struct {
	Client    kubernetes.Interface
	Namespace string
	Name      string
	// LeaseDuration, RenewDeadline and RetryPeriod are client-go's; the
	// defaults (15s, 10s, 2s) are those of kube-controller-manager.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// OnLost is called when the lease is lost while still wanted. It must stop
	// every write at once; main exits the process.
	OnLost func()
	// OnLeading is told when this process starts leading (for metrics).
	OnLeading func(bool)
	Log       zerolog.Logger
}

// RunAsLeader runs run only while this process holds the Lease. When ctx ends,
// run's context ends too; the Lease is released only after run has returned,
// so a standby never starts while this process still writes.
func RunAsLeader(ctx context.Context, opts LeaderOptions, run func(context.Context) error) error {
	if opts.LeaseDuration <= 0 {
		opts.LeaseDuration = 15 * time.Second
	}
	if opts.RenewDeadline <= 0 {
		opts.RenewDeadline = 10 * time.Second
	}
	if opts.RetryPeriod <= 0 {
		opts.RetryPeriod = 2 * time.Second
	}
	id, err := identity()
	if err != nil {
		return err
	}
	// The election has its own context: ending it releases the Lease, which
	// must wait until run has finished its in-flight Helm operations.
	electionCtx, endElection := context.WithCancel(context.WithoutCancel(ctx))
	defer endElection()
	leading := make(chan context.Context, 1)
	var releasing atomic.Bool
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: opts.Namespace, Name: opts.Name},
		Client:     opts.Client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: id},
	}
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   opts.LeaseDuration,
		RenewDeadline:   opts.RenewDeadline,
		RetryPeriod:     opts.RetryPeriod,
		ReleaseOnCancel: true,
		Name:            opts.Name,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(leaderCtx context.Context) { leading <- leaderCtx },
			OnStoppedLeading: func() {
				if opts.OnLeading != nil {
					opts.OnLeading(false)
				}
				if !releasing.Load() && opts.OnLost != nil {
					opts.Log.Error().Str("identity", id).Msg("lost the leader Lease; stopping every write at once")
					opts.OnLost()
				}
			},
			OnNewLeader: func(current string) {
				if current != id {
					opts.Log.Info().Str("leader", current).Msg("standing by: another process leads")
				}
			},
		},
	})
	if err != nil {
		return fmt.Errorf("cannot set up leader election: %w", err)
	}
	electionDone := make(chan struct{})
	go func() {
		defer close(electionDone)
		le.Run(electionCtx)
	}()
	release := func() {
		releasing.Store(true)
		endElection()
		<-electionDone
	}

	select {
	case <-ctx.Done(): // a standby stops at once
		release()
		return nil
	case <-electionDone:
		return nil
	case leaderCtx := <-leading:
		opts.Log.Info().Str("identity", id).Str("lease", opts.Namespace+"/"+opts.Name).Msg("leading: this process writes")
		if opts.OnLeading != nil {
			opts.OnLeading(true)
		}
		runCtx, cancel := context.WithCancel(ctx)
		stopWatch := context.AfterFunc(leaderCtx, cancel)
		err := run(runCtx)
		stopWatch()
		cancel()
		release()
		return err
	}
}

func identity() (string, error) {
	host, err := os.Hostname()
	if err != nil {
		return "", fmt.Errorf("cannot read the hostname for the leader identity: %w", err)
	}
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return host + "_" + hex.EncodeToString(b), nil
}
