package triggers

import (
	"context"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/helmops"
	"github.com/autox-dev/autox/helmops/chartsource"
)

// TestUnreadableNamespaceBlocksOnlyItsReleases runs the controller as a user
// who may do everything in one managed namespace and nothing in the other:
// start-up cleanup and the reconcile of releases in the readable namespace go
// ahead; only the release spec whose namespace cannot be read fails, and
// nothing there is mistaken for absent.
func TestUnreadableNamespaceBlocksOnlyItsReleases(t *testing.T) {
	h := newHarness(t)
	forbidden := cluster.Namespace(t)
	ctx := context.Background()
	user, err := cluster.Env.ControlPlane.AddUser(envtest.User{Name: "autox-" + h.NS}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cluster.Client.RbacV1().Roles(h.NS).Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "all"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cluster.Client.RbacV1().RoleBindings(h.NS).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "all"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "all"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "autox-" + h.NS}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A release of a spec the config no longer has, in the readable namespace.
	ch, err := chartsource.LocalCharts{}.Load(ctx, config.Chart{Path: "hello"}, h.Charts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Helm.Install(ctx, helmops.Target{Spec: "old", ReleaseSpec: "hello", Name: "old-hello", Namespace: h.NS, Chart: ch}); err != nil {
		t.Fatal(err)
	}

	h.Deployment("web", v("1.0.0"))
	h.as = user.Config()
	h.start(h.config(`
namespaces: [{{.NS}}, `+forbidden+`]
specs:
  web:
    trigger: {group: apps, version: v1, resource: deployments, name: web, namespace: {{.NS}}}
    releaseSpecs:
      here: {chart: {path: {{.Charts}}/hello}}
      there: {chart: {path: {{.Charts}}/hello}, namespace: `+forbidden+`}
`), 300*time.Millisecond)
	h.WaitRelease("old-hello", "uninstalled by start-up cleanup beside an unreadable namespace", gone)
	h.WaitRelease("web-here", "installed beside an unreadable namespace", deployedAt(1))
	h.waitReconciles("web", resultError, 2)
	there := h.Releases()
	there.Namespace = forbidden
	if r := there.Get("web-there"); r != nil {
		t.Errorf("a release was made in the namespace autox cannot read: %+v", r)
	}
	if r := h.Release("web-here"); r.Revision != 1 {
		t.Errorf("web-here revision %d after the failing retries of its sibling", r.Revision)
	}
}
