package cli

import (
	"fmt"

	"github.com/spf13/cobra"
)

func newValidateCommand() *cobra.Command {
	var path string
	cmd := &cobra.Command{
		Use:   "validate --config FILE",
		Short: "Check a config file without a cluster; exit 1 with one line per problem",
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := bindEnv(cmd.Flags()); err != nil {
				return err
			}
			cfg, err := loadConfig(cmd, path)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s is valid: %d spec(s)\n", path, len(cfg.Specs))
			return nil
		},
	}
	cmd.Flags().StringVar(&path, "config", "", "path of the config file")
	return cmd
}
