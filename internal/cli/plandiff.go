package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/pflag"

	"github.com/autox-dev/autox/helmops"
	"github.com/autox-dev/autox/helmops/chartsource"
	"github.com/autox-dev/autox/internal/manifestdiff"
	"github.com/autox-dev/autox/internal/redact"
	"github.com/autox-dev/autox/triggers"
	"github.com/autox-dev/autox/triggers/plan"
)

// What `autox plan --diff` adds to the plan: for each release a step would
// change, the objects that change, as a reviewer pastes them into a pull
// request. The new side is rendered as the step's operation would render it
// (helmops.Render), the old side is the release's record; nothing is
// written. Secret data reads <redacted> (manifestdiff), and what the
// release spec's Secret sources set is masked everywhere (Step.Secrets).

// diffFlags are the flags of plan's chart fetching, as run's: --diff
// renders a repository chart, which the plan alone never fetches.
type diffFlags struct {
	cacheDir, repositoryConfig, registryConfig string
	indexRefresh                               time.Duration
}

func (f *diffFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.cacheDir, "cache-dir", defaultCacheDir(), "chart cache directory (with --diff, which fetches repository charts)")
	fs.StringVar(&f.repositoryConfig, "repository-config", "", "Helm repositories.yaml with chart repository credentials (with --diff)")
	fs.StringVar(&f.registryConfig, "registry-config", "", "docker config.json with OCI registry credentials (with --diff)")
	fs.DurationVar(&f.indexRefresh, "chart-index-refresh", 10*time.Minute, "how long a fetched repository index or resolved OCI tag is trusted (with --diff)")
}

// charts is the chart source of a plan with --diff: every kind of chart
// reference, as run loads it.
func (f *diffFlags) charts(cf *clusterFlags, deps *clusterDeps, log zerolog.Logger) (chartsource.ChartSource, error) {
	return chartsource.NewChartCache(chartsource.ChartCacheOptions{
		Dir: f.cacheDir, RepositoryConfig: f.repositoryConfig, RegistryConfig: f.registryConfig,
		Refresh: f.indexRefresh, Timeout: cf.helmTimeout, Keyrings: cf.keyrings(deps.client), Log: log,
	})
}

// releaseDiff is the diff of one step's release: its changed objects, or
// why they could not be told.
type releaseDiff struct {
	Changes []manifestdiff.Change `json:"changes"`
	Error   string                `json:"error,omitempty"`
}

// diffed says whether a step gets a diff: it changes the release's objects.
// An adoption changes only the record's labels.
func diffed(s plan.Step) bool {
	switch s.Action {
	case plan.ActionInstall, plan.ActionUpgrade, plan.ActionReinstall, plan.ActionUninstall, plan.ActionRollback:
		return true
	}
	return false
}

// diffSteps makes the diff of every step that changes a release's objects,
// by index in steps; the number that failed is returned too.
func diffSteps(ctx context.Context, rec *triggers.Reconciler, helm *helmops.Manager, steps []plan.Step) (map[int]*releaseDiff, int) {
	out := map[int]*releaseDiff{}
	failed := 0
	for i, s := range steps {
		if !diffed(s) {
			continue
		}
		changes, err := diffStep(ctx, rec, helm, s)
		d := &releaseDiff{Changes: changes}
		if err != nil {
			d.Error = s.Secrets.String(s.Hide.String(err.Error()))
			failed++
		}
		for j := range d.Changes {
			d.Changes[j].Object = s.Secrets.String(d.Changes[j].Object)
			d.Changes[j].Diff = maskLines(s.Secrets, d.Changes[j].Diff)
		}
		if d.Changes == nil {
			d.Changes = []manifestdiff.Change{}
		}
		out[i] = d
	}
	return out, failed
}

// maskLines is text with hide's secrets masked line by line: a secret that
// ends in a newline (a Secret key's whole content) must not take the
// diff's line ends with it. A multi-line secret is masked in each of its
// lines (redact hides those too).
func maskLines(hide *redact.Redactor, text string) string {
	lines := strings.SplitAfter(text, "\n")
	for i, l := range lines {
		body := strings.TrimSuffix(l, "\n")
		lines[i] = hide.String(body) + l[len(body):]
	}
	return strings.Join(lines, "")
}

// diffStep compares the release's manifest now with the one step s leaves.
func diffStep(ctx context.Context, rec *triggers.Reconciler, helm *helmops.Manager, s plan.Step) ([]manifestdiff.Change, error) {
	var from, to string
	var err error
	if s.Action != plan.ActionInstall && s.Revision > 0 {
		if from, err = helm.Recorded(ctx, s.Namespace, s.Release, s.Revision); err != nil {
			return nil, err
		}
	}
	switch s.Action {
	case plan.ActionUninstall:
	case plan.ActionRollback:
		if to, err = helm.Recorded(ctx, s.Namespace, s.Release, s.RollbackTo); err != nil {
			return nil, err
		}
	default:
		d, err := rec.Target(ctx, s)
		if err != nil {
			return nil, err
		}
		if to, err = helm.Render(ctx, d, s.Action == plan.ActionUpgrade); err != nil {
			return nil, err
		}
	}
	return manifestdiff.Compare(from, to)
}

// printDiffs prints the diffs after the plan's table: per release a header
// line, then its changed objects' unified diffs.
func printDiffs(w io.Writer, steps []plan.Step, diffs map[int]*releaseDiff) error {
	for i, s := range steps {
		d := diffs[i]
		if d == nil {
			continue
		}
		if _, err := fmt.Fprintf(w, "\n# %s release %s/%s (spec %s, release spec %s): %s\n", s.Action, s.Namespace, s.Release, s.Spec, s.ReleaseSpec, summary(d)); err != nil {
			return err
		}
		for _, c := range d.Changes {
			if _, err := io.WriteString(w, c.Diff); err != nil {
				return err
			}
		}
	}
	return nil
}

func summary(d *releaseDiff) string {
	switch {
	case d.Error != "":
		return "no diff: " + d.Error
	case len(d.Changes) == 1:
		return "1 object changes"
	default:
		return fmt.Sprintf("%d objects change", len(d.Changes))
	}
}

// stepsJSON is the plan as -o json prints it with --shards > 1, --diff or
// drift: each step as without (its fields in the same order), then its
// "shard", its "diff" when it changes a release's objects, and its "drift".
func stepsJSON(v planView) ([]json.RawMessage, error) {
	out := make([]json.RawMessage, 0, len(v.steps))
	for i, s := range v.steps {
		b, err := json.Marshal(s)
		if err != nil {
			return nil, err
		}
		var extra []any
		if v.shards.Sharded() {
			extra = append(extra, "shard", stepShard(v.shards, s))
		}
		if d := v.diffs[i]; d != nil {
			extra = append(extra, "diff", d)
		}
		if v.drifts != nil {
			extra = append(extra, "drift", v.drifts[i])
		}
		for j := 0; j < len(extra); j += 2 {
			vb, err := json.Marshal(extra[j+1])
			if err != nil {
				return nil, err
			}
			b = append(append(append(b[:len(b)-1:len(b)-1], fmt.Sprintf(`,%q:`, extra[j])...), vb...), '}')
		}
		out = append(out, b)
	}
	return out, nil
}
