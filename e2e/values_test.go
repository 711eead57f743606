package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/autox-dev/autox/internal/format"
	"github.com/autox-dev/autox/internal/testenv"
)

// putSecret creates or replaces Secret name with data (stringData-like).
func (e *env) putSecret(name string, data map[string]string) {
	e.t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.NS}, Data: map[string][]byte{}}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	c := cluster.Client.CoreV1().Secrets(e.NS)
	ctx := context.Background()
	old, err := c.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = c.Create(ctx, s, metav1.CreateOptions{})
	case err == nil:
		s.ResourceVersion, s.Labels = old.ResourceVersion, old.Labels
		_, err = c.Update(ctx, s, metav1.UpdateOptions{})
	}
	if err != nil {
		e.t.Fatal(err)
	}
}

// putConfigMap creates or replaces ConfigMap name with data.
func (e *env) putConfigMap(name string, data map[string]string) {
	e.t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.NS}, Data: data}
	c := cluster.Client.CoreV1().ConfigMaps(e.NS)
	ctx := context.Background()
	old, err := c.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = c.Create(ctx, cm, metav1.CreateOptions{})
	case err == nil:
		cm.ResourceVersion = old.ResourceVersion
		_, err = c.Update(ctx, cm, metav1.UpdateOptions{})
	}
	if err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) deleteSource(kind, name string) {
	e.t.Helper()
	var err error
	if kind == "Secret" {
		err = cluster.Client.CoreV1().Secrets(e.NS).Delete(context.Background(), name, metav1.DeleteOptions{})
	} else {
		err = cluster.Client.CoreV1().ConfigMaps(e.NS).Delete(context.Background(), name, metav1.DeleteOptions{})
	}
	if err != nil {
		e.t.Fatal(err)
	}
}

// eventsOf lists the Events on object name of the test's namespace.
func (e *env) eventsOf(name string) []corev1.Event {
	e.t.Helper()
	list, err := cluster.Client.CoreV1().Events(e.NS).List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
	if err != nil {
		e.t.Fatal(err)
	}
	return list.Items
}

// noneShows fails when a secret string appears in p's log or in an Event
// of the test's namespace.
func (e *env) noneShows(p *testenv.Process, secrets ...string) {
	e.t.Helper()
	list, err := cluster.Client.CoreV1().Events(e.NS).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	for _, s := range secrets {
		if strings.Contains(p.Output(), s) {
			e.t.Errorf("secret %q appears in the log", s)
		}
		for _, ev := range list.Items {
			if strings.Contains(ev.Message, s) {
				e.t.Errorf("secret %q appears in Event %s: %s", s, ev.Reason, ev.Message)
			}
		}
	}
}

func nested(values map[string]interface{}, path ...string) interface{} {
	var v interface{} = values
	for _, p := range path {
		m, _ := v.(map[string]interface{})
		v = m[p]
	}
	return v
}

func upgrades(p *testenv.Process) int {
	return strings.Count(p.Output(), `"message":"release upgrade"`)
}

// valuesConfig: spec web, release spec app (hello) with values from a
// ConfigMap, a Secret merged over it, a Secret key at a target path, and
// inline values on top.
var valuesConfig = webSpec(`      app:
        chart: {path: {{.Charts}}/hello}
        valuesFrom:
          - {kind: ConfigMap, name: settings}
          - {kind: Secret, name: creds}
          - {kind: Secret, name: creds, key: token, targetPath: notify.token}
        values: {greeting: inline, db: {host: inline-host}}
`)

// TestValuesFromFollowChanges: the merge as the release gets it; a Secret
// change upgrades within seconds although the resync is an hour; two
// sources changed together make one new revision; a rewrite that changes
// nothing makes no Helm call; no Secret value reaches the log or an Event.
func TestValuesFromFollowChanges(t *testing.T) {
	e := newEnv(t)
	e.Deployment("web", version("1.0.0"))
	e.putConfigMap("settings", map[string]string{"values.yaml": "greeting: from-cm\ndb: {host: cm-host, port: 5432}\nreplicas: 2\n"})
	e.putSecret("creds", map[string]string{"values.yaml": "db: {password: pw-one-4711}\nreplicas: 3\n", "token": "tok-one-4711"})
	p := e.run(e.WriteConfig(valuesConfig), "--resync", "1h")

	rel := e.WaitRelease("web-app", "installed", deployedAt(1))
	for path, want := range map[string]interface{}{
		"greeting": "inline", "db.host": "inline-host", "db.port": 5432.0, "db.password": "pw-one-4711",
		"replicas": 3.0, "notify.token": "tok-one-4711", "autox.trigger.name": "web",
	} {
		if got := nested(rel.Values, strings.Split(path, ".")...); got != want {
			t.Errorf("values %s = %v, want %v", path, got, want)
		}
	}

	start := time.Now()
	e.putSecret("creds", map[string]string{"values.yaml": "db: {password: pw-two-4711}\nreplicas: 3\n", "token": "tok-one-4711"})
	rel = e.WaitRelease("web-app", "upgraded after the Secret changed", deployedAt(2))
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("the upgrade took %s after the Secret changed", took)
	}
	t.Logf("Secret change to new revision: %s", time.Since(start).Round(100*time.Millisecond))
	if got := nested(rel.Values, "db", "password"); got != "pw-two-4711" {
		t.Errorf("db.password = %v", got)
	}

	// One commit changes two sources, a moment apart: one upgrade. The
	// record shows revision 2 a moment before the upgrade's log line is
	// written: count from that line on.
	testenv.Eventually(t, patience, "the log line of the upgrade to revision 2", func() (bool, error) { return upgrades(p) >= 1, nil })
	before := upgrades(p)
	e.putSecret("creds", map[string]string{"values.yaml": "db: {password: pw-two-4711}\nreplicas: 3\n", "token": "tok-two-4711"})
	time.Sleep(300 * time.Millisecond)
	e.putConfigMap("settings", map[string]string{"values.yaml": "greeting: from-cm\ndb: {host: cm-host, port: 5433}\n"})
	rel = e.WaitRelease("web-app", "upgraded after two sources changed", func(r *format.Release) bool {
		return r != nil && r.Revision >= 3 && nested(r.Values, "db", "port") == 5433.0 && nested(r.Values, "notify", "token") == "tok-two-4711"
	})
	time.Sleep(5 * time.Second) // more than twice the coalescing delay
	if r := e.Release("web-app"); r.Revision != 3 || upgrades(p)-before != 1 {
		t.Errorf("two sources changed together: revision %d, %d upgrades; want revision 3 from one upgrade", r.Revision, upgrades(p)-before)
	}

	// The same content written again (a new resourceVersion): no Helm call.
	before = upgrades(p)
	idle := strings.Count(p.Output(), `"message":"nothing to do for release"`)
	sec, err := cluster.Client.CoreV1().Secrets(e.NS).Get(context.Background(), "creds", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sec.Labels = map[string]string{"rewritten": "yes"}
	if _, err := cluster.Client.CoreV1().Secrets(e.NS).Update(context.Background(), sec, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, patience, "a reconcile after the rewrite", func() (bool, error) {
		return strings.Count(p.Output(), `"message":"nothing to do for release"`) > idle, nil
	})
	time.Sleep(4 * time.Second)
	if r := e.Release("web-app"); r.Revision != 3 || upgrades(p) != before {
		t.Errorf("a rewrite with the same content: revision %d, %d upgrades", r.Revision, upgrades(p)-before)
	}
	p.Stop(patience)
	e.noneShows(p, "pw-one-4711", "pw-two-4711", "tok-one-4711", "tok-two-4711")
}

// TestValuesFromMissingSource: a required Secret deleted under a running
// release changes nothing — no upgrade, no uninstall — but fails the
// release spec with a ValuesSourceFailed Event naming it and the error
// metric, until it is back; an optional ConfigMap comes and goes.
func TestValuesFromMissingSource(t *testing.T) {
	e := newEnv(t)
	e.Deployment("web", version("1.0.0"))
	e.putSecret("creds", map[string]string{"values.yaml": "password: pw-one-0815\n"})
	p := e.run(e.WriteConfig(webSpec(`
      app:
        chart: {path: {{.Charts}}/hello}
        valuesFrom: [{kind: Secret, name: creds}]
      opt:
        chart: {path: {{.Charts}}/hello}
        valuesFrom: [{kind: ConfigMap, name: extra, optional: true}, {kind: Secret, name: creds, key: absent, targetPath: x, optional: true}]
`)), "--resync", "1h")
	base := e.httpBase(p)
	first := e.WaitRelease("web-app", "installed", deployedAt(1))
	opt := e.WaitRelease("web-opt", "installed without its optional sources", deployedAt(1))
	if _, has := opt.Values["x"]; has || len(opt.Values) != 1 {
		t.Errorf("optional sources that are missing gave values: %v", opt.Values)
	}

	e.deleteSource("Secret", "creds")
	testenv.Eventually(t, patience, "a ValuesSourceFailed Event", func() (bool, error) {
		for _, ev := range e.eventsOf("web") {
			if ev.Reason == "ValuesSourceFailed" {
				if !strings.Contains(ev.Message, "Secret "+e.NS+"/creds, key values.yaml") || ev.Type != corev1.EventTypeWarning {
					t.Errorf("event %s %q does not name the reference", ev.Type, ev.Message)
				}
				return true, nil
			}
		}
		return false, nil
	})
	testenv.Eventually(t, patience, "the error metric", func() (bool, error) {
		_, body := httpGet(base + "/metrics")
		return metricValue(body, `autox_reconcile_total{result="error",spec="web"}`) != "", nil
	})
	time.Sleep(3 * time.Second) // retries with backoff meanwhile
	if r := e.Release("web-app"); r == nil || r.Revision != 1 || r.Status != first.Status || nested(r.Values, "password") != "pw-one-0815" {
		t.Fatalf("the release changed while its Secret was missing: %+v", r)
	}
	if strings.Contains(p.Output(), `"action":"uninstall"`) || strings.Contains(p.Output(), `"message":"release upgrade"`) {
		t.Error("a missing Secret led to a Helm write")
	}
	if r := e.Release("web-opt"); r == nil || r.Revision != 1 {
		t.Errorf("the other release spec was disturbed: %+v", r)
	}

	// Back, with new content: upgraded within seconds (an event, not the
	// backoff nor the resync).
	start := time.Now()
	e.putSecret("creds", map[string]string{"values.yaml": "password: pw-two-0815\n", "absent": "now-there"})
	e.WaitRelease("web-app", "upgraded once the Secret is back", deployedAt(2))
	t.Logf("Secret restored to new revision: %s", time.Since(start).Round(100*time.Millisecond))
	e.WaitRelease("web-opt", "upgraded once its optional key exists", func(r *format.Release) bool {
		return r != nil && r.Revision == 2 && r.Values["x"] == "now-there"
	})

	// An optional ConfigMap appears, then goes: in, then out, of the values.
	e.putConfigMap("extra", map[string]string{"values.yaml": "greeting: extra\n"})
	e.WaitRelease("web-opt", "upgraded with the optional ConfigMap", func(r *format.Release) bool {
		return r != nil && r.Revision == 3 && r.Values["greeting"] == "extra"
	})
	e.deleteSource("ConfigMap", "extra")
	e.WaitRelease("web-opt", "upgraded without the optional ConfigMap", func(r *format.Release) bool {
		_, has := r.Values["greeting"]
		return r != nil && r.Revision == 4 && !has
	})
	p.Stop(patience)
	e.noneShows(p, "pw-one-0815", "pw-two-0815", "now-there")
}

// TestValuesFromRestart: a restart with references makes no Helm write
// (the quiet pass proves the release in sync from its record and the
// sources, each read once per pass), and plan shows a Secret's change by
// Secret name only: its keys are masked like its values.
func TestValuesFromRestart(t *testing.T) {
	e := newEnv(t)
	e.Deployment("web", version("1.0.0"))
	e.putSecret("creds", map[string]string{"values.yaml": "db: {password: pw-one-2342}\n"})
	e.putConfigMap("settings", map[string]string{"values.yaml": "greeting: cm\n"})
	cfg := e.WriteConfig(webSpec(`
      a:
        chart: {path: {{.Charts}}/hello}
        valuesFrom: [{kind: ConfigMap, name: settings}, {kind: Secret, name: creds}]
      b:
        chart: {path: {{.Charts}}/hello}
        releaseName: web-b
        valuesFrom: [{kind: Secret, name: creds}]
`))
	p := e.run(cfg)
	e.WaitRelease("web-a", "installed", deployedAt(1))
	e.WaitRelease("web-b", "installed", deployedAt(1))
	p.Stop(patience)

	for i := 0; i < 2; i++ {
		p := e.run(cfg)
		e.waitPasses(p, 0, 3)
		p.Stop(patience)
		if n := helmWrites(p); n != 0 {
			t.Fatalf("restart %d made %d Helm writes:\n%s", i, n, p.Output())
		}
		if n := strings.Count(p.Output(), `"queued":0`); n < 2 {
			t.Errorf("restart %d: %d of its passes found everything in sync, want every pass after the first", i, n)
		}
	}

	e.putSecret("creds", map[string]string{"values.yaml": "db: {password: pw-two-2342}\n"})
	out := e.cli(0, "plan", "--config", cfg, "-o", "json")
	if !strings.Contains(out, `values changed: .*** (from Secret creds)`) || strings.Contains(out, "pw-") || strings.Contains(out, "password") {
		t.Errorf("plan output:\n%s", out)
	}
	if r := e.Release("web-a"); r.Revision != 1 {
		t.Errorf("plan changed something: revision %d", r.Revision)
	}
}

// TestValuesFromSecretInErrors: a Secret's value the API server quotes in
// an error (an invalid label value) is hidden from the log and the Events
// of a run logging at debug level.
func TestValuesFromSecretInErrors(t *testing.T) {
	e := newEnv(t)
	e.Deployment("web", version("1.0.0"))
	bad := "not valid as a label " + fmt.Sprint(time.Now().UnixNano()%100000)
	e.putSecret("creds", map[string]string{"values.yaml": "label: " + bad + "\n"})
	p := e.run(e.WriteConfig(webSpec(`
      lbl:
        chart: {path: {{.Charts}}/label}
        valuesFrom: [{kind: Secret, name: creds}]
`)), "--resync", "1h")
	testenv.Eventually(t, patience, "a ReleaseFailed Event", func() (bool, error) {
		for _, ev := range e.eventsOf("web") {
			if ev.Reason == "ReleaseFailed" && strings.Contains(ev.Message, "***") {
				return true, nil
			}
		}
		return false, nil
	})
	e.putSecret("creds", map[string]string{"values.yaml": "label: fine-label-9931\n"})
	e.WaitRelease("web-lbl", "installed once the value is valid", func(r *format.Release) bool {
		return r != nil && r.Status == "deployed" && r.Values["label"] == "fine-label-9931"
	})
	p.Stop(patience)
	e.noneShows(p, bad, "fine-label-9931")
}

// TestValuesFromConfigChange: valuesFrom added by a config reload is read
// and then followed (its watch starts with the config); removed, the
// Secret no longer matters (its watch stops).
func TestValuesFromConfigChange(t *testing.T) {
	e := newEnv(t)
	e.Deployment("web", version("1.0.0"))
	e.putSecret("creds", map[string]string{"values.yaml": "password: pw-one-5150\n"})
	without := webSpec(`
      app:
        chart: {path: {{.Charts}}/hello}
`)
	with := without + "        valuesFrom: [{kind: Secret, name: creds}]\n"
	k := testenv.NewKubeletDir(t, "config.yaml", e.render(without))
	p := e.run(k.Path(), "--config-debounce", "50ms", "--resync", "1h")
	e.WaitRelease("web-app", "installed", deployedAt(1))

	k.Update(e.render(with))
	e.WaitRelease("web-app", "upgraded with the Secret's values", func(r *format.Release) bool {
		return r != nil && r.Revision == 2 && r.Values["password"] == "pw-one-5150"
	})
	e.putSecret("creds", map[string]string{"values.yaml": "password: pw-two-5150\n"})
	e.WaitRelease("web-app", "upgraded after the Secret changed", func(r *format.Release) bool {
		return r != nil && r.Revision == 3 && r.Values["password"] == "pw-two-5150"
	})

	k.Update(e.render(without))
	e.WaitRelease("web-app", "upgraded without the Secret's values", func(r *format.Release) bool {
		_, has := r.Values["password"]
		return r != nil && r.Revision == 4 && !has
	})
	e.waitLog(p, `"message":"informer stopped"`) // the only informer this test stops: the Secret's
	e.putSecret("creds", map[string]string{"values.yaml": "password: pw-three-5150\n"})
	time.Sleep(4 * time.Second)
	if r := e.Release("web-app"); r.Revision != 4 {
		t.Errorf("a Secret no longer referenced changed the release: revision %d", r.Revision)
	}
	p.Stop(patience)
	e.noneShows(p, "pw-one-5150", "pw-two-5150", "pw-three-5150")
}

// TestValuesFromUnreadableSource: a read of a values source that fails
// (not NotFound: an API error, as RBAC or a timeout gives) changes nothing:
// no upgrade, no uninstall, a ValuesSourceFailed Event; once reads work
// again the release follows the Secret.
func TestValuesFromUnreadableSource(t *testing.T) {
	e := newEnv(t)
	proxy, kubeconfig := e.proxied()
	e.Deployment("web", version("1.0.0"))
	e.putSecret("creds", map[string]string{"values.yaml": "password: pw-one-1234\n"})
	p := e.run(e.WriteConfig(webSpec(`
      app:
        chart: {path: {{.Charts}}/hello}
        valuesFrom: [{kind: Secret, name: creds}]
`)), "--kubeconfig", kubeconfig)
	e.WaitRelease("web-app", "installed", deployedAt(1))

	getsCreds := func(r *http.Request) bool {
		return r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/secrets/creds")
	}
	for _, status := range []int{http.StatusForbidden, http.StatusNotFound, http.StatusInternalServerError} {
		proxy.FailMatching(status, getsCreds)
		from := proxy.Failed()
		e.putSecret("creds", map[string]string{"values.yaml": fmt.Sprintf("password: pw-%d-1234\n", status)})
		testenv.Eventually(t, patience, fmt.Sprintf("failed reads of the Secret (%d)", status), func() (bool, error) { return proxy.Failed() >= from+3, nil })
		if r := e.Release("web-app"); r == nil || r.Revision != 1 || r.Values["password"] != "pw-one-1234" {
			t.Fatalf("the release changed while its Secret could not be read (%d): %+v", status, r)
		}
	}
	testenv.Eventually(t, patience, "a ValuesSourceFailed Event", func() (bool, error) {
		for _, ev := range e.eventsOf("web") {
			if ev.Reason == "ValuesSourceFailed" && strings.Contains(ev.Message, "cannot read Secret "+e.NS+"/creds") {
				return true, nil
			}
		}
		return false, nil
	})
	if helmWrites(p) != 1 {
		t.Errorf("%d Helm writes, want the install only", helmWrites(p))
	}
	proxy.FailWith(0)
	e.WaitRelease("web-app", "upgraded once the Secret can be read", func(r *format.Release) bool {
		return r != nil && r.Revision == 2 && r.Values["password"] == "pw-500-1234"
	})
	p.Stop(patience)
}
