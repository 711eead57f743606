package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/autox-dev/autox/internal/shard"
)

func newValidateCommand() *cobra.Command {
	var (
		path   string
		shards int
	)
	cmd := &cobra.Command{
		Use:   "validate --config FILE",
		Short: "Check a config file without a cluster; exit 1 with one line per problem",
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := bindEnv(cmd.Flags()); err != nil {
				return err
			}
			n := shard.Count(shards)
			if err := n.Check(); err != nil {
				return &exitError{1, err}
			}
			cfg, err := loadConfig(cmd, path)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s is valid: %d spec(s)\n", path, len(cfg.Specs))
			if n.Sharded() {
				return printSpecShards(cmd.OutOrStdout(), n, cfg)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&path, "config", "", "path of the config file")
	cmd.Flags().IntVar(&shards, "shards", 1, "with more than 1, also print the shard of each named spec (a selector spec's objects are spread over every shard)")
	return cmd
}
