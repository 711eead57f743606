package triggers

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/autox-dev/autox/helmops"
)

// cleanupOnStart uninstalls, before the first pass, the releases of specs and
// release specs the config no longer has (DESIGN §4). It retries until the
// inventory can be read: starting passes on a cluster we cannot read would
// only fail too.
func (c *Controller) cleanupOnStart(ctx, workCtx context.Context) {
	backoff := wait.Backoff{Duration: c.opts.RetryBase, Factor: 2, Jitter: 0.1, Steps: 1 << 30, Cap: c.opts.RetryMax}
	for {
		// The namespaces recorded in the cluster join those looked in. A
		// record that cannot be read holds nothing back: it is read again
		// at the next attempt, or by the passes.
		c.syncManaged(ctx)
		specs, err := c.orphanSpecs(ctx)
		if unread := helmops.FailedNamespaces(err); unread != nil {
			// The namespaces that could be read are cleaned up now; the
			// passes find the others' orphans once they can be read.
			c.opts.Log.Error().Err(err).Msg("cannot list autox releases of some namespaces for start-up cleanup; cleaning up the others")
			err = nil
		}
		if err == nil {
			for _, name := range specs {
				if ctx.Err() != nil {
					return // stopping: start nothing new
				}
				if !c.opts.Shard.OwnsKey(c.Config(), name) {
					continue
				}
				// The workers are not running yet, so no other reconcile of
				// this spec can overlap; an error here is retried with backoff.
				follow, err := c.rec.Reconcile(workCtx, name)
				if err != nil {
					c.retryLater(name)
				}
				for _, k := range follow {
					c.queue.Add(k)
				}
			}
			return
		}
		c.opts.Log.Error().Err(err).Msg("cannot list autox releases for start-up cleanup; retrying")
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff.Step()):
		}
	}
}

func (c *Controller) orphanSpecs(ctx context.Context) ([]string, error) {
	return OrphanSpecs(ctx, c.opts.Inventory, c.state)
}

// managedSyncTimeout bounds one Sync of the managed-namespaces record
// outside a reconcile.
const managedSyncTimeout = 10 * time.Second

// syncManaged brings the record of managed namespaces in line with the
// config state (ManagedSet.Sync). A failure is reported and changes nothing:
// garbage collection goes on in the namespaces it knows of, installs into a
// namespace not recorded yet wait, and the next pass tries again.
func (c *Controller) syncManaged(ctx context.Context) {
	m := c.rec.Managed()
	if m == nil || ctx.Err() != nil {
		return
	}
	// A config reload waits for this (it runs under the lock that orders
	// reloads with the term's end): a slow API server must not hold a stop
	// or the next reload for long. An install into a namespace left
	// unrecorded waits for a later Sync (plan.Decide holds it; the
	// reconcile that would make it syncs first).
	ctx, cancel := context.WithTimeout(ctx, managedSyncTimeout)
	defer cancel()
	if err := m.Sync(ctx); err != nil {
		c.opts.Log.Error().Err(err).Msg("cannot keep the record of the namespaces this instance manages; " +
			"garbage collection covers the config's namespaces and those already known, installs into a namespace not recorded yet wait")
	}
}
