package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// planDriftConfig is driftConfig (the drift chart: a Deployment, a
// ConfigMap, a Secret of .Values.password and a token, a Job) in drift
// warn mode.
var planDriftConfig = strings.Replace(driftConfig, "{mode: correct}", "{mode: warn}", 1)

// TestPlanShowsDrift: with autox stopped, a Deployment scaled and a Secret
// edited behind its back, `autox plan` leaves the release unchanged and
// reports its drift (the scaled replicas, the Secret's data with its keys
// hidden) in the table and the JSON, never a Secret value in plain text or
// base64, old or new; every write the API server sees from it is a dry
// run. With --drift=false it makes no write at all and shows no drift.
// Once another Helm client has upgraded the release, plan does not check
// it (as the drift loop) and says why.
func TestPlanShowsDrift(t *testing.T) {
	t.Parallel() // a namespace and a Lease of its own
	e := newEnv(t)
	ctx := context.Background()
	e.Deployment("web", version("1.0.0"))
	if !strings.Contains(planDriftConfig, "{mode: warn}") {
		t.Fatalf("not in warn mode:\n%s", planDriftConfig)
	}
	config := e.WriteConfig(planDriftConfig)
	p := e.run(config)
	e.WaitRelease("web-drifty", "installed", deployedAt(1))
	p.Stop(patience)

	if _, err := cluster.Client.AppsV1().Deployments(e.NS).UpdateScale(ctx, "web-drifty",
		&autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: "web-drifty", Namespace: e.NS}, Spec: autoscalingv1.ScaleSpec{Replicas: 3}},
		metav1.UpdateOptions{FieldManager: "kubectl"}); err != nil {
		t.Fatal(err)
	}
	secret, err := cluster.Client.CoreV1().Secrets(e.NS).Get(ctx, "web-drifty", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	secret.Data["password"] = []byte("by-hand-s3cr3t")
	if _, err := cluster.Client.CoreV1().Secrets(e.NS).Update(ctx, secret, metav1.UpdateOptions{FieldManager: "kubectl-edit"}); err != nil {
		t.Fatal(err)
	}
	secrets := []string{"s3cr3t-e2e-drift", "chart-token", "by-hand-s3cr3t"}

	before := len(cluster.WritesSoFar(t, e.NS))
	jsonRun := e.cliRun(0, "plan", "--config", config, "-o", "json")
	table := e.cli(0, "plan", "--config", config)
	writes := cluster.WritesSoFar(t, e.NS)[before:]
	dryRuns := 0
	for _, w := range writes {
		if !w.DryRun {
			t.Errorf("plan wrote: %+v", w)
		}
		if w.Verb == "patch" {
			dryRuns++
		}
	}
	// Two plans, each a dry-run apply of the release's four objects.
	if dryRuns != 8 {
		t.Errorf("plan made %d dry-run patches, want 8: %+v", dryRuns, writes)
	}

	var steps []struct {
		Action, Release string
		Drift           *struct {
			State, Reason string
			Objects       []struct {
				Kind, Name string
				Missing    bool
				Paths      []string
			}
		}
	}
	if err := json.Unmarshal([]byte(jsonRun.Stdout()), &steps); err != nil {
		t.Fatalf("plan -o json: %v\n%s", err, jsonRun.Stdout())
	}
	if len(steps) != 1 || steps[0].Action != "unchanged" || steps[0].Drift == nil || steps[0].Drift.State != "drifted" {
		t.Fatalf("plan -o json:\n%s", jsonRun.Stdout())
	}
	paths := map[string]string{}
	for _, o := range steps[0].Drift.Objects {
		paths[o.Kind+"/"+o.Name] = strings.Join(o.Paths, ",")
	}
	if paths["Deployment/web-drifty"] != "/spec/replicas" || paths["Secret/web-drifty"] != "/data/(hidden)" || len(paths) != 2 {
		t.Errorf("drifted objects: %v", paths)
	}
	if !strings.Contains(table, "DRIFT") || !strings.Contains(table, " drifted: ") ||
		!strings.Contains(table, "Deployment.apps/"+e.NS+"/web-drifty: /spec/replicas") || !strings.Contains(table, "Secret/"+e.NS+"/web-drifty: /data/(hidden)") {
		t.Errorf("plan table:\n%s", table)
	}
	for _, out := range []string{jsonRun.Output(), table} {
		for _, s := range secrets {
			for _, form := range []string{s, base64.StdEncoding.EncodeToString([]byte(s))} {
				if strings.Contains(out, form) {
					t.Errorf("plan shows %q:\n%s", form, out)
				}
			}
		}
	}
	if strings.Contains(jsonRun.Stdout(), "password") || strings.Contains(jsonRun.Stdout(), "token") {
		t.Errorf("plan names the Secret's keys:\n%s", jsonRun.Stdout())
	}

	// --drift=false: no drift request, no DRIFT column, no drift field.
	before = len(cluster.WritesSoFar(t, e.NS))
	off := e.cliStdout(0, "plan", "--config", config, "-o", "json", "--drift=false")
	offTable := e.cli(0, "plan", "--config", config, "--drift=false")
	if ws := cluster.WritesSoFar(t, e.NS)[before:]; len(ws) != 0 {
		t.Errorf("plan --drift=false wrote: %+v", ws)
	}
	if strings.Contains(off, `"drift"`) || strings.Contains(offTable, "DRIFT") || strings.Contains(offTable, "drifted") {
		t.Errorf("plan --drift=false shows drift:\n%s\n%s", off, offTable)
	}
	if r := e.Release("web-drifty"); r.Revision != 1 {
		t.Errorf("revision %d after the plans, want 1", r.Revision)
	}

	// Another Helm client upgrades it (same chart and values): the drift
	// loop does not check a revision autox did not write, nor does plan.
	cluster.UpgradeReusingValues(t, e.NS, "web-drifty", filepath.Join(e.Charts, "drift"))
	before = len(cluster.WritesSoFar(t, e.NS))
	if err := json.Unmarshal([]byte(e.cliStdout(0, "plan", "--config", config, "-o", "json")), &steps); err != nil {
		t.Fatal(err)
	}
	if ws := cluster.WritesSoFar(t, e.NS)[before:]; len(ws) != 0 {
		t.Errorf("plan of a revision another Helm client wrote made writes: %+v", ws)
	}
	if len(steps) != 1 || steps[0].Action != "unchanged" || steps[0].Drift == nil || steps[0].Drift.State != "unchecked" ||
		!strings.Contains(steps[0].Drift.Reason, "another Helm client") {
		t.Errorf("plan of a revision another Helm client wrote: %+v", steps)
	}
}
