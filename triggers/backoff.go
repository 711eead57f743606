package triggers

import (
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"
)

// retryLater queues a failed spec again after its backoff.
func (c *Controller) retryLater(name string) {
	c.queue.AddAfter(name, c.backoff.failed(name, time.Now()))
}

// forget ends a spec's backoff after a successful reconcile.
func (c *Controller) forget(name string) { c.backoff.succeeded(name) }

func (c *Controller) inBackoff(name string, now time.Time) bool { return c.backoff.waiting(name, now) }

// Backoff is the capped exponential retry delay of each failing spec, and
// when its next retry is due. The periodic pass leaves a spec alone until
// then; events and config changes still reconcile it at once.
type Backoff struct {
	limiter workqueue.TypedRateLimiter[string]
	retryAt sync.Map // spec name -> time.Time
}

// NewBackoff returns a Backoff whose delays start at base and double up to max.
func NewBackoff(base, max time.Duration) *Backoff {
	if base <= 0 {
		base = time.Second
	}
	if max <= 0 {
		max = 5 * time.Minute
	}
	return &Backoff{limiter: workqueue.NewTypedItemExponentialFailureRateLimiter[string](base, max)}
}

// failed records a failure and returns the delay before the retry.
func (b *Backoff) failed(name string, now time.Time) time.Duration {
	d := b.limiter.When(name)
	b.retryAt.Store(name, now.Add(d))
	return d
}

func (b *Backoff) succeeded(name string) {
	b.limiter.Forget(name)
	b.retryAt.Delete(name)
}

// due returns when each spec in backoff is due for its retry.
func (b *Backoff) due() map[string]time.Time {
	out := map[string]time.Time{}
	b.retryAt.Range(func(k, v any) bool {
		out[k.(string)] = v.(time.Time)
		return true
	})
	return out
}

func (b *Backoff) waiting(name string, now time.Time) bool {
	v, ok := b.retryAt.Load(name)
	return ok && now.Before(v.(time.Time))
}
