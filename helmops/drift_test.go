package helmops

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/release/common"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/internal/drift"
	"github.com/autox-dev/autox/internal/leader"
)

// The values of the drift chart's Secret: never in any output.
const driftPassword = "s3cr3t-drift-password"

// driftScene installs the drift chart as release "d" in a new namespace
// and returns the Manager, the namespace and the record's resourceVersion.
func driftScene(t *testing.T) (*Manager, string) {
	t.Helper()
	m := newManager(t, DriverSecret)
	ns := cluster.Namespace(t)
	if rev, err := m.Install(context.Background(), desired(t, ns, "d", "charts/drift", map[string]interface{}{"password": driftPassword})); err != nil || rev != 1 {
		t.Fatalf("Install = %d, %v", rev, err)
	}
	return m, ns
}

func recordVersion(t *testing.T, ns string) string {
	t.Helper()
	s, err := cluster.Client.CoreV1().Secrets(ns).Get(context.Background(), "sh.helm.release.v1.d.v1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s.ResourceVersion
}

func scale(t *testing.T, ns string, replicas int32) {
	t.Helper()
	if _, err := cluster.Client.AppsV1().Deployments(ns).UpdateScale(context.Background(), "d",
		&autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: "d", Namespace: ns}, Spec: autoscalingv1.ScaleSpec{Replicas: replicas}},
		metav1.UpdateOptions{FieldManager: "kubectl"}); err != nil {
		t.Fatal(err)
	}
}

// auditedWrites counts the writes (not dry runs) in namespace ns so far.
func auditedWrites(t *testing.T, ns string) int {
	t.Helper()
	n := 0
	for _, w := range cluster.WritesSoFar(t, ns) {
		if !w.DryRun && w.Verb != "get" && w.Verb != "list" && w.Verb != "watch" {
			n++
		}
	}
	return n
}

func deployment(t *testing.T, ns string) *appsv1.Deployment {
	t.Helper()
	d, err := cluster.Client.AppsV1().Deployments(ns).Get(context.Background(), "d", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func checkDrift(t *testing.T, c *DriftChecker, ns string, policy *config.Drift, suspended bool) *DriftReport {
	t.Helper()
	rep, err := c.Check(context.Background(), DriftTarget{Namespace: ns, Name: "d", Revision: 1, Policy: policy, Suspended: suspended})
	if err != nil {
		t.Fatal(err)
	}
	js, _ := json.Marshal(rep)
	text := string(js) + fmt.Sprint(rep)
	for _, o := range rep.Objects {
		text += fmt.Sprint(o.CheckErr, o.CorrectErr)
	}
	if strings.Contains(text, driftPassword) || strings.Contains(text, "czNjcjN0") {
		t.Errorf("the report holds the Secret's data: %s", text)
	}
	return rep
}

func object(t *testing.T, rep *DriftReport, kind string) ObjectDrift {
	t.Helper()
	for _, o := range rep.Objects {
		if o.Object.Kind == kind {
			return o
		}
	}
	t.Fatalf("no %s in the report: %+v", kind, rep)
	return ObjectDrift{}
}

// onlyDrifted fails unless every object of rep was compared and only those
// of kinds drifted.
func onlyDrifted(t *testing.T, rep *DriftReport, kinds ...string) {
	t.Helper()
	want := map[string]bool{}
	for _, k := range kinds {
		want[k] = true
	}
	if len(rep.Objects) != 4 {
		t.Errorf("%d objects checked, want 4", len(rep.Objects))
	}
	for _, o := range rep.Objects {
		if o.CheckErr != nil {
			t.Errorf("%s: %v", o.Object, o.CheckErr)
		}
		if o.Result.Drifted() != want[o.Object.Kind] {
			t.Errorf("%s drifted = %v (fields %+v, missing %v)", o.Object, o.Result.Drifted(), o.Fields, o.Missing)
		}
	}
}

var (
	warn    = &config.Drift{Mode: config.DriftWarn}
	correct = &config.Drift{Mode: config.DriftCorrect}
)

// TestDriftScaled: a Deployment scaled behind autox's back is reported in
// warn and left as it is, and put back in correct, without a Helm write.
func TestDriftScaled(t *testing.T) {
	m, ns := driftScene(t)
	c := m.NewDriftChecker(DriftOptions{})
	onlyDrifted(t, checkDrift(t, c, ns, warn, false))
	rv := recordVersion(t, ns)

	scale(t, ns, 3)
	before := auditedWrites(t, ns)
	rep := checkDrift(t, c, ns, warn, false)
	if after := auditedWrites(t, ns); after != before {
		t.Errorf("a check in warn wrote: %d writes in the namespace, were %d", after, before)
	}
	onlyDrifted(t, rep, "Deployment")
	d := object(t, rep, "Deployment")
	if len(d.Fields) != 1 || d.Fields[0].Path != "/spec/replicas" || d.Fields[0].State != drift.Drifted || strings.Join(d.Fields[0].Managers, ",") != "kubectl" {
		t.Errorf("fields = %+v", d.Fields)
	}
	if d.Corrected || d.Correction != nil || d.NotCorrected != drift.ReasonWarn || *deployment(t, ns).Spec.Replicas != 3 {
		t.Errorf("warn corrected: %+v", d)
	}

	rep = checkDrift(t, c, ns, correct, false)
	if d := object(t, rep, "Deployment"); !d.Corrected || d.CorrectErr != nil {
		t.Fatalf("not corrected: %+v", d)
	}
	if r := *deployment(t, ns).Spec.Replicas; r != 1 {
		t.Errorf("replicas = %d after the correction", r)
	}
	onlyDrifted(t, checkDrift(t, c, ns, correct, false))
	if got := recordVersion(t, ns); got != rv {
		t.Errorf("the release record changed: %s, was %s", got, rv)
	}
	if r, err := m.Lookup(context.Background(), ns, "d"); err != nil || r.Revision != 1 || r.Status != common.StatusDeployed {
		t.Errorf("release = %+v, %v; want revision 1 deployed", r, err)
	}
}

// TestDriftIgnoreAndSibling: an ignored field stays as someone set it, a
// sibling field of the same object is put back.
func TestDriftIgnoreAndSibling(t *testing.T) {
	m, ns := driftScene(t)
	c := m.NewDriftChecker(DriftOptions{})
	scale(t, ns, 2)
	patch := []byte(`{"metadata":{"annotations":{"note":"edited"}}}`)
	if _, err := cluster.Client.AppsV1().Deployments(ns).Patch(context.Background(), "d", types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "kubectl-edit"}); err != nil {
		t.Fatal(err)
	}
	policy := &config.Drift{Mode: config.DriftCorrect, Ignore: []config.DriftIgnore{{Paths: []string{"/spec/replicas"}, Target: &config.DriftTarget{Group: "apps", Kind: "Deployment"}}}}
	rep := checkDrift(t, c, ns, policy, false)
	d := object(t, rep, "Deployment")
	if !d.Corrected || len(d.Fields) != 1 || d.Fields[0].Path != "/metadata/annotations/note" {
		t.Fatalf("deployment: %+v", d)
	}
	got := deployment(t, ns)
	if *got.Spec.Replicas != 2 || got.Annotations["note"] != "chart" {
		t.Errorf("replicas %d (want the ignored 2), note %q (want chart)", *got.Spec.Replicas, got.Annotations["note"])
	}
}

// TestDriftMissing: a deleted object is created again in correct; a
// deleted Job never is (it would run again).
func TestDriftMissing(t *testing.T) {
	m, ns := driftScene(t)
	c := m.NewDriftChecker(DriftOptions{})
	ctx := context.Background()
	if err := cluster.Client.CoreV1().ConfigMaps(ns).Delete(ctx, "d", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	bg := metav1.DeletePropagationBackground
	if err := cluster.Client.BatchV1().Jobs(ns).Delete(ctx, "d", metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil {
		t.Fatal(err)
	}
	rep := checkDrift(t, c, ns, warn, false)
	onlyDrifted(t, rep, "ConfigMap", "Job")
	if _, err := cluster.Client.CoreV1().ConfigMaps(ns).Get(ctx, "d", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("warn re-created the ConfigMap: %v", err)
	}
	rep = checkDrift(t, c, ns, correct, false)
	if cm := object(t, rep, "ConfigMap"); !cm.Missing || !cm.Corrected {
		t.Errorf("configmap: %+v", cm)
	}
	if j := object(t, rep, "Job"); !j.Missing || j.Corrected || j.NotCorrected != drift.ReasonKind {
		t.Errorf("job: %+v", j)
	}
	cm, err := cluster.Client.CoreV1().ConfigMaps(ns).Get(ctx, "d", metav1.GetOptions{})
	if err != nil || cm.Data["greeting"] != "hello" || cm.Annotations["meta.helm.sh/release-name"] != "d" {
		t.Errorf("re-created configmap %+v, %v", cm, err)
	}
	if _, err := cluster.Client.BatchV1().Jobs(ns).Get(ctx, "d", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the Job was created again: %v", err)
	}
	onlyDrifted(t, checkDrift(t, c, ns, correct, false), "Job")
}

// TestDriftSecret: a Secret's drift is reported, put back, and neither its
// data (checkDrift checks every report) nor its keys are in any report.
func TestDriftSecret(t *testing.T) {
	m, ns := driftScene(t)
	c := m.NewDriftChecker(DriftOptions{})
	ctx := context.Background()
	s, err := cluster.Client.CoreV1().Secrets(ns).Get(ctx, "d", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.Data["password"] = []byte("changed-by-hand")
	s.Data["token"] = []byte("changed-token")
	if _, err := cluster.Client.CoreV1().Secrets(ns).Update(ctx, s, metav1.UpdateOptions{FieldManager: "kubectl-edit"}); err != nil {
		t.Fatal(err)
	}
	rep := checkDrift(t, c, ns, warn, false)
	// stringData in the chart is compared as the data it becomes.
	if o := object(t, rep, "Secret"); len(o.Fields) != 2 || o.Fields[0].Path != "/data/"+drift.SecretKeyHidden || o.Fields[1].Path != "/data/"+drift.SecretKeyHidden {
		t.Errorf("secret: %+v", o.Fields)
	}
	if js, _ := json.Marshal(rep); strings.Contains(string(js), "token") || strings.Contains(string(js), "password") {
		t.Errorf("the report names the Secret's keys: %s", js)
	}
	checkDrift(t, c, ns, correct, false)
	if s, err = cluster.Client.CoreV1().Secrets(ns).Get(ctx, "d", metav1.GetOptions{}); err != nil || string(s.Data["password"]) != driftPassword || string(s.Data["token"]) != "chart-token" {
		t.Errorf("the Secret was not put back: %v", err)
	}
	onlyDrifted(t, checkDrift(t, c, ns, correct, false))
}

// TestDriftSuspended: a suspended release is reported and never written.
func TestDriftSuspended(t *testing.T) {
	m, ns := driftScene(t)
	c := m.NewDriftChecker(DriftOptions{})
	scale(t, ns, 3)
	if err := cluster.Client.CoreV1().ConfigMaps(ns).Delete(context.Background(), "d", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	rep := checkDrift(t, c, ns, correct, true)
	onlyDrifted(t, rep, "Deployment", "ConfigMap")
	for _, o := range rep.Objects {
		if o.Corrected || (o.Result.Drifted() && o.NotCorrected != drift.ReasonSuspended) {
			t.Errorf("%s: %+v", o.Object, o)
		}
	}
	if r := *deployment(t, ns).Spec.Replicas; r != 3 {
		t.Errorf("replicas = %d", r)
	}
	if _, err := cluster.Client.CoreV1().ConfigMaps(ns).Get(context.Background(), "d", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("a suspended release's ConfigMap was created: %v", err)
	}
}

// TestDriftForbidden: an account that may read but not patch fails each
// object's dry run; the check reports it, returns no error, writes
// nothing, and the release stays deployed.
func TestDriftForbidden(t *testing.T) {
	m, ns := driftScene(t)
	read := []string{"get", "list", "watch"}
	cluster.ServiceAccount(t, ns, "reader", []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps", "secrets"}, Verbs: read},
		{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: read},
		{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: read},
	})
	scale(t, ns, 3)
	c := m.NewDriftChecker(DriftOptions{})
	rep, err := c.Check(context.Background(), DriftTarget{Namespace: ns, Name: "d", Revision: 1, Policy: correct, ServiceAccount: ServiceAccount{Namespace: ns, Name: "reader"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Failed()) != 4 {
		t.Errorf("%d objects failed, want 4: %+v", len(rep.Failed()), rep)
	}
	for _, o := range rep.Failed() {
		if !apierrors.IsForbidden(o.CheckErr) || o.Corrected {
			t.Errorf("%s: %v", o.Object, o.CheckErr)
		}
		if o.Object.Kind == "Secret" && strings.Contains(o.CheckErr.Error(), "reader") {
			t.Errorf("a Secret's error is shown: %v", o.CheckErr)
		}
	}
	if r := *deployment(t, ns).Spec.Replicas; r != 3 {
		t.Errorf("replicas = %d", r)
	}
	if r, err := m.Lookup(context.Background(), ns, "d"); err != nil || r.Status != common.StatusDeployed {
		t.Errorf("release = %+v, %v", r, err)
	}
}

// TestDriftPrecondition: a correction of an object changed since it was
// read is refused with a Conflict, not written over the change.
func TestDriftPrecondition(t *testing.T) {
	m, ns := driftScene(t)
	c := m.NewDriftChecker(DriftOptions{})
	scale(t, ns, 3)
	onlyDrifted(t, checkDrift(t, c, ns, warn, false), "Deployment")
	// The correction as it would have been made of the object read then.
	cl, err := c.clientsFor(ServiceAccount{})
	if err != nil {
		t.Fatal(err)
	}
	rec, _, err := c.record(context.Background(), cl, DriftTarget{Namespace: ns, Name: "d", Revision: 1})
	if err != nil {
		t.Fatal(err)
	}
	objs, err := manifestObjects(rec.manifest, DriftTarget{Namespace: ns, Name: "d"})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if o.GetKind() != "Deployment" {
			continue
		}
		ri, err := c.resource(cl, o, ns)
		if err != nil {
			t.Fatal(err)
		}
		live, err := ri.Get(context.Background(), "d", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		dry, err := ri.Apply(context.Background(), "d", o, metav1.ApplyOptions{FieldManager: "autox", Force: true, DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			t.Fatal(err)
		}
		res, err := drift.Check(drift.Input{Release: drift.Release{Namespace: ns, Name: "d"}, Desired: o, DryRun: dry, Live: live, Mode: config.DriftCorrect, Now: time.Now()})
		if err != nil || res.Correction == nil {
			t.Fatalf("%+v, %v", res, err)
		}
		scale(t, ns, 4) // changed meanwhile
		_, err = ri.Patch(context.Background(), "d", types.JSONPatchType, res.Correction.Patch, metav1.PatchOptions{FieldManager: "autox"})
		if !apierrors.IsConflict(err) {
			t.Errorf("patch of a changed object: %v, want a Conflict", err)
		}
		if r := *deployment(t, ns).Spec.Replicas; r != 4 {
			t.Errorf("replicas = %d, want 4 (the later change)", r)
		}
	}
}

// TestDriftFenced: once the leadership term has ended, no correction
// leaves the process.
func TestDriftFenced(t *testing.T) {
	_, ns := driftScene(t)
	term := leader.NewTerm(nil)
	m, err := New(withClients(t, Options{RESTConfig: term.RESTConfig(cluster.Config), Timeout: time.Minute}))
	if err != nil {
		t.Fatal(err)
	}
	c := m.NewDriftChecker(DriftOptions{})
	scale(t, ns, 3)
	term.End()
	rep := checkDrift(t, c, ns, correct, false)
	for _, o := range rep.Objects {
		if o.Corrected || (o.CheckErr != nil && !errors.Is(o.CheckErr, leader.ErrFenced)) {
			t.Errorf("%s: %+v", o.Object, o)
		}
	}
	if r := *deployment(t, ns).Spec.Replicas; r != 3 {
		t.Errorf("replicas = %d after the term", r)
	}
}

// TestDriftUnstable: a webhook that sets a field the chart sets to a new
// value on every write makes it differ on each check although autox wrote
// it last: reported unstable, never corrected, so no loop of writes.
func TestDriftUnstable(t *testing.T) {
	m := newManager(t, DriverSecret)
	ns := cluster.Namespace(t)
	mu := cluster.MutateAnnotation(t, ns, "note")
	if _, err := m.Install(context.Background(), desired(t, ns, "d", "charts/drift", map[string]interface{}{"password": driftPassword})); err != nil {
		t.Fatal(err)
	}
	c := m.NewDriftChecker(DriftOptions{})
	before := deployment(t, ns).ResourceVersion
	for i := 0; i < 2; i++ {
		rep := checkDrift(t, c, ns, correct, false)
		onlyDrifted(t, rep, "Deployment")
		d := object(t, rep, "Deployment")
		if len(d.Fields) != 1 || d.Fields[0].Path != "/metadata/annotations/note" || d.Fields[0].State != drift.Unstable || d.Corrected || d.Correction != nil {
			t.Errorf("check %d: %+v", i, d)
		}
	}
	if after := deployment(t, ns).ResourceVersion; after != before {
		t.Errorf("the Deployment was written (resourceVersion %s, was %s)", after, before)
	}
	if mu.Mutated() < 3 {
		t.Errorf("the webhook mutated %d admissions, want the install's and each dry run's", mu.Mutated())
	}

	// The webhook down: the Deployment's dry run fails and is reported;
	// the others are checked, and the check itself does not fail.
	mu.Down()
	rep, err := c.Check(context.Background(), DriftTarget{Namespace: ns, Name: "d", Revision: 1, Policy: correct})
	if err != nil {
		t.Fatal(err)
	}
	if f := rep.Failed(); len(f) != 1 || f[0].Object.Kind != "Deployment" || !strings.Contains(f[0].CheckErr.Error(), "webhook") {
		t.Errorf("failed = %+v", f)
	}
	if len(rep.Objects) != 4 {
		t.Errorf("%d objects checked", len(rep.Objects))
	}
}

// TestDriftDryRunRefused: a manifest server-side apply refuses (a
// duplicate list-map key, which Helm's client-side install accepted) is
// reported for its object; the others are checked, and nothing fails.
func TestDriftDryRunRefused(t *testing.T) {
	m := newManager(t, DriverSecret)
	ns := cluster.Namespace(t)
	if _, err := m.Install(context.Background(), desired(t, ns, "d", "charts/drift", map[string]interface{}{"password": driftPassword, "duplicateEnv": true})); err != nil {
		t.Fatal(err)
	}
	c := m.NewDriftChecker(DriftOptions{})
	rep, err := c.Check(context.Background(), DriftTarget{Namespace: ns, Name: "d", Revision: 1, Policy: correct})
	if err != nil {
		t.Fatal(err)
	}
	if f := rep.Failed(); len(f) != 1 || f[0].Object.Kind != "Deployment" || !strings.Contains(f[0].CheckErr.Error(), "dry-run apply") {
		t.Errorf("failed = %+v", f)
	}
	if len(rep.Objects) != 4 || rep.Drifted() {
		t.Errorf("report = %+v", rep)
	}
}

// TestDriftRateLimiter: the checker's requests take their tokens from a
// limiter of their own, never from the one installs and upgrades share.
func TestDriftRateLimiter(t *testing.T) {
	rc := rest.CopyConfig(cluster.Config)
	rc.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(1, 1)
	m, err := New(withClients(t, Options{RESTConfig: rc, Timeout: time.Minute}))
	if err != nil {
		t.Fatal(err)
	}
	c := m.NewDriftChecker(DriftOptions{QPS: 7, Burst: 9})
	if c.config.RateLimiter == nil || c.config.RateLimiter == rc.RateLimiter || c.config.RateLimiter.QPS() != 7 {
		t.Errorf("the checker's limiter %v, the Manager's %v", c.config.RateLimiter, rc.RateLimiter)
	}
	if d := m.NewDriftChecker(DriftOptions{}); d.config.RateLimiter.QPS() != DefaultDriftQPS {
		t.Errorf("default QPS %v", d.config.RateLimiter.QPS())
	}
}

// TestDriftObjectsAndOnly: Objects names the release's objects as the
// check does; Only checks those it names and no other.
func TestDriftObjectsAndOnly(t *testing.T) {
	m, ns := driftScene(t)
	c := m.NewDriftChecker(DriftOptions{})
	refs, err := c.Objects(context.Background(), DriftTarget{Namespace: ns, Name: "d", Revision: 1})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range refs {
		names = append(names, r.String())
	}
	want := fmt.Sprintf("Secret/%[1]s/d ConfigMap/%[1]s/d Deployment.apps/%[1]s/d Job.batch/%[1]s/d", ns) // Helm's install order
	if got := strings.Join(names, " "); got != want {
		t.Errorf("Objects = %s, want %s", got, want)
	}
	scale(t, ns, 3)
	rep, err := c.Check(context.Background(), DriftTarget{Namespace: ns, Name: "d", Revision: 1, Policy: correct, Only: refs[1:2]})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Objects) != 1 || rep.Objects[0].Object != refs[1] || rep.Drifted() {
		t.Errorf("report = %+v", rep)
	}
	if r := *deployment(t, ns).Spec.Replicas; r != 3 {
		t.Errorf("an object Only left out was corrected: replicas %d", r)
	}
}

// TestDriftConfigMapRecords: with the configmap storage driver the record
// is read from its ConfigMap.
func TestDriftConfigMapRecords(t *testing.T) {
	m := newManager(t, DriverConfigMap)
	ns := cluster.Namespace(t)
	if _, err := m.Install(context.Background(), desired(t, ns, "d", "charts/drift", map[string]interface{}{"password": driftPassword})); err != nil {
		t.Fatal(err)
	}
	scale(t, ns, 2)
	onlyDrifted(t, checkDrift(t, m.NewDriftChecker(DriftOptions{}), ns, warn, false), "Deployment")
	if _, err := m.NewDriftChecker(DriftOptions{}).Check(context.Background(), DriftTarget{Namespace: ns, Name: "d", Revision: 2, Policy: warn}); err == nil {
		t.Error("a revision without a record was checked")
	}
}

// TestDriftNewerRevision: revision 1 is still deployed while an upgrade to
// revision 2 applies its objects; a check of revision 1 then reports the
// drift but corrects nothing (it would put back what the upgrade wrote),
// and corrects once no newer revision exists.
func TestDriftNewerRevision(t *testing.T) {
	m, ns := driftScene(t)
	c := m.NewDriftChecker(DriftOptions{})
	ctx := context.Background()
	rec, err := cluster.Client.CoreV1().Secrets(ns).Get(ctx, "sh.helm.release.v1.d.v1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	next := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sh.helm.release.v1.d.v2", Labels: rec.Labels}, Type: rec.Type, Data: rec.Data}
	next.Labels["version"] = "2"
	next.Labels["status"] = common.StatusPendingUpgrade.String()
	if _, err := cluster.Client.CoreV1().Secrets(ns).Create(ctx, next, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	scale(t, ns, 3)
	d := object(t, checkDrift(t, c, ns, correct, false), "Deployment")
	if d.Corrected || d.CorrectErr == nil || !strings.Contains(d.CorrectErr.Error(), "revision 2") {
		t.Errorf("corrected under a newer revision: %+v", d)
	}
	if r := *deployment(t, ns).Spec.Replicas; r != 3 {
		t.Errorf("replicas = %d, want 3 (not corrected)", r)
	}
	if err := cluster.Client.CoreV1().Secrets(ns).Delete(ctx, next.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if d := object(t, checkDrift(t, c, ns, correct, false), "Deployment"); !d.Corrected || d.CorrectErr != nil {
		t.Errorf("not corrected without a newer revision: %+v", d)
	}
}
