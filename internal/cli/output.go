package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/internal/shard"
	"github.com/autox-dev/autox/triggers/plan"
)

// configError prints a config's problems one per line on stderr and returns
// the exit-1 error.
func configError(cmd *cobra.Command, path string, err error) error {
	var cerr *config.Error
	if errors.As(err, &cerr) {
		for _, l := range cerr.Lines() {
			fmt.Fprintf(cmd.ErrOrStderr(), "%s: %s\n", path, l)
		}
		return &exitError{1, fmt.Errorf("%s is not valid: %d problem(s)", path, len(cerr.Problems))}
	}
	return &exitError{1, err}
}

// checkOutput validates the -o flag shared by plan and list.
func checkOutput(output string) error {
	if output != "table" && output != "json" {
		return &exitError{1, fmt.Errorf("invalid -o %q: use table or json", output)}
	}
	return nil
}

// writeJSON prints v as indented JSON, the -o json of plan and list.
func writeJSON(w io.Writer, v interface{}) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// printSteps prints the plan's steps alone: a table, or with -o json an
// array (never null). With --shards > 1 every step says its shard (a SHARD
// column, a shard field).
func printSteps(w io.Writer, output string, steps []plan.Step, shards shard.Count) error {
	return printPlan(w, output, planView{steps: steps, shards: shards})
}

// printStepsTable prints the plan's table: a SHARD column first with
// --shards > 1, a DRIFT column last unless --drift=false.
func printStepsTable(w io.Writer, v planView) error {
	header := "ACTION\tSPEC\tRELEASE SPEC\tOBJECT\tRELEASE\tNAMESPACE\tRUNS AS\tCHART TRUST\tREASON"
	if v.shards.Sharded() {
		header = "SHARD\t" + header
	}
	if v.drifts != nil {
		header += "\tDRIFT"
	}
	tw := newTable(w, header)
	for i, s := range v.steps {
		if v.shards.Sharded() {
			fmt.Fprintf(tw, "%d\t", stepShard(v.shards, s))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s", s.Action, s.Spec, s.ReleaseSpec, orDash(s.Object), s.Release, s.Namespace,
			runsAs(s.ServiceAccount), chartTrust(s.ChartPinned, s.ChartVerified, s.ChartPlainHTTP), s.Reason)
		if v.drifts != nil {
			fmt.Fprintf(tw, "\t%s", driftColumn(v.drifts[i]))
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

// printRows prints the rows of list: a table, or with -o json an array.
func printRows(w io.Writer, output string, rows []listedRelease) error {
	if output == "json" {
		return writeJSON(w, rows)
	}
	header := "NAMESPACE\tRELEASE\tSPEC\tRELEASE SPEC\tOBJECT\tCHART\tVERSION\tREVISION\tSTATUS\tUPDATED\tORPHAN\tRUNS AS\tCHART TRUST\tSUSPENDED"
	sharded := len(rows) > 0 && rows[0].Shard != nil
	drifts := len(rows) > 0 && rows[0].Drift != nil
	if drifts {
		header += "\tDRIFT"
	}
	if sharded {
		header = "SHARD\t" + header
	}
	tw := newTable(w, header)
	for _, r := range rows {
		if sharded {
			fmt.Fprintf(tw, "%d\t", *r.Shard)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%v\t%s\t%s\t%s", r.Namespace, r.Release, r.Spec, r.ReleaseSpec, orDash(r.Object),
			r.Chart, r.ChartVersion, r.Revision, r.Status, r.Updated.Format(time.RFC3339), r.Orphan,
			runsAs(r.ServiceAccount), chartTrust(r.ChartPinned, r.ChartVerified, r.ChartPlainHTTP), orDash(r.Suspended))
		if drifts {
			fmt.Fprintf(tw, "\t%s", driftColumn(r.Drift))
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

// runsAs shows the identity a release's Helm operations run as: a service
// account of the row's namespace, or autox's own.
func runsAs(serviceAccount string) string {
	if serviceAccount == "" {
		return "autox"
	}
	return "serviceaccount/" + serviceAccount
}

// chartTrust shows whether a chart is pinned by a digest and verified, and
// pulled without TLS.
func chartTrust(pinned, verified, plainHTTP bool) string {
	trust := config.Trust(pinned, verified)
	if plainHTTP {
		// Without TLS, only a pin or a signature vouches for the content.
		trust = strings.TrimPrefix(trust+",plain-http", ",")
	}
	return orDash(trust)
}

// orDash shows an empty column as "-", so columns stay aligned for the eye.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// newTable starts a table of tab-separated columns under header; the caller
// writes the rows and flushes it.
func newTable(w io.Writer, header string) *tabwriter.Writer {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, header)
	return tw
}
