package cli

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/autox-dev/autox/helmops"
	"github.com/autox-dev/autox/helmops/chartsource"
	"github.com/autox-dev/autox/internal/shard"
	"github.com/autox-dev/autox/triggers"
	"github.com/autox-dev/autox/triggers/plan"
)

func newPlanCommand(version string) *cobra.Command {
	var (
		cf               clusterFlags
		path, output     string
		detailedExitCode bool
		diff, withDrift  bool
		df               diffFlags
		limit            driftLimitFlags
		logLevel         string
	)
	cmd := &cobra.Command{
		Use:   "plan --config FILE",
		Short: "Show what run would do with this config, changing nothing",
		Long: `plan reads the cluster and prints one line per release: install, upgrade,
reinstall, uninstall, rollback, unchanged, conflict or wait, with the reason.
It uses the same decision code as run. With --diff it also shows, for every
release a step would change, a unified diff per object of the manifest its
record holds against the one the new config renders (a client-side dry run
with the cluster's capabilities), Secret data as <redacted> and the values of
Secret sources masked: a reviewer's diff. A release the plan leaves in
sync whose drift mode is warn or correct gets a read-only drift check (a
server-side-apply dry run of each object, as the release's identity): a
DRIFT column, paths only, never values; --drift=false makes none. Exit codes: 0 ok, 1 invalid config
or cluster error (or a diff that could not be made), 2 changes pending (only
with --detailed-exitcode).`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := bindEnv(cmd.Flags()); err != nil {
				return err
			}
			if err := checkOutput(output); err != nil {
				return err
			}
			log, err := newLogger(cmd.ErrOrStderr(), logLevel, "console")
			if err != nil {
				return &exitError{1, err}
			}
			defer helmops.RouteStdLog(log)()
			cfg, err := loadConfig(cmd, path)
			if err != nil {
				return err
			}
			deps, err := cf.connect(version, log)
			if err != nil {
				return &exitError{1, err}
			}
			state := triggers.NewConfigState(cfg)
			// A record that cannot be read leaves the plan to the
			// config's namespaces, and makes it incomplete.
			recorded, recordErr := deps.rememberManaged(cmd.Context(), &cf, state, log)
			var charts chartsource.ChartSource = chartsource.LocalCharts{Keyrings: cf.keyrings(deps.client)}
			if diff {
				if charts, err = df.charts(&cf, deps, log); err != nil {
					return &exitError{1, err}
				}
			}
			opts := deps.reconciler(state, charts, log)
			opts.Recorded = recorded
			rec := triggers.NewReconciler(opts)
			steps, planErr := triggers.DryRunAll(cmd.Context(), rec, deps.inv)
			planErr = errors.Join(recordErr, planErr)
			var diffs map[int]*releaseDiff
			var undiffed int
			if diff {
				diffs, undiffed = diffSteps(cmd.Context(), rec, deps.helm, steps)
			}
			view := planView{steps: steps, shards: shard.Count(cf.shards), diff: diff, diffs: diffs}
			if withDrift {
				// A failed check is in its step's drift: it never fails the plan.
				view.drifts = planDrifts(cmd.Context(), limit.checker(deps.helm, nil), deps.inv.Managed, cfg, steps)
			}
			if err := printPlan(cmd.OutOrStdout(), output, view); err != nil {
				return &exitError{1, err}
			}
			if planErr != nil {
				return &exitError{1, fmt.Errorf("the plan is incomplete: %w", planErr)}
			}
			if undiffed > 0 {
				return &exitError{1, fmt.Errorf("the diff is incomplete: %d release(s) could not be rendered or read (see their diff)", undiffed)}
			}
			if detailedExitCode {
				for _, s := range steps {
					if s.Changes() {
						return &exitError{2, errors.New("changes pending")}
					}
				}
			}
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&path, "config", "", "path of the config file")
	cf.register(fs)
	fs.StringVarP(&output, "output", "o", "table", "output format: table or json")
	fs.BoolVar(&detailedExitCode, "detailed-exitcode", false, "exit 2 when the plan has changes (as terraform plan does)")
	fs.StringVar(&logLevel, "log-level", "warn", "log level of messages on stderr")
	fs.BoolVar(&diff, "diff", false, "also show, per release that changes, a unified diff of each object (Secret data redacted, Secret sources' values masked)")
	df.register(fs)
	fs.BoolVar(&withDrift, "drift", true, "check the drift of each release the plan leaves in sync with drift warn or correct (read-only dry runs as the release's identity); false: no drift request at all")
	limit.register(fs)
	return cmd
}

// planView is what plan prints: its steps, and with --diff their diffs
// (by index), and unless --drift=false their drifts (one per step).
type planView struct {
	steps  []plan.Step
	shards shard.Count
	diff   bool
	diffs  map[int]*releaseDiff
	drifts []*releaseDrift
}

// printPlan prints the plan: a table (and with --diff, the diffs after
// it), or with -o json an array of steps (never null).
func printPlan(w io.Writer, output string, v planView) error {
	if output == "json" {
		if !v.diff && v.drifts == nil && !v.shards.Sharded() {
			if v.steps == nil {
				return writeJSON(w, []plan.Step{})
			}
			return writeJSON(w, v.steps)
		}
		out, err := stepsJSON(v)
		if err != nil {
			return err
		}
		return writeJSON(w, out)
	}
	if err := printStepsTable(w, v); err != nil {
		return err
	}
	if !v.diff {
		return nil
	}
	return printDiffs(w, v.steps, v.diffs)
}
