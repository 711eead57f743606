package triggers

import (
	"context"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/autox-dev/autox/internal/format"
	"github.com/autox-dev/autox/internal/testenv"
	"github.com/autox-dev/autox/triggers/attempts"
)

// attemptsOf returns the failed attempts recorded for release in the
// harness's namespace, nil when none are.
func (h *harness) attemptsOf(release string) *attempts.Entry {
	h.t.Helper()
	recs, err := attempts.Store{Client: cluster.Client, Instance: format.DefaultInstance}.Read(context.Background(), h.NS)
	if err != nil {
		h.t.Fatal(err)
	}
	if e, ok := recs[release]; ok {
		return &e
	}
	return nil
}

// helloRules are what the hello chart needs of an account in its namespace.
var helloRules = []rbacv1.PolicyRule{testenv.HelmRecords, testenv.Manage("", "configmaps", "services", "serviceaccounts")}

// TestOnlyRealAttemptsCount: a release spec with retries: 1 and onFailure:
// rollback whose service account does not exist yet fails reconcile after
// reconcile, writing nothing; none of those is an attempt of the release.
// Once the account exists the release installs: no retries used up, no
// remedy.
func TestOnlyRealAttemptsCount(t *testing.T) {
	h := newHarness(t)
	h.Deployment("web", v("1"))
	h.start(h.config(webSpec(`      hello:
        chart: {path: {{.Charts}}/hello}
        serviceAccountName: deployer
        remediation: {retries: 1, onFailure: rollback}
`)), time.Hour)
	testenv.Eventually(t, patience, "3 reconciles of spec web", func() (bool, error) {
		return finishedReconciles(h.metrics, "web") >= 3, nil
	})
	if e := h.attemptsOf("web-hello"); e != nil {
		t.Errorf("failures without a write were recorded as attempts: %+v", *e)
	}
	cluster.ServiceAccount(t, h.NS, "deployer", helloRules)
	h.WaitRelease("web-hello", "installed once its account exists", deployedAt(1))
	if e := h.attemptsOf("web-hello"); e != nil {
		t.Errorf("attempts recorded after the install: %+v", *e)
	}
}
