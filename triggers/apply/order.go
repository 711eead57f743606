package apply

import (
	"context"
	"fmt"
	"sync"

	"github.com/autox-dev/autox/triggers/observe"
	"github.com/autox-dev/autox/triggers/plan"
)

// run is one Apply: its steps, their errors, and when each is done.
type run struct {
	steps []plan.Step
	errs  []error
	done  []chan struct{}
	// byID is the step of each release spec: the last with that id, since
	// a removal of the same id (a moved release spec) comes first.
	byID map[string]int
}

func newRun(steps []plan.Step, errs []error) *run {
	r := &run{steps: steps, errs: errs, done: make([]chan struct{}, len(steps)), byID: map[string]int{}}
	for i, s := range steps {
		r.done[i] = make(chan struct{})
		r.byID[s.ReleaseSpec] = i
	}
	return r
}

// runGroup runs steps[from:to], StepsInParallel at a time, each once the
// steps it must come after (Step.After: release specs of this plan, by
// dependsOn) have succeeded; one of them failing or not started leaves it
// not started, with an error that says so. Steps without After start at
// once, as slots free up. A step of an earlier group is done already.
func (a *Applier) runGroup(ctx context.Context, o *observe.Observed, r *run, from, to int) {
	slots := make(chan struct{}, StepsInParallel)
	var wg sync.WaitGroup
	for i := from; i < to; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			defer close(r.done[i])
			s := r.steps[i]
			for _, id := range s.After {
				j, ok := r.byID[id]
				if !ok || j == i {
					continue
				}
				if j >= to {
					// The plan orders nothing this way; never wait for ever.
					r.errs[i] = fmt.Errorf("%w: release %s/%s not changed: release spec %s, which comes first, runs later", ErrStepFailed, s.Namespace, s.Release, id)
					return
				}
				<-r.done[j]
				if r.errs[j] != nil {
					r.errs[i] = fmt.Errorf("%w: release %s/%s not changed: release spec %s, which comes first, did not succeed", ErrStepFailed, s.Namespace, s.Release, id)
					return
				}
			}
			slots <- struct{}{}
			defer func() { <-slots }()
			if ctx.Err() != nil {
				r.errs[i] = fmt.Errorf("release %s/%s not changed: %w", s.Namespace, s.Release, ctx.Err())
				return
			}
			if err := a.step(ctx, o, s); err != nil {
				r.errs[i] = fmt.Errorf("%w: %w", ErrStepFailed, err)
			}
		}(i)
	}
	wg.Wait()
}
