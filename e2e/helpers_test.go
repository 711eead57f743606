package e2e

import (
	"context"
	"github.com/autox-dev/autox/helmops"
	"regexp"
	"strings"

	"os"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	"github.com/autox-dev/autox/config"
)

func chartRef(name string) config.Chart { return config.Chart{Path: name} }

// installUnlabelled installs a release the way `helm install` does: without
// autox's labels.
func installUnlabelled(e *env, name string, ch *chart.Chart) error {
	cfg := &action.Configuration{}
	flags := genericclioptions.NewConfigFlags(false)
	kc, ns := cluster.Kubeconfig, e.ns
	flags.KubeConfig, flags.Namespace = &kc, &ns
	if err := cfg.Init(flags, ns, "secret", func(string, ...interface{}) {}); err != nil {
		return err
	}
	in := action.NewInstall(cfg)
	in.ReleaseName, in.Namespace = name, ns
	_, err := in.Run(ch, map[string]interface{}{"greeting": "mine"})
	return err
}

func removeFile(p string) error { return os.Remove(p) }

func helmLoad(e *env, name string) (*chart.Chart, error) {
	return helmops.LocalCharts{}.Load(context.Background(), chartRef(name), e.charts)
}

// grepLines returns the lines of out matching the regular expression.
func grepLines(out, expr string) string {
	re := regexp.MustCompile(expr)
	var keep []string
	for _, l := range strings.Split(out, "\n") {
		if re.MatchString(l) {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}
