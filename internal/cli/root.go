// Package cli is autox's command line: the run, validate, plan, list and
// version commands, their flags (each also settable as AUTOX_<FLAG>) and exit
// codes. It only wires flags to the packages that do the work: config (the
// file), watch (its reloads), helmops (Helm), triggers (the control loop) and
// leader (one writer).
package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/autox-dev/autox/config"
)

// exitError carries an exit code out of a command.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }

// Main runs the command named by os.Args and returns the process's exit
// code; version is the build's (package main's -X main.version).
func Main(version string, stdout, stderr io.Writer) int {
	cmd := newRootCommand(version, stdout, stderr)
	if err := cmd.Execute(); err != nil {
		code := 1
		var ee *exitError
		if errors.As(err, &ee) {
			code = ee.code
		}
		fmt.Fprintln(stderr, "autox:", err)
		return code
	}
	return 0
}

func newRootCommand(version string, stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "autox",
		Short:         "Run Helm releases for Kubernetes objects, declared in one YAML file",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(newRunCommand(version), newValidateCommand(), newPlanCommand(version), newListCommand(version), newVersionCommand(version))
	return root
}

// bindEnv lets every flag be set as AUTOX_<FLAG> (dashes become underscores);
// a flag given on the command line wins.
func bindEnv(fs *pflag.FlagSet) error {
	var errs []error
	fs.VisitAll(func(f *pflag.Flag) {
		env := "AUTOX_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v, ok := os.LookupEnv(env); ok && !f.Changed {
			if err := fs.Set(f.Name, v); err != nil {
				errs = append(errs, fmt.Errorf("invalid %s=%q: %w", env, v, err))
			}
		}
	})
	return errors.Join(errs...)
}

// loadConfig loads the config file; an invalid one is an exit 1 with one line
// per problem on stderr.
func loadConfig(cmd *cobra.Command, path string) (*config.Config, error) {
	if path == "" {
		return nil, &exitError{1, errors.New("--config is required")}
	}
	cfg, err := config.Load(path)
	if err != nil {
		return nil, configError(cmd, path, err)
	}
	return cfg, nil
}

// newLogger is the zerolog logger of every command, on w.
func newLogger(w io.Writer, level, format string) (zerolog.Logger, error) {
	lvl, err := zerolog.ParseLevel(level)
	if err != nil {
		return zerolog.Nop(), fmt.Errorf("invalid --log-level %q: %w", level, err)
	}
	switch format {
	case "json":
	case "console":
		w = zerolog.ConsoleWriter{Out: w, TimeFormat: time.RFC3339}
	default:
		return zerolog.Nop(), fmt.Errorf("invalid --log-format %q: use json or console", format)
	}
	return zerolog.New(w).Level(lvl).With().Timestamp().Logger(), nil
}
