// Command demo shows autox at work on a local control plane: a Deployment
// labelled with a version gets its experiment release, a new version upgrades
// it, removing the label uninstalls it. Run it with scripts/demo.sh.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/autox-dev/autox/internal/testenv"
)

func main() {
	keep := flag.Bool("keep", false, "leave the cluster and autox running until Ctrl-C")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := demo(ctx, *keep); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "demo failed:", err)
		os.Exit(1)
	}
}

func say(format string, args ...interface{}) {
	fmt.Printf("\n==> "+format+"\n", args...)
}

func demo(ctx context.Context, keep bool) error {
	root, err := testenv.ModuleRoot()
	if err != nil {
		return err
	}
	say("building autox and the local control plane (the first build of kube-apiserver takes several minutes)")
	work, err := os.MkdirTemp("", "autox-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	bin, err := testenv.BuildAutox(work, "demo", testenv.Plain)
	if err != nil {
		return err
	}

	say("starting kube-apiserver and etcd")
	cluster, err := testenv.Start()
	if err != nil {
		return err
	}
	defer func() {
		say("stopping kube-apiserver and etcd")
		if err := cluster.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stop control plane:", err)
		}
	}()
	say("kubeconfig: %s  (try: KUBECONFIG=%s kubectl get deploy,cm,secrets)", cluster.Kubeconfig, cluster.Kubeconfig)

	deployments := cluster.Client.AppsV1().Deployments("default")
	if _, err := deployments.Create(ctx, httpbin("1.0.0"), metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create the demo Deployment: %w", err)
	}
	say("created Deployment default/httpbin with app.kubernetes.io/version=1.0.0")

	config := filepath.Join(root, "testdata", "demo", "config.yaml")
	logPath := filepath.Join(work, "autox.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logFile.Close()
	run := exec.Command(bin, "run", "--config", config, "--kubeconfig", cluster.Kubeconfig, "--http-addr", "127.0.0.1:0",
		"--leader-elect=false", "--resync", "10s", "--log-format", "console")
	run.Stdout, run.Stderr = logFile, logFile
	if err := run.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- run.Wait() }()
	defer func() {
		say("stopping autox (pid %d)", run.Process.Pid)
		_ = run.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(time.Minute):
			_ = run.Process.Kill()
			<-exited
		}
	}()
	say("autox runs as pid %d with %s; its log: %s", run.Process.Pid, config, logPath)

	list := func() error {
		out, err := exec.CommandContext(ctx, bin, "list", "--config", config, "--kubeconfig", cluster.Kubeconfig).CombinedOutput()
		fmt.Print(string(out))
		return err
	}
	waitFor := func(what string, cond func(rows string) bool) error {
		deadline := time.Now().Add(2 * time.Minute)
		for {
			out, err := exec.CommandContext(ctx, bin, "list", "--config", config, "--kubeconfig", cluster.Kubeconfig, "-o", "json").Output()
			if err == nil && cond(string(out)) {
				return list()
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case err := <-exited:
				return fmt.Errorf("autox exited (%v); see %s", err, logPath)
			case <-time.After(300 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("timed out waiting for %s; see %s", what, logPath)
			}
		}
	}
	relabel := func(labels map[string]string) error {
		d, err := deployments.Get(ctx, "httpbin", metav1.GetOptions{})
		if err != nil {
			return err
		}
		d.Labels = labels
		_, err = deployments.Update(ctx, d, metav1.UpdateOptions{})
		return err
	}

	say("waiting for autox to install the experiment release")
	if err := waitFor("the install", contains(`"revision": 1`, `"status": "deployed"`)); err != nil {
		return err
	}

	say("relabelling the Deployment to app.kubernetes.io/version=2.0.0: the release is upgraded")
	if err := relabel(map[string]string{"app.kubernetes.io/version": "2.0.0"}); err != nil {
		return err
	}
	if err := waitFor("the upgrade", contains(`"revision": 2`, `"status": "deployed"`)); err != nil {
		return err
	}

	say("removing the label: the release is uninstalled")
	if err := relabel(nil); err != nil {
		return err
	}
	if err := waitFor("the uninstall", func(s string) bool { return s == "[]\n" }); err != nil {
		return err
	}

	if keep {
		say("--keep: the cluster and autox keep running; relabel the Deployment with kubectl and watch. Ctrl-C stops everything.")
		select {
		case <-ctx.Done():
		case err := <-exited:
			return fmt.Errorf("autox exited (%v); see %s", err, logPath)
		}
		return nil
	}
	say("demo done")
	return nil
}

func contains(parts ...string) func(string) bool {
	return func(s string) bool {
		for _, p := range parts {
			if !strings.Contains(s, p) {
				return false
			}
		}
		return true
	}
}

func httpbin(version string) *appsv1.Deployment {
	return testenv.DeploymentObject("default", "httpbin", map[string]string{"app.kubernetes.io/version": version})
}
