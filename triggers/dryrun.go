package triggers

import (
	"context"
	"errors"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/helmops"
	"github.com/autox-dev/autox/triggers/plan"
)

// OrphanSpecs returns the names of specs that have releases the config in
// force does not want by spec or release spec id: removed specs, and specs
// with removed release specs. It looks in every namespace garbage collection covers.
func OrphanSpecs(ctx context.Context, inv *helmops.Inventory, state *ConfigState) ([]string, error) {
	recs, err := inv.Managed(ctx, state.GCNamespaces())
	if err != nil && helmops.FailedNamespaces(err) == nil {
		return nil, err
	}
	// With some namespaces unreadable, the orphans of the others and the
	// error naming the rest.
	return plan.OrphanSpecs(state.Config(), recs), err
}

// DryRunAll decides every spec of the config in force and every spec that still
// has releases it does not want, changing nothing. It is what `autox plan`
// prints and what a pass of `autox run` would do. Steps of specs that could
// be decided are returned even when others failed (with the error).
func DryRunAll(ctx context.Context, rec *Reconciler, inv *helmops.Inventory) ([]plan.Step, error) {
	cfg := rec.State().Config()
	orphans, err := OrphanSpecs(ctx, inv, rec.State())
	if err != nil && helmops.FailedNamespaces(err) == nil {
		return nil, err
	}
	var errs []error
	if err != nil {
		errs = append(errs, err) // the plan goes on for what could be read
	}
	names := cfg.SpecNames()
	for _, o := range orphans {
		if cfg.Specs[o] == nil {
			names = append(names, o)
		}
	}
	var steps []plan.Step
	for _, name := range names {
		s, err := rec.DryRun(ctx, name)
		steps = append(steps, s...)
		if err != nil {
			errs = append(errs, err)
		}
	}
	return steps, errors.Join(errs...)
}

// DryRun observes one queue key and decides, changing nothing: a spec, or
// one object of a selector spec; for a selector spec's own key, every
// object it lists or has releases for. Steps come in the order they are
// applied. An error returned with steps is the failure of some release specs
// only; an error without steps means nothing could be decided (e.g. the
// trigger read failed).
func (r *Reconciler) DryRun(ctx context.Context, key string) ([]plan.Step, error) {
	return r.dryRun(ctx, r.opts.State.Config(), key)
}

func (r *Reconciler) dryRun(ctx context.Context, cfg *config.Config, key string) ([]plan.Step, error) {
	specName, obj := parseKey(key)
	if spec := cfg.Specs[specName]; obj.IsZero() && spec != nil && spec.Trigger.IsSelector() {
		return r.dryRunSelector(ctx, cfg, specName)
	}
	o, err := r.observer.Observe(ctx, cfg, specName, obj)
	if err != nil {
		return nil, err
	}
	p := plan.Decide(*o)
	return p.Steps, r.applier.Report(p)
}

// dryRunSelector decides every object of a selector spec, and the spec's
// releases that name no object.
func (r *Reconciler) dryRunSelector(ctx context.Context, cfg *config.Config, specName string) ([]plan.Step, error) {
	objs, o, err := r.observer.SelectorObjects(ctx, cfg, specName)
	if err != nil {
		return nil, err
	}
	p := plan.Decide(*o)
	steps := p.Steps
	errs := []error{r.applier.Report(p)}
	for _, obj := range objs {
		s, err := r.dryRun(ctx, cfg, ObjectKey(specName, obj))
		steps = append(steps, s...)
		errs = append(errs, err)
	}
	return steps, errors.Join(errs...)
}

// Target is the release step s of a dry run makes, with its chart loaded
// as applying the step would load it (a repository chart fetched now).
func (r *Reconciler) Target(ctx context.Context, s plan.Step) (helmops.Target, error) {
	return r.applier.Target(ctx, s)
}
