package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/autox-dev/autox/internal/testenv"
)

const teamsConfig = `
namespaces: [{{.NS}}]
specs:
  web:
    trigger: {group: apps, version: v1, resource: deployments, name: web, namespace: {{.NS}}}
    releaseSpecs:
      limited: {chart: {path: {{.Charts}}/clusterwide}, releaseName: limited, serviceAccountName: configmaps-only}
      team: {chart: {path: {{.Charts}}/clusterwide}, releaseName: team, serviceAccountName: deployer}
      ghost: {chart: {path: {{.Charts}}/hello}, releaseName: ghost, serviceAccountName: missing}
      plain: {chart: {path: {{.Charts}}/hello}, releaseName: plain}
      locked: {chart: {path: {{.Charts}}/clusterwide}, releaseName: locked}
`

// TestServiceAccountsAndLockdown runs the binary with
// --default-service-account: each release spec's Helm operations run as its
// serviceAccountName, the others' as the default account. An account that
// may only manage namespaced objects cannot install a chart with a
// ClusterRole (Forbidden, nothing written, an Event naming the account);
// nor can the default account; a missing account fails naming it; a
// sufficient account installs. plan and list show who each release runs
// as. When the spec leaves the config its releases are uninstalled as the
// default account, never as autox: the one it may not remove stays.
func TestServiceAccountsAndLockdown(t *testing.T) {
	e := newEnv(t)
	namespaced := []rbacv1.PolicyRule{testenv.HelmRecords, testenv.Manage("", "configmaps", "services", "serviceaccounts")}
	clusterRoles := rbacv1.PolicyRule{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"clusterroles"},
		Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete", "escalate"}}
	cluster.ServiceAccount(t, e.NS, "configmaps-only", namespaced)
	cluster.ServiceAccount(t, e.NS, "deployer", namespaced, clusterRoles)
	cluster.ServiceAccount(t, e.NS, "lockdown", namespaced)
	t.Cleanup(func() {
		for _, r := range []string{"limited", "team", "locked"} {
			_ = cluster.Client.RbacV1().ClusterRoles().Delete(context.Background(), e.NS+"-"+r, metav1.DeleteOptions{})
		}
	})
	e.Deployment("web", version("1.0.0"))
	cfg := e.WriteConfig(teamsConfig)

	var steps []struct{ Release, Action, ServiceAccount string }
	if err := json.Unmarshal([]byte(e.cliStdout(0, "plan", "--config", cfg, "-o", "json", "--default-service-account", "lockdown")), &steps); err != nil {
		t.Fatal(err)
	}
	runsAs := map[string]string{}
	for _, s := range steps {
		runsAs[s.Release] = s.ServiceAccount
	}
	for rel, sa := range map[string]string{"limited": "configmaps-only", "team": "deployer", "ghost": "missing", "plain": "lockdown", "locked": "lockdown"} {
		if runsAs[rel] != sa {
			t.Errorf("plan: %s runs as %q, want %q (%v)", rel, runsAs[rel], sa, runsAs)
		}
	}

	p := e.run(cfg, "--default-service-account", "lockdown")
	e.WaitRelease("team", "installed as the deployer", deployedAt(1))
	e.WaitRelease("plain", "installed as the default account", deployedAt(1))
	var events string
	testenv.Eventually(t, patience, "ReleaseFailed Events for the three refused release specs", func() (bool, error) {
		_, events = e.events("web")
		return strings.Contains(events, "install of release "+e.NS+"/limited as service account "+e.NS+"/configmaps-only failed") &&
			strings.Contains(events, "install of release "+e.NS+"/locked as service account "+e.NS+"/lockdown failed") &&
			strings.Contains(events, "service account "+e.NS+"/missing does not exist"), nil
	})
	for _, who := range []string{"configmaps-only", "lockdown"} {
		if !strings.Contains(events, `User "system:serviceaccount:`+e.NS+`:`+who+`" cannot`) {
			t.Errorf("no Forbidden for %s in the Events:\n%s", who, events)
		}
	}
	ctx := context.Background()
	for _, r := range []string{"limited", "ghost", "locked"} {
		if e.Release(r) != nil {
			t.Errorf("refused release %s left a record", r)
		}
		if _, err := cluster.Client.CoreV1().ConfigMaps(e.NS).Get(ctx, r, metav1.GetOptions{}); err == nil {
			t.Errorf("refused release %s left its ConfigMap", r)
		}
	}
	for _, r := range []string{"limited", "locked"} {
		if _, err := cluster.Client.RbacV1().ClusterRoles().Get(ctx, e.NS+"-"+r, metav1.GetOptions{}); err == nil {
			t.Errorf("refused release %s left its ClusterRole", r)
		}
	}
	list := e.cli(0, "list", "--config", cfg, "--default-service-account", "lockdown")
	for _, want := range []string{"serviceaccount/deployer", "serviceaccount/lockdown"} {
		if !strings.Contains(list, want) {
			t.Errorf("list shows no %s:\n%s", want, list)
		}
	}

	// The spec leaves: its releases go as the default account, which may
	// remove plain but not team's ClusterRole; team stays as it is, whole.
	e.WriteConfig("namespaces: [{{.NS}}]\nspecs: {}\n")
	e.WaitRelease("plain", "uninstalled as the default account", gone)
	e.waitLog(p, `"serviceAccount":"lockdown","error":"cannot uninstall release `+e.NS+`/team`)
	if r := e.Release("team"); r == nil || r.Revision != 1 {
		t.Errorf("team, which the default account may not remove, changed: %+v", r)
	}
	if _, err := cluster.Client.RbacV1().ClusterRoles().Get(ctx, e.NS+"-team", metav1.GetOptions{}); err != nil {
		t.Errorf("team's ClusterRole: %v", err)
	}
	if _, err := cluster.Client.CoreV1().ConfigMaps(e.NS).Get(ctx, "team", metav1.GetOptions{}); err != nil {
		t.Errorf("team's ConfigMap, which the default account may delete, went with the refused uninstall: %v", err)
	}
	p.Stop(patience)
}
