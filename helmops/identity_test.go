package helmops

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/autox-dev/autox/internal/leader"
	"github.com/autox-dev/autox/internal/testenv"
)

// clusterRoles may create the ClusterRole of the clusterwide chart (escalate:
// it grants what the account holds only in its namespace).
var clusterRoles = rbacv1.PolicyRule{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"clusterroles"},
	Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete", "escalate"}}

// TestOperationsRunAsTheServiceAccount: an account that may manage only
// ConfigMaps (and its release records) installs a chart that also wants a
// ClusterRole: the install fails Forbidden, naming the account, and writes
// nothing at all — no record, no object — even when the account may read
// ClusterRoles, which gets it past Helm's own checks. An account that does not exist
// fails before anything is sent as it. An account allowed both installs,
// upgrades, rolls back and uninstalls (the limited one cannot do any of
// these to that release: its dry runs are refused, and nothing changes),
// and the API server's audit log shows that it
// wrote every object and record, and autox's own identity none.
func TestOperationsRunAsTheServiceAccount(t *testing.T) {
	ctx := context.Background()
	m := newManager(t, DriverSecret)
	ns := cluster.Namespace(t)
	namespaced := []rbacv1.PolicyRule{testenv.HelmRecords, testenv.Manage("", "configmaps")}
	limited := cluster.ServiceAccount(t, ns, "configmaps-only", namespaced)
	deployer := cluster.ServiceAccount(t, ns, "deployer", namespaced, clusterRoles)
	d := desired(t, ns, "web", "charts/clusterwide", map[string]interface{}{"greeting": "hi"})
	clusterRole := ns + "-web"
	t.Cleanup(func() {
		_ = cluster.Client.RbacV1().ClusterRoles().Delete(context.Background(), clusterRole, metav1.DeleteOptions{})
	})

	as, err := m.As(ctx, ServiceAccount{Namespace: ns, Name: "configmaps-only"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = as.Install(ctx, d)
	if err == nil || !strings.Contains(err.Error(), "forbidden") || !strings.Contains(err.Error(), limited) || !strings.Contains(err.Error(), "service account "+ns+"/configmaps-only") {
		t.Fatalf("install as an account that may not create a ClusterRole: %v; want Forbidden naming the account", err)
	}
	nothingWritten(t, ns, "web", clusterRole)

	// One that may read ClusterRoles but not create one gets past Helm's
	// own check for existing objects: only the dry run as the account keeps
	// Helm from writing a record, then failing on the ClusterRole.
	cluster.ServiceAccount(t, ns, "reader", namespaced, rbacv1.PolicyRule{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"clusterroles"}, Verbs: []string{"get", "list", "watch"}})
	if as, err = m.As(ctx, ServiceAccount{Namespace: ns, Name: "reader"}); err != nil {
		t.Fatal(err)
	}
	if _, err = as.Install(ctx, d); err == nil || !strings.Contains(err.Error(), "forbidden") {
		t.Fatalf("install as an account that may not create a ClusterRole: %v; want Forbidden", err)
	}
	nothingWritten(t, ns, "web", clusterRole)

	_, err = m.As(ctx, ServiceAccount{Namespace: ns, Name: "nobody"})
	if err == nil || !strings.Contains(err.Error(), "service account "+ns+"/nobody does not exist") {
		t.Fatalf("As of a missing account: %v", err)
	}
	if got, _ := writesAs(t, "system:serviceaccount:"+ns+":nobody"); len(got) > 0 {
		t.Errorf("requests were made as a missing account: %v", got)
	}

	as, err = m.As(ctx, ServiceAccount{Namespace: ns, Name: "deployer"})
	if err != nil {
		t.Fatal(err)
	}
	if rev, err := as.Install(ctx, d); err != nil || rev != 1 {
		t.Fatalf("install as an allowed account: %d, %v", rev, err)
	}
	if _, err := cluster.Client.RbacV1().ClusterRoles().Get(ctx, clusterRole, metav1.GetOptions{}); err != nil {
		t.Fatalf("the chart's ClusterRole: %v", err)
	}

	// Every other operation on it as the limited account is refused by its
	// dry run and changes nothing either.
	limitedAs, err := m.As(ctx, ServiceAccount{Namespace: ns, Name: "configmaps-only"})
	if err != nil {
		t.Fatal(err)
	}
	deployed := releaseState(t, m, ns, "web", clusterRole)
	d.Values = map[string]interface{}{"greeting": "hey"}
	d.Revision = 2
	if _, err := limitedAs.Upgrade(ctx, d); err == nil || !strings.Contains(err.Error(), "cannot upgrade release "+ns+"/web as service account "+ns+"/configmaps-only") {
		t.Errorf("upgrade as the limited account: %v", err)
	}
	if err := limitedAs.Uninstall(ctx, ns, "web", 0, nil); err == nil || !strings.Contains(err.Error(), "forbidden") {
		t.Errorf("uninstall as the limited account: %v", err)
	}
	if got := releaseState(t, m, ns, "web", clusterRole); got != deployed {
		t.Errorf("refused operations changed the release: %s, was %s", got, deployed)
	}

	if rev, err := as.Upgrade(ctx, d); err != nil || rev != 2 {
		t.Fatalf("upgrade as the account: %d, %v", rev, err)
	}
	upgraded := releaseState(t, m, ns, "web", clusterRole)
	if err := limitedAs.Rollback(ctx, ns, "web", 0, 1, nil); err == nil || !strings.Contains(err.Error(), "cannot rollback release") {
		t.Errorf("rollback as the limited account: %v", err)
	}
	if got := releaseState(t, m, ns, "web", clusterRole); got != upgraded {
		t.Errorf("a refused rollback changed the release: %s, was %s", got, upgraded)
	}
	if err := as.Rollback(ctx, ns, "web", 0, 1, nil); err != nil {
		t.Fatalf("rollback as the account: %v", err)
	}
	if err := as.Uninstall(ctx, ns, "web", 0, nil); err != nil {
		t.Fatalf("uninstall as the account: %v", err)
	}
	nothingWritten(t, ns, "web", clusterRole)

	// The API server's view: every write of the release's objects and
	// records, dry runs aside, was the deployer's.
	writes := releaseWrites(t, ns, "web", clusterRole)
	verbs := map[string]bool{}
	for _, w := range writes {
		if w.Writer() != deployer {
			t.Errorf("%s %s %s/%s was written by %s, want %s", w.Verb, w.Resource, w.Namespace, w.Name, w.Writer(), deployer)
		}
		if w.As != "" && w.User == w.As {
			t.Errorf("%+v: not impersonated", w)
		}
		verbs[w.Resource+" "+w.Verb] = true
	}
	for _, want := range []string{"configmaps create", "clusterroles create", "secrets create", "configmaps patch", "secrets update", "configmaps delete", "clusterroles delete"} {
		if !verbs[want] {
			t.Errorf("the audit log has no %s by the account; it has %v", want, verbs)
		}
	}
}

// releaseState sums up what a release is in the cluster: its records'
// versions and statuses, and its objects' resource versions.
func releaseState(t *testing.T, m *Manager, ns, name, clusterRole string) string {
	t.Helper()
	ctx := context.Background()
	recs, err := cluster.Client.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{LabelSelector: "owner=helm,name=" + name})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, r := range recs.Items {
		b.WriteString(r.Name + "=" + r.Labels["status"] + "@" + r.ResourceVersion + " ")
	}
	cm, err := cluster.Client.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cr, err := cluster.Client.RbacV1().ClusterRoles().Get(ctx, clusterRole, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return b.String() + "configmap@" + cm.ResourceVersion + " clusterrole@" + cr.ResourceVersion
}

// nothingWritten fails when the release has a record, or its ConfigMap or
// ClusterRole exists.
func nothingWritten(t *testing.T, ns, name, clusterRole string) {
	t.Helper()
	ctx := context.Background()
	recs, err := cluster.Client.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{LabelSelector: "owner=helm,name=" + name})
	if err != nil || len(recs.Items) > 0 {
		t.Errorf("release records of %s: %d, %v; want none", name, len(recs.Items), err)
	}
	if _, err := cluster.Client.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{}); testenv.IgnoreNotFound(err) != nil || err == nil {
		t.Errorf("ConfigMap %s/%s: %v; want none", ns, name, err)
	}
	if _, err := cluster.Client.RbacV1().ClusterRoles().Get(ctx, clusterRole, metav1.GetOptions{}); testenv.IgnoreNotFound(err) != nil || err == nil {
		t.Errorf("ClusterRole %s: %v; want none", clusterRole, err)
	}
}

// releaseWrites are the successful writes, dry runs aside, of the release's
// ConfigMap, ClusterRole and records, once the audit log has the last one.
func releaseWrites(t *testing.T, ns, name, clusterRole string) []testenv.Write {
	t.Helper()
	var out []testenv.Write
	testenv.Eventually(t, 30*time.Second, "the audit log of the uninstall", func() (bool, error) {
		var err error
		out, err = cluster.Writes(func(w testenv.Write) bool {
			ours := (w.Namespace == ns && (w.Resource == "configmaps" && w.Name == name || w.Resource == "secrets" && strings.HasPrefix(w.Name, "sh.helm.release.v1."+name+"."))) ||
				(w.Resource == "clusterroles" && w.Name == clusterRole)
			return ours && !w.DryRun && w.Code < 300
		})
		for _, w := range out {
			if w.Resource == "clusterroles" && w.Verb == "delete" {
				return true, err
			}
		}
		return false, err
	})
	return out
}

// writesAs are the writes the audit log has as user.
func writesAs(t *testing.T, user string) ([]testenv.Write, error) {
	t.Helper()
	return cluster.Writes(func(w testenv.Write) bool { return w.As == user })
}

// TestServiceAccountWritesAreFenced: the account's Manager is built from
// the Manager's REST config, the leadership term's fenced one, so a term
// that ended refuses its writes as it refuses autox's own.
func TestServiceAccountWritesAreFenced(t *testing.T) {
	ctx := context.Background()
	ns := cluster.Namespace(t)
	cluster.ServiceAccount(t, ns, "deployer", []rbacv1.PolicyRule{testenv.HelmRecords, testenv.Manage("", "configmaps", "services", "serviceaccounts")})
	term := leader.NewTerm(nil)
	m, err := New(withClients(t, Options{RESTConfig: term.RESTConfig(cluster.Config), Timeout: time.Minute, Log: zerolog.Nop()}))
	if err != nil {
		t.Fatal(err)
	}
	as, err := m.As(ctx, ServiceAccount{Namespace: ns, Name: "deployer"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := as.Install(ctx, desired(t, ns, "before", "charts/hello", nil)); err != nil {
		t.Fatalf("install during the term: %v", err)
	}
	term.End()
	_, err = as.Install(ctx, desired(t, ns, "after", "charts/hello", nil))
	if !errors.Is(err, leader.ErrFenced) {
		t.Fatalf("install as the account after the term ended: %v, want %v", err, leader.ErrFenced)
	}
	if r, err := m.Lookup(ctx, ns, "after"); r != nil || err != nil {
		t.Errorf("a fenced install left release %+v (%v)", r, err)
	}
}
