package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/autox-dev/autox/internal/format"
	"github.com/autox-dev/autox/internal/testenv"
)

const driftConfig = `
namespaces: [{{.NS}}]
specs:
  web:
    trigger: {group: apps, version: v1, resource: deployments, name: web, namespace: {{.NS}}}
    releaseSpecs:
      drifty:
        chart: {path: {{.Charts}}/drift}
        values: {password: s3cr3t-e2e-drift}
        drift: {mode: correct}
`

// TestDriftCorrected: the built binary puts back a scaled Deployment of a
// release in correct mode, through the check its watch triggers (the
// periodic check is an hour away), with no new revision and a
// DriftCorrected Event on the trigger that holds no value.
func TestDriftCorrected(t *testing.T) {
	e := newEnv(t)
	e.Deployment("web", version("1.0.0"))
	p := e.run(e.WriteConfig(driftConfig), "--drift-period", "1h")
	e.WaitRelease("web-drifty", "installed", deployedAt(1))
	// The loop learns of the release at its first refresh after the
	// install: wait until its first check would see a change.
	e.waitLog(p, `"message":"pass complete"`)
	scale := func(n int32) {
		if _, err := cluster.Client.AppsV1().Deployments(e.NS).UpdateScale(context.Background(), "web-drifty",
			&autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: "web-drifty", Namespace: e.NS}, Spec: autoscalingv1.ScaleSpec{Replicas: n}},
			metav1.UpdateOptions{FieldManager: "kubectl"}); err != nil {
			t.Fatal(err)
		}
	}
	replicas := func() int32 {
		d, err := cluster.Client.AppsV1().Deployments(e.NS).Get(context.Background(), "web-drifty", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return *d.Spec.Replicas
	}
	// Scale until the loop watches: a scale before its watch started is
	// seen by its periodic check only (an hour away). Each scale (to
	// another count, a new generation the watch sees) is given a few
	// seconds to be put back and its Event to be sent (asynchronously): a
	// scale at every poll would race the correction's conditional write
	// and the Event on a loaded machine.
	n := int32(2)
	var scaled time.Time
	testenv.Eventually(t, patience, "the scaled Deployment put back", func() (bool, error) {
		reasons, _ := e.events("web")
		if reasons["DriftCorrected"] && replicas() == 1 {
			return true, nil
		}
		if time.Since(scaled) < 5*time.Second {
			return false, nil
		}
		n = 5 - n // 2, 3, 2, ...
		scale(n)
		scaled = time.Now()
		return false, nil
	})
	_, text := e.events("web")
	if strings.Contains(text, "s3cr3t") || !strings.Contains(text, "/spec/replicas") {
		t.Errorf("Events:\n%s", text)
	}
	e.WaitRelease("web-drifty", "still revision 1", func(r *format.Release) bool { return r.Revision == 1 && r.Status == "deployed" })
	if strings.Contains(p.Output(), "s3cr3t") {
		t.Error("the log holds the Secret's value")
	}
}
