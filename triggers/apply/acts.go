package apply

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/autox-dev/autox/triggers/plan"
)

// Acts are the acts of one reconcile on the plans it decides (DESIGN §3,
// "Apply"); what one act did, the next must know. The first plan whose
// leading removals (uninstalls that wait for no other step) are followed by
// other steps or failures gets only those removals, when the reconcile can
// observe its key again: the other steps were decided on the cluster
// before them, and what they free is another release spec's at once, so
// the reconcile observes again and decides anew. Every other plan gets all
// its steps: its leading removals first, as a group, StepsInParallel at a
// time, then the others, each once what it is ordered after (Step.After)
// succeeded. A removal is not tried twice, and a release spec whose
// replacement failed its dry run stays failed. A step not started when ctx
// ends is not started (cancelled past the shutdown timeout or by a fenced
// term); the others finish.
type Acts struct {
	a *Applier
	// removalsFirst says the next act may apply a plan's leading removals
	// alone.
	removalsFirst bool
	// tried are the releases ("namespace/name") whose removal was tried;
	// blocked the release specs whose new release failed the dry run that
	// its old one's removal waited for, with the error; failed the release
	// specs whose removal failed (a step ordered after one does not run).
	tried   map[string]bool
	blocked map[string]error
	failed  map[string]bool
	// steps are the steps acted on and errs their errors (errs[i] is
	// steps[i]'s); others are the errors of the plans' reports and of the
	// reconcile itself.
	steps  []plan.Step
	errs   []error
	others []error
	// last is the plan acted on last; reported says Report has seen it.
	last     plan.Plan
	reported bool
}

// Start begins the acts of one reconcile; observeAgain says it can observe
// its key again after removals.
func (a *Applier) Start(observeAgain bool) *Acts {
	return &Acts{a: a, removalsFirst: observeAgain, tried: map[string]bool{}, blocked: map[string]error{}, failed: map[string]bool{}}
}

// Act applies what plan p allows now, and reports whether the reconcile
// must observe its key again and decide anew: only p's leading removals ran.
func (x *Acts) Act(ctx context.Context, p plan.Plan) (observeAgain bool) {
	x.last, x.reported = p, false
	n := leadingRemovals(p.Steps)
	if x.removalsFirst && n > 0 && (n < len(p.Steps) || len(p.Failed) > 0) {
		x.removalsFirst = false
		x.add(p.Steps[:n], x.remove(ctx, p, p.Steps[:n], p.Steps[n:]))
		return true
	}
	x.removalsFirst = false
	x.others, x.reported = append(x.others, x.a.Report(p)), true
	kept := make([]plan.Step, 0, len(p.Steps))
	at := make([]int, 0, len(p.Steps))
	for i, s := range p.Steps {
		if i < n && x.tried[s.Namespace+"/"+s.Release] {
			continue // reported when it was tried
		}
		kept, at = append(kept, s), append(at, i)
	}
	m := leadingRemovals(kept)
	got := x.remove(ctx, p, kept[:m], kept[m:])
	rest := make([]error, len(kept)-m)
	x.a.ordered(ctx, kept[m:], rest, x.failed, func(s plan.Step) error {
		if err := x.blocked[s.ReleaseSpec]; err != nil && s.Changes() {
			return fmt.Errorf("release %s/%s not changed: %w", s.Namespace, s.Release, err)
		}
		return x.a.step(ctx, p, s)
	})
	errs := make([]error, len(p.Steps))
	for j, err := range append(got, rest...) {
		errs[at[j]] = err
	}
	x.add(p.Steps, errs)
	return false
}

// Fail ends the acts with err, the reason the reconcile cannot go on (the
// observation after the removals failed): the rest of the last plan waits
// for the retry, which observes anew.
func (x *Acts) Fail(err error) {
	if !x.reported {
		x.others, x.reported = append(x.others, x.a.Report(x.last)), true
	}
	x.others = append(x.others, err)
}

// Done returns the steps acted on and their errors (errs[i] is steps[i]'s).
func (x *Acts) Done() (steps []plan.Step, errs []error) { return x.steps, x.errs }

// Err is every error of the acts: the failed steps, the failures the plans
// reported, the reconcile's own.
func (x *Acts) Err() error { return errors.Join(append(append([]error{}, x.errs...), x.others...)...) }

func (x *Acts) add(steps []plan.Step, errs []error) {
	x.steps, x.errs = append(x.steps, steps...), append(x.errs, errs...)
}

// remove applies removals, steps of plan p, StepsInParallel at a time, and
// returns their errors in order. A removal whose release spec installs its
// replacement (plan.Step.ReplacedBy, among rest) waits for that install's
// dry run, and when it fails neither runs.
func (x *Acts) remove(ctx context.Context, p plan.Plan, removals, rest []plan.Step) []error {
	errs := make([]error, len(removals))
	var mu sync.Mutex
	x.a.each(ctx, removals, errs, func(s plan.Step) error {
		mu.Lock()
		x.tried[s.Namespace+"/"+s.Release] = true
		mu.Unlock()
		if s.ReplacedBy != "" {
			if err := x.a.proveReplacement(ctx, p, s, rest); err != nil {
				mu.Lock()
				x.blocked[s.ReplacedBy] = err
				mu.Unlock()
				return err
			}
		}
		err := x.a.step(ctx, p, s)
		if err != nil {
			mu.Lock()
			x.failed[s.ReleaseSpec] = true
			mu.Unlock()
		}
		return err
	})
	return errs
}

// leadingRemovals is how many steps at the start of steps are uninstalls
// that wait for no other step: the removals a plan puts before its release
// specs' steps. An uninstall ordered after another one (dependsOn,
// Step.After) runs with the steps it is ordered with.
func leadingRemovals(steps []plan.Step) int {
	n := 0
	for n < len(steps) && steps[n].Action == plan.ActionUninstall && len(steps[n].After) == 0 {
		n++
	}
	return n
}
