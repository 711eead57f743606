package cli

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/autox-dev/autox/internal/leader"
)

// TestWarningsLoseTheirText: a warning that quotes a value, received by a
// client of the command's config, of a copy of it, and of another config
// (the process default), is counted and logged without its text. The
// e2e test TestAPIWarningsNeverCarryValues has the real API server send it.
func TestWarningsLoseTheirText(t *testing.T) {
	const secret = "hunter22-quoted"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Add("Warning", `299 - "the password is `+secret+`"`)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","namespace":"ns"}}`))
	}))
	defer srv.Close()
	t.Cleanup(func() { rest.SetDefaultWarningHandlerWithContext(rest.WarningLogger{}) })

	var logged bytes.Buffer
	cfg := &rest.Config{Host: srv.URL}
	handleWarnings(cfg, zerolog.New(&logged))
	if rest.CopyConfig(cfg).WarningHandlerWithContext == nil || leader.NewTerm(nil).RESTConfig(cfg).WarningHandlerWithContext == nil {
		t.Error("a leadership term's config, or a copy of it (Helm's), falls back to the process default")
	}
	before := testutil.ToFloat64(apiWarnings)
	for name, c := range map[string]*rest.Config{"the config": cfg, "a copy": rest.CopyConfig(cfg), "another config": {Host: srv.URL}} {
		cs, err := kubernetes.NewForConfig(c)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cs.CoreV1().ConfigMaps("ns").Get(context.Background(), "c", metav1.GetOptions{}); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	if got := testutil.ToFloat64(apiWarnings) - before; got != 3 {
		t.Errorf("%v warnings counted, want 3", got)
	}
	if n := strings.Count(logged.String(), "the API server sent a warning"); n != 3 || strings.Contains(logged.String(), secret) {
		t.Errorf("%d warning lines, want 3, without the text:\n%s", n, logged.String())
	}
}
