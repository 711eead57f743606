package cli

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/helmops"
	"github.com/autox-dev/autox/internal/format"
	"github.com/autox-dev/autox/triggers/plan"
)

// listedRelease is one row of `autox list`.
type listedRelease struct {
	Namespace   string `json:"namespace"`
	Release     string `json:"release"`
	Spec        string `json:"spec"`
	ReleaseSpec string `json:"releaseSpec"`
	// Object is namespace/name of a selector spec's object, "" for a named spec.
	Object       string    `json:"object,omitempty"`
	Chart        string    `json:"chart"`
	ChartVersion string    `json:"version"`
	Revision     int       `json:"revision"`
	Status       string    `json:"status"`
	Updated      time.Time `json:"updated"`
	Orphan       bool      `json:"orphan"`
	// ServiceAccount is what the release's Helm operations run as, from
	// the config (config.RunsAs), "" for autox's own identity; ChartPinned
	// and ChartVerified say how far its release spec trusts its chart.
	ServiceAccount string `json:"serviceAccount,omitempty"`
	ChartPinned    bool   `json:"chartPinned,omitempty"`
	ChartVerified  bool   `json:"chartVerified,omitempty"`
}

func newListCommand(version string) *cobra.Command {
	var (
		cf                      clusterFlags
		path, output, namespace string
		orphans                 bool
	)
	cmd := &cobra.Command{
		Use:   "list --config FILE",
		Short: "List the releases autox manages in the config's namespaces",
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := bindEnv(cmd.Flags()); err != nil {
				return err
			}
			if err := checkOutput(output); err != nil {
				return err
			}
			log, err := newLogger(cmd.ErrOrStderr(), "warn", "console")
			if err != nil {
				return &exitError{1, err}
			}
			cfg, err := loadConfig(cmd, path)
			if err != nil {
				return err
			}
			namespaces := cfg.Namespaces
			if namespace != "" {
				if !cfg.Manages(namespace) {
					return &exitError{1, fmt.Errorf("namespace %s is not listed in the config's namespaces", namespace)}
				}
				namespaces = []string{namespace}
			}
			deps, err := cf.connect(version, log)
			if err != nil {
				return &exitError{1, err}
			}
			rels, err := deps.helm.ManagedReleases(cmd.Context(), namespaces)
			if err != nil && helmops.FailedNamespaces(err) == nil {
				return &exitError{1, err}
			}
			// Some namespaces could not be read: list the others, then fail.
			if perr := printRows(cmd.OutOrStdout(), output, listRows(cfg, rels, orphans, cf.defaultServiceAccount)); perr != nil {
				return &exitError{1, perr}
			}
			if err != nil {
				return &exitError{1, fmt.Errorf("the list is incomplete: %w", err)}
			}
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&path, "config", "", "path of the config file")
	cf.register(fs)
	fs.StringVarP(&output, "output", "o", "table", "output format: table or json")
	fs.StringVarP(&namespace, "namespace", "n", "", "only this managed namespace")
	fs.BoolVar(&orphans, "orphans", false, "only releases the config no longer wants")
	return cmd
}

func listRows(cfg *config.Config, rels []*format.Release, onlyOrphans bool, defaultServiceAccount string) []listedRelease {
	rows := []listedRelease{}
	for _, r := range rels {
		orphan := !plan.WantedBy(cfg, format.Record{Name: r.Name, Namespace: r.Namespace, Spec: r.Spec, ReleaseSpec: r.ReleaseSpec,
			ObjectNamespace: r.ObjectNamespace, ObjectName: r.ObjectName})
		if onlyOrphans && !orphan {
			continue
		}
		rows = append(rows, listedRelease{
			Namespace: r.Namespace, Release: r.Name, Spec: r.Spec, ReleaseSpec: r.ReleaseSpec, Object: r.TriggerObject().String(),
			Chart: r.ChartName, ChartVersion: r.ChartVersion, Revision: r.Revision, Status: string(r.Status),
			Updated: r.Updated.UTC(), Orphan: orphan,
		})
		// The identity plan would remove or change it as; the chart trust of
		// the release spec that wants it.
		row := &rows[len(rows)-1]
		spec := cfg.Specs[r.Spec]
		var rs *config.ReleaseSpec
		if spec != nil {
			rs = spec.ReleaseSpecs[r.ReleaseSpec]
		}
		row.ServiceAccount = config.RunsAs(spec, rs, defaultServiceAccount)
		if rs != nil && !orphan {
			row.ChartPinned, row.ChartVerified = rs.Chart.Pinned(), rs.Chart.Verify
		}
	}
	return rows
}
