package e2e

import (
	"context"
	"net/http"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/autox-dev/autox/internal/format"
	"github.com/autox-dev/autox/internal/testenv"
)

// plain404 is what a proxy or gateway in front of the API server answers
// for a path it does not route: no Kubernetes Status.
const plain404 = "404 page not found\n"

// foreign is how autox reports such an answer.
const foreign = "404 Not Found without a Kubernetes Status body"

// unchangedUntil waits until done, failing at once when the release
// stops being what unchanged accepts.
func (e *env) unchangedUntil(name string, unchanged func(*format.Release) bool, what string, done func() bool) {
	e.t.Helper()
	testenv.Eventually(e.t, patience, what, func() (bool, error) {
		if r := e.Release(name); !unchanged(r) {
			e.t.Fatalf("release %s changed while waiting for %s: %+v", name, what, r)
		}
		return done(), nil
	})
}

// TestPlainNotFoundOptionalSource: a plain-text 404 for the GET of an
// optional values source is no absence: client-go makes up a NotFound
// naming the Secret from it, which read as absent would upgrade the release
// without the Secret's values (and back once the proxy recovers). Nothing
// is upgraded, the error is reported as ValuesSourceFailed; once reads work
// again the release follows the Secret.
func TestPlainNotFoundOptionalSource(t *testing.T) {
	e := newEnv(t)
	proxy, kubeconfig := e.proxied()
	e.Deployment("web", version("1.0.0"))
	e.putSecret("creds", map[string]string{"values.yaml": "password: pw-one-4041\n"})
	p := e.run(e.WriteConfig(webSpec(`
      app:
        chart: {path: {{.Charts}}/hello}
        valuesFrom: [{kind: Secret, name: creds, optional: true}]
`)), "--kubeconfig", kubeconfig)
	// Deployed, not only recorded: the proxy's change of rule below cuts
	// open connections, which would fail an install still running.
	e.WaitRelease("web-app", "installed with the Secret's values", func(r *format.Release) bool {
		return deployedAt(1)(r) && r.Values["password"] == "pw-one-4041"
	})

	proxy.AnswerPlain(http.StatusNotFound, plain404, func(r *http.Request) bool {
		return r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/secrets/creds")
	})
	e.putSecret("creds", map[string]string{"values.yaml": "password: pw-two-4041\n"}) // a reconcile, which reads it
	unchanged := func(r *format.Release) bool {
		return r != nil && r.Revision == 1 && r.Values["password"] == "pw-one-4041"
	}
	e.unchangedUntil("web-app", unchanged, "3 plain 404s for the Secret", func() bool { return proxy.Failed() >= 3 })
	e.unchangedUntil("web-app", unchanged, "a ValuesSourceFailed Event naming the answer", func() bool {
		for _, ev := range e.eventsOf("web") {
			if ev.Reason == "ValuesSourceFailed" && strings.Contains(ev.Message, "cannot read Secret "+e.NS+"/creds") && strings.Contains(ev.Message, foreign) {
				return true
			}
		}
		return false
	})
	if n := helmWrites(p); n != 1 {
		t.Errorf("%d Helm writes, want the install only", n)
	}

	proxy.FailWith(0)
	// An event reconciles at once, whatever the backoff the failures built.
	e.putSecret("creds", map[string]string{"values.yaml": "password: pw-three-4041\n"})
	e.WaitRelease("web-app", "upgraded once the Secret can be read", func(r *format.Release) bool {
		return r != nil && r.Revision == 2 && r.Values["password"] == "pw-three-4041"
	})
	p.Stop(patience)
	e.noneShows(p, "pw-one-4041", "pw-two-4041", "pw-three-4041")
}

// TestPlainNotFoundTrigger: a plain-text 404 for the live GET of a trigger
// is no absence either: nothing is uninstalled or upgraded, the error is
// logged; once reads work again the release follows the trigger.
func TestPlainNotFoundTrigger(t *testing.T) {
	e := newEnv(t)
	proxy, kubeconfig := e.proxied()
	e.Deployment("web", version("1.0.0"))
	p := e.run(e.WriteConfig(webSpec(`
      app:
        chart: {path: {{.Charts}}/hello}
`)), "--kubeconfig", kubeconfig)
	e.WaitRelease("web-app", "installed", deployedAt(1))

	// The pass's LIST of the namespace's Deployments is a live read too
	// (bulk reads: it stands in for the GET of a reconcile it queues), so
	// it gets the same answer; the informer's watch is left alone.
	proxy.AnswerPlain(http.StatusNotFound, plain404, func(r *http.Request) bool {
		return r.Method == http.MethodGet && r.URL.Query().Get("watch") != "true" &&
			(strings.HasSuffix(r.URL.Path, "/deployments/web") || strings.HasSuffix(r.URL.Path, "/namespaces/"+e.NS+"/deployments"))
	})
	e.Relabel("web", version("2.0.0")) // a reconcile, which reads it
	unchanged := func(r *format.Release) bool { return r != nil && r.Revision == 1 && labelOf(r) == "1.0.0" }
	e.unchangedUntil("web-app", unchanged, "3 plain 404s for the trigger", func() bool { return proxy.Failed() >= 3 })
	e.unchangedUntil("web-app", unchanged, "the error in the log", func() bool {
		return strings.Contains(p.Output(), "cannot read trigger") && strings.Contains(p.Output(), foreign)
	})
	if n := helmWrites(p); n != 1 {
		t.Errorf("%d Helm writes, want the install only", n)
	}

	proxy.FailWith(0)
	e.Relabel("web", version("3.0.0")) // an event reconciles at once, whatever the backoff
	e.WaitRelease("web-app", "upgraded once the trigger can be read", func(r *format.Release) bool {
		return r != nil && r.Revision == 2 && labelOf(r) == "3.0.0"
	})
	p.Stop(patience)
}

// TestPlainNotFoundHelmDelete: Helm's kube client counts an object whose
// DELETE answered NotFound as deleted. A plain-text 404 for the DELETE of a
// release's ConfigMap must not: the uninstall fails, the release keeps its
// records (so it is uninstalled again, not forgotten with the ConfigMap
// left behind); once the proxy recovers it goes, ConfigMap included.
func TestPlainNotFoundHelmDelete(t *testing.T) {
	e := newEnv(t)
	proxy, kubeconfig := e.proxied()
	e.Deployment("web", version("1.0.0"))
	// --helm-timeout 2s: the release left uninstalling is retried 32 s
	// after the failed uninstall wrote it, not 5.5 min.
	p := e.run(e.WriteConfig(webSpec(`
      app:
        chart: {path: {{.Charts}}/hello}
`)), "--kubeconfig", kubeconfig, "--helm-timeout", "2s")
	e.WaitRelease("web-app", "installed", deployedAt(1))

	proxy.AnswerPlain(http.StatusNotFound, plain404, func(r *http.Request) bool {
		return r.Method == http.MethodDelete && strings.HasSuffix(r.URL.Path, "/configmaps/web-app")
	})
	e.Relabel("web", map[string]string{}) // unlabelled: uninstall
	kept := func(r *format.Release) bool { return r != nil }
	e.unchangedUntil("web-app", kept, "a plain 404 for the ConfigMap's DELETE", func() bool { return proxy.Failed() >= 1 })
	e.unchangedUntil("web-app", kept, "the failed uninstall in the log", func() bool {
		return strings.Contains(p.Output(), "cannot uninstall release "+e.NS+"/web-app")
	})
	if _, err := cluster.Client.CoreV1().ConfigMaps(e.NS).Get(context.Background(), "web-app", metav1.GetOptions{}); err != nil {
		t.Fatalf("the ConfigMap: %v", err)
	}

	proxy.FailWith(0)
	e.WaitRelease("web-app", "uninstalled once the proxy recovers", func(r *format.Release) bool { return r == nil })
	testenv.Eventually(t, patience, "the ConfigMap gone", func() (bool, error) {
		_, err := cluster.Client.CoreV1().ConfigMaps(e.NS).Get(context.Background(), "web-app", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	p.Stop(patience)
}
