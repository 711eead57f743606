package cli

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/autox-dev/autox/helmops"
	"github.com/autox-dev/autox/helmops/chartsource"
	"github.com/autox-dev/autox/internal/shard"
	"github.com/autox-dev/autox/triggers"
)

func newPlanCommand(version string) *cobra.Command {
	var (
		cf               clusterFlags
		path, output     string
		detailedExitCode bool
		logLevel         string
	)
	cmd := &cobra.Command{
		Use:   "plan --config FILE",
		Short: "Show what run would do with this config, changing nothing",
		Long: `plan reads the cluster and prints one line per release: install, upgrade,
reinstall, uninstall, rollback, unchanged, conflict or wait, with the reason.
It uses the same decision code as run. Exit codes: 0 ok, 1 invalid config or
cluster error, 2 changes pending (only with --detailed-exitcode).`,
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
			opts := deps.reconciler(state, chartsource.LocalCharts{Keyrings: cf.keyrings(deps.client)}, log)
			opts.Recorded = recorded
			steps, planErr := triggers.DryRunAll(cmd.Context(), triggers.NewReconciler(opts), deps.inv)
			planErr = errors.Join(recordErr, planErr)
			if err := printSteps(cmd.OutOrStdout(), output, steps, shard.Count(cf.shards)); err != nil {
				return &exitError{1, err}
			}
			if planErr != nil {
				return &exitError{1, fmt.Errorf("the plan is incomplete: %w", planErr)}
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
	return cmd
}
