package apply

import (
	"context"
	"fmt"
	"sync"

	"github.com/autox-dev/autox/triggers/plan"
)

// ordered runs do for every step, StepsInParallel at a time, each once the
// steps it must come after (Step.After: release specs of this plan, by
// dependsOn) have succeeded, and puts its errors in errs (marked
// ErrStepFailed). One of them failing or not started leaves it not started,
// with an error that says so. A release spec of After with no step among
// steps is, for an uninstall, a removal an earlier act applied (failed
// names those that did not succeed); for an install, upgrade or reinstall,
// a step this plan does not have, so it is not started either: nothing
// proves what it comes after. Steps without After start at once, as slots
// free up; a step not started when ctx ends is not started.
func (a *Applier) ordered(ctx context.Context, steps []plan.Step, errs []error, failed map[string]bool, do func(plan.Step) error) {
	done := make([]chan struct{}, len(steps))
	// byID is the step of each release spec: the last with that id, since
	// a removal of the same id (a moved release spec) comes first.
	// uninstalls are every uninstall of each release spec: a removed
	// selector spec has one per object, and an uninstall ordered after a
	// release spec comes after all of them.
	byID := map[string]int{}
	uninstalls := map[string][]int{}
	for i, s := range steps {
		done[i] = make(chan struct{})
		byID[s.ReleaseSpec] = i
		if s.Action == plan.ActionUninstall {
			uninstalls[s.ReleaseSpec] = append(uninstalls[s.ReleaseSpec], i)
		}
	}
	slots := make(chan struct{}, StepsInParallel)
	var wg sync.WaitGroup
	for i := range steps {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			defer close(done[i])
			s := steps[i]
			for _, id := range s.After {
				j, ok := byID[id]
				switch {
				case !ok && failed[id]:
					errs[i] = fmt.Errorf("%w: release %s/%s not changed: release spec %s, which comes first, did not succeed", ErrStepFailed, s.Namespace, s.Release, id)
					return
				case !ok && isForward(s.Action):
					// What it comes after is no step of this plan: neither is it
					// applied.
					errs[i] = fmt.Errorf("%w: release %s/%s not changed: release spec %s, which comes first, is not applied now", ErrStepFailed, s.Namespace, s.Release, id)
					return
				case !ok || j == i:
					continue
				}
				first := []int{j}
				if s.Action == plan.ActionUninstall && len(uninstalls[id]) > 0 {
					first = uninstalls[id]
				}
				for _, j := range first {
					if j == i {
						continue
					}
					<-done[j]
					if errs[j] != nil {
						errs[i] = fmt.Errorf("%w: release %s/%s not changed: release spec %s, which comes first, did not succeed", ErrStepFailed, s.Namespace, s.Release, id)
						return
					}
				}
			}
			slots <- struct{}{}
			defer func() { <-slots }()
			if ctx.Err() != nil {
				errs[i] = fmt.Errorf("release %s/%s not changed: %w", s.Namespace, s.Release, ctx.Err())
				return
			}
			if err := do(s); err != nil {
				errs[i] = fmt.Errorf("%w: %w", ErrStepFailed, err)
			}
		}(i)
	}
	wg.Wait()
}
