package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/autox-dev/autox/internal/testenv"
)

// createTriggers creates the n trigger Deployments, 16 at a time.
func createTriggers(ctx context.Context, cs kubernetes.Interface, n int) error {
	return createLabelled(ctx, cs, "t", n, map[string]string{"app.kubernetes.io/version": "1.0.0"})
}

// autoxRun writes a config file into work and returns it, the address of
// autox's http server and the arguments of `autox run` at default flags
// (--workers when set) on it.
func autoxRun(o options, cluster *testenv.Cluster, work, file, config string) (cfgPath, httpAddr string, args []string, err error) {
	cfgPath = filepath.Join(work, file)
	if err := os.WriteFile(cfgPath, []byte(config), 0o600); err != nil {
		return "", "", nil, err
	}
	if httpAddr, err = freeAddr(); err != nil {
		return "", "", nil, err
	}
	args = []string{"run", "--config", cfgPath, "--kubeconfig", cluster.Kubeconfig, "--leader-elect=false",
		"--http-addr", httpAddr, "--resync", o.resync.String()}
	if o.workers > 0 {
		args = append(args, "--workers", strconv.Itoa(o.workers))
	}
	if o.pageSize > 0 {
		args = append(args, "--list-page-size", strconv.FormatInt(o.pageSize, 10))
	}
	if o.driftPeriod > 0 {
		args = append(args, "--drift-period", o.driftPeriod.String())
	}
	if o.driftQPS > 0 {
		args = append(args, "--drift-qps", strconv.FormatFloat(o.driftQPS, 'f', -1, 64))
	}
	args = append(args, o.autoxArgs...)
	return cfgPath, httpAddr, args, nil
}

func helmVersion(root string) string {
	data, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		return "?"
	}
	for _, l := range strings.Split(string(data), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "helm.sh/helm/v4" {
			return f[1]
		}
	}
	return "?"
}

func deployment(i int, version string) *appsv1.Deployment {
	return testenv.DeploymentObject("bench", fmt.Sprintf("t%04d", i), map[string]string{"app.kubernetes.io/version": version})
}

func relabel(ctx context.Context, cs kubernetes.Interface, i int, version string) (time.Time, error) {
	d, err := cs.AppsV1().Deployments("bench").Get(ctx, fmt.Sprintf("t%04d", i), metav1.GetOptions{})
	if err != nil {
		return time.Time{}, err
	}
	d.Labels["app.kubernetes.io/version"] = version
	t0 := time.Now()
	_, err = cs.AppsV1().Deployments("bench").Update(ctx, d, metav1.UpdateOptions{})
	return t0, err
}

// configYAML is the fleet's config: n specs of releasesPerTrigger
// releases, each spec with drift mode drift ("": none).
func configYAML(n int, chart, drift string) string {
	var b strings.Builder
	b.WriteString("namespaces: [bench]\nspecs:\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "  t%04d:\n    trigger: {group: apps, version: v1, resource: deployments, name: t%04d, namespace: bench}\n%s    releaseSpecs:\n", i, i, driftLine(drift))
		for j := 0; j < releasesPerTrigger; j++ {
			fmt.Fprintf(&b, "      r%d: {chart: {path: %s}, values: {index: %d}}\n", j, chart, i*releasesPerTrigger+j)
		}
	}
	return b.String()
}

// driftLine is a spec's drift setting, or nothing.
func driftLine(mode string) string {
	if mode == "" {
		return ""
	}
	return "    drift: {mode: " + mode + "}\n"
}
