package cli

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/helmops"
	"github.com/autox-dev/autox/internal/format"
	"github.com/autox-dev/autox/internal/shard"
	"github.com/autox-dev/autox/triggers"
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
	// Suspended says what suspends the release in the config: "spec",
	// "releaseSpec", or "" (not suspended).
	Suspended string `json:"suspended,omitempty"`
	// ServiceAccount is what the release's Helm operations run as, from
	// the config (config.RunsAs), "" for autox's own identity; ChartPinned
	// and ChartVerified say how far its release spec trusts its chart, and
	// ChartPlainHTTP that it is pulled without TLS.
	ServiceAccount string `json:"serviceAccount,omitempty"`
	ChartPinned    bool   `json:"chartPinned,omitempty"`
	ChartVerified  bool   `json:"chartVerified,omitempty"`
	ChartPlainHTTP bool   `json:"chartPlainHTTP,omitempty"`
	// Shard is the shard the release is in (from its labels), with
	// --shards > 1 only.
	Shard *int `json:"shard,omitempty"`
	// Drift is what --drift found (read-only), nil without it.
	Drift *releaseDrift `json:"drift,omitempty"`
}

func newListCommand(version string) *cobra.Command {
	var (
		cf                      clusterFlags
		path, output, namespace string
		orphans, withDrift      bool
		limit                   driftLimitFlags
	)
	cmd := &cobra.Command{
		Use:   "list --config FILE",
		Short: "List the releases autox manages in the config's namespaces and those it has recorded",
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
			deps, err := cf.connect(version, log)
			if err != nil {
				return &exitError{1, err}
			}
			// The config's namespaces and those the instance has recorded:
			// releases left in a namespace the config dropped are orphans.
			state := triggers.NewConfigState(cfg)
			var recordErr error
			if namespace == "" || !cfg.Manages(namespace) {
				_, recordErr = deps.rememberManaged(cmd.Context(), &cf, state, log)
			}
			namespaces := state.GCNamespaces()
			if namespace != "" {
				if !slices.Contains(namespaces, namespace) {
					return &exitError{1, errors.Join(fmt.Errorf("namespace %s is neither in the config's namespaces nor recorded as managed by instance %s", namespace, cf.instance), recordErr)}
				}
				namespaces = []string{namespace}
			}
			rels, err := deps.helm.ManagedReleases(cmd.Context(), namespaces)
			if err != nil && helmops.FailedNamespaces(err) == nil && helmops.FailedReleases(err) == nil {
				return &exitError{1, err}
			}
			// Some namespaces or releases could not be read: list the
			// others, then fail.
			rows := withShards(shard.Count(cf.shards), listRows(cfg, deps.helm.Instance(), rels, orphans, cf.defaultServiceAccount), rels)
			if withDrift {
				addDrift(cmd.Context(), limit.checker(deps.helm, nil), cfg, rows, rels)
			}
			if perr := printRows(cmd.OutOrStdout(), output, rows); perr != nil {
				return &exitError{1, perr}
			}
			if err = errors.Join(recordErr, err); err != nil {
				return &exitError{1, fmt.Errorf("the list is incomplete: %w", err)}
			}
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&path, "config", "", "path of the config file")
	cf.register(fs)
	fs.StringVarP(&output, "output", "o", "table", "output format: table or json")
	fs.StringVarP(&namespace, "namespace", "n", "", "only this namespace (one of the config's, or one recorded as managed)")
	fs.BoolVar(&orphans, "orphans", false, "only releases the config no longer wants")
	fs.BoolVar(&withDrift, "drift", false, "check each release's objects for drift (read-only, as drift warn mode: never corrects)")
	limit.register(fs)
	return cmd
}

// withShards sets the shard of every row with --shards > 1; rows and rels
// are in the same order, a row per release, unless only orphans are shown.
func withShards(n shard.Count, rows []listedRelease, rels []*format.Release) []listedRelease {
	if !n.Sharded() {
		return rows
	}
	byName := make(map[string]int, len(rels))
	for _, r := range rels {
		byName[r.Namespace+"/"+r.Name] = n.OfRecord(r.Record)
	}
	for i := range rows {
		s := byName[rows[i].Namespace+"/"+rows[i].Release]
		rows[i].Shard = &s
	}
	return rows
}

// listRows are the rows of rels; a release is an orphan when the config
// wants it neither as its labels say nor under the owner a rename hands it
// over to (plan.AdopterOf), which adopts it.
func listRows(cfg *config.Config, instance string, rels []*format.Release, onlyOrphans bool, defaultServiceAccount string) []listedRelease {
	rows := []listedRelease{}
	for _, r := range rels {
		adopter, handedOver := plan.AdopterOf(cfg, instance, r)
		orphan := !handedOver && !plan.WantedBy(cfg, r.Record)
		if onlyOrphans && !orphan {
			continue
		}
		rows = append(rows, listedRelease{
			Namespace: r.Namespace, Release: r.Name, Spec: r.Spec, ReleaseSpec: r.ReleaseSpec, Object: r.TriggerObject().String(),
			Chart: r.ChartName, ChartVersion: r.ChartVersion, Revision: r.Revision, Status: string(r.Status),
			Updated: r.Updated.UTC(), Orphan: orphan, Suspended: cfg.Specs[r.Spec].Suspended(r.ReleaseSpec),
		})
		// The identity plan would remove or change it as, and the chart
		// trust of the release spec that wants it: its adopter's, when a
		// rename hands it over.
		row := &rows[len(rows)-1]
		owner := format.Owner{Spec: r.Spec, ReleaseSpec: r.ReleaseSpec}
		if handedOver {
			owner = adopter
		}
		spec := cfg.Specs[owner.Spec]
		var rs *config.ReleaseSpec
		if spec != nil {
			rs = spec.ReleaseSpecs[owner.ReleaseSpec]
		}
		row.ServiceAccount = config.RunsAs(spec, rs, defaultServiceAccount)
		if rs != nil && !orphan {
			row.ChartPinned, row.ChartVerified, row.ChartPlainHTTP = rs.Chart.Pinned(), rs.Chart.Verify, rs.Chart.PlainHTTP
		}
	}
	return rows
}
