package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/autox-dev/autox/internal/format"
	"github.com/autox-dev/autox/internal/testenv"
)

// admissionPolicy makes a ValidatingAdmissionPolicy and its binding, both
// named after the test's namespace, that judge the ConfigMaps Helm makes
// there (app.kubernetes.io/managed-by: Helm; the test's own have no such
// label) with one validation, acting as action says (Warn or Deny). They
// are removed when the test ends. It returns once the API server enforces
// the policy: it loads policies asynchronously.
func (e *env) admissionPolicy(action admissionv1.ValidationAction, expression, message string) {
	e.t.Helper()
	ctx := context.Background()
	name := "autox-e2e-" + e.NS
	fail := admissionv1.Fail
	policy := &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: &fail,
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionv1.RuleWithOperations{
					Operations: []admissionv1.OperationType{admissionv1.Create, admissionv1.Update},
					Rule:       admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
				},
			}}},
			Validations: []admissionv1.Validation{{Expression: expression, MessageExpression: message}},
		},
	}
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        name,
			ValidationActions: []admissionv1.ValidationAction{action},
			MatchResources: &admissionv1.MatchResources{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": e.NS}},
				ObjectSelector:    &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/managed-by": "Helm"}},
			},
		},
	}
	api := cluster.Client.AdmissionregistrationV1()
	if _, err := api.ValidatingAdmissionPolicies().Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		e.t.Fatalf("cannot create the admission policy: %v", err)
	}
	e.t.Cleanup(func() {
		_ = api.ValidatingAdmissionPolicies().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	if _, err := api.ValidatingAdmissionPolicyBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		e.t.Fatalf("cannot create the admission policy binding: %v", err)
	}
	e.t.Cleanup(func() {
		_ = api.ValidatingAdmissionPolicyBindings().Delete(context.Background(), name, metav1.DeleteOptions{})
	})

	// A dry-run ConfigMap the policy judges, with a client of the test's
	// that collects warnings, until the policy warns or denies.
	warnings := &collectedWarnings{}
	cfg := rest.CopyConfig(cluster.Config)
	cfg.WarningHandlerWithContext = warnings
	probe, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "policy-probe", Namespace: e.NS,
		Labels: map[string]string{"app.kubernetes.io/managed-by": "Helm"}}, Data: map[string]string{"greeting": "probe", "values": "{}"}}
	testenv.Eventually(e.t, patience, "the admission policy in force", func() (bool, error) {
		_, err := probe.CoreV1().ConfigMaps(e.NS).Create(ctx, cm, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if action == admissionv1.Deny {
			return err != nil && strings.Contains(err.Error(), name), nil
		}
		return warnings.count() > 0, err
	})
}

type collectedWarnings struct {
	mu    sync.Mutex
	texts []string
}

func (w *collectedWarnings) HandleWarningHeaderWithContext(_ context.Context, _ int, _, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.texts = append(w.texts, text)
}

func (w *collectedWarnings) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.texts)
}

// unique is text made unique to this run, so that it cannot be in the log
// by chance.
func unique(text string) string { return fmt.Sprintf("%s-%d", text, time.Now().UnixNano()%1e9) }

// TestAPIWarningsNeverCarryValues: a ValidatingAdmissionPolicy in Warn mode
// quotes, in the warning it sends Helm's install, a ConfigMap field the
// chart fills from a Secret via valuesFrom. The release is installed; the
// warning is counted and logged as having come, but the Secret's value is in
// no log line (debug on) and no Event.
func TestAPIWarningsNeverCarryValues(t *testing.T) {
	e := newEnv(t)
	e.Deployment("web", version("1.0.0"))
	e.admissionPolicy(admissionv1.Warn, "!has(object.data) || !has(object.data.greeting)", "'the greeting is ' + object.data.greeting")
	secret := unique("warned-greeting")
	e.putSecret("creds", map[string]string{"greeting": secret})
	p := e.run(e.WriteConfig(webSpec(`      hello:
        chart: {path: {{.Charts}}/hello}
        valuesFrom: [{kind: Secret, name: creds, key: greeting, targetPath: greeting}]
`)), "--resync", "1h")

	if r := e.WaitRelease("web-hello", "installed", deployedAt(1)); r.Values["greeting"] != secret {
		t.Fatalf("the Secret's value is not in the release: %v", r.Values)
	}
	cm, err := cluster.Client.CoreV1().ConfigMaps(e.NS).Get(context.Background(), "web-hello", metav1.GetOptions{})
	if err != nil || cm.Data["greeting"] != secret {
		t.Fatalf("the chart's ConfigMap does not hold the Secret's value (%v): %v", err, cm.Data)
	}
	// The install has returned, and with it the warning of its create.
	e.waitLog(p, `"message":"release install"`)
	e.noneShows(p, secret)
	metric := e.metricsOf(p)
	testenv.Eventually(t, patience, "the warning counted", func() (bool, error) {
		return number(metric("autox_kube_api_warnings_total")) >= 1, nil
	})
	if !strings.Contains(p.Output(), "the API server sent a warning") {
		t.Error("no log line says that a warning came")
	}
	p.Stop(patience)
	e.noneShows(p, secret)
}

// TestRefusalQuotingValuesAtTargetPaths: the API server refuses the chart's
// ConfigMap with a message quoting all of the release's values (a
// ValidatingAdmissionPolicy in Deny mode): a ConfigMap's value at a
// targetPath, a Secret's number at a targetPath, and a number and a boolean
// of a Secret's values. On this first install none of them is in the log
// (debug on) or the Events: each shows as ***.
func TestRefusalQuotingValuesAtTargetPaths(t *testing.T) {
	e := newEnv(t)
	e.Deployment("web", version("1.0.0"))
	e.admissionPolicy(admissionv1.Deny, "!has(object.data) || !has(object.data.values)",
		"'refused, values: ' + object.data.values")
	suffix := time.Now().UnixNano() % 1e6
	greeting := unique("cm-greeting")
	pin := fmt.Sprint(8642000000 + suffix)
	port := fmt.Sprint(4242000000 + suffix)
	e.putConfigMap("settings", map[string]string{"greeting": greeting})
	e.putSecret("creds", map[string]string{"pin": pin, "values.yaml": "db: {port: " + port + ", tls: true}\n"})
	p := e.run(e.WriteConfig(webSpec(`      hello:
        chart: {path: {{.Charts}}/hello}
        valuesFrom:
          - {kind: ConfigMap, name: settings, key: greeting, targetPath: greeting}
          - {kind: Secret, name: creds, key: pin, targetPath: auth.pin}
          - {kind: Secret, name: creds}
`)), "--resync", "1h")

	var refused string
	testenv.Eventually(t, patience, "a ReleaseFailed Event quoting the values", func() (bool, error) {
		for _, ev := range e.eventsOf("web") {
			if ev.Reason == "ReleaseFailed" && strings.Contains(ev.Message, "refused, values: ") {
				refused = ev.Message
				return true, nil
			}
		}
		return false, nil
	})
	// The message quotes every value, each hidden: {"auth":{"pin":"***"},
	// "db":{"port":***,"tls":***},"greeting":"***"}, maybe escaped again.
	for _, hidden := range []string{`"pin":"***"`, `"port":***`, `"tls":***`, `"greeting":"***"`} {
		if !strings.Contains(strings.ReplaceAll(refused, `\`, ""), hidden) {
			t.Errorf("the refusal does not show %s: %s", hidden, refused)
		}
	}
	if r := e.Release("web-hello"); r == nil || r.Revision != 1 || r.Status == "deployed" {
		t.Errorf("the refused install: %+v", r)
	}
	p.Stop(patience)
	e.noneShows(p, greeting, pin, port)
	if t.Failed() {
		return
	}
	// The release's values as stored, so the test is known to have given
	// the chart what the policy quoted.
	r := e.Release("web-hello")
	if nested(r.Values, "greeting") != greeting || nested(r.Values, "auth", "pin") != pin || fmt.Sprint(nested(r.Values, "db", "tls")) != "true" {
		t.Errorf("the release's values: %v", format.UserValues(r.Values))
	}
}
