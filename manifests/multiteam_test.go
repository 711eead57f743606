package manifests_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/autox-dev/autox/internal/testenv"
)

// TestMultiTeamOverlay: the multi-team overlay renders valid objects, runs
// autox with --default-service-account, and leaves autox's own identity
// only reads, Events and `impersonate` on the named accounts — the API
// server refuses it any write of a release's objects or records. The team
// example gives the default account what the example chart renders in its
// namespace, and nothing cluster-wide or elsewhere.
func TestMultiTeamOverlay(t *testing.T) {
	ctx := context.Background()
	objs := render(t, "overlays/multi-team")
	dryRun(t, objs)
	var deployment *unstructured.Unstructured
	if _, err := cluster.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "autox"}}, metav1.CreateOptions{}); testenv.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		switch {
		case o.GetKind() == "Deployment":
			deployment = o
		case o.GetKind() == "Role" || o.GetKind() == "RoleBinding":
			// autox's own namespace: its Lease and records (for real, as below).
			apply(t, o)
			kind, name, ns := o.GetKind(), o.GetName(), o.GetNamespace()
			t.Cleanup(func() {
				rbac := cluster.Client.RbacV1()
				if kind == "Role" {
					_ = rbac.Roles(ns).Delete(context.Background(), name, metav1.DeleteOptions{})
				} else {
					_ = rbac.RoleBindings(ns).Delete(context.Background(), name, metav1.DeleteOptions{})
				}
			})
		case o.GetKind() == "ClusterRole" || o.GetKind() == "ClusterRoleBinding":
			// For real: the checks below ask the API server. Removed after,
			// so that other tests see no grant of them.
			apply(t, o)
			kind, name := o.GetKind(), o.GetName()
			t.Cleanup(func() {
				rbac := cluster.Client.RbacV1()
				if kind == "ClusterRole" {
					_ = rbac.ClusterRoles().Delete(context.Background(), name, metav1.DeleteOptions{})
				} else {
					_ = rbac.ClusterRoleBindings().Delete(context.Background(), name, metav1.DeleteOptions{})
				}
			})
		}
	}
	containers, _, _ := unstructured.NestedSlice(deployment.Object, "spec", "template", "spec", "containers")
	args, _, _ := unstructured.NestedStringSlice(containers[0].(map[string]interface{}), "args")
	if !strings.Contains(strings.Join(args, " "), "--default-service-account=autox-deployer") {
		t.Errorf("the Deployment runs autox without --default-service-account: %v", args)
	}

	team := render(t, "team-example")
	if _, err := cluster.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}, metav1.CreateOptions{}); testenv.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
	for _, o := range team {
		if o.GetNamespace() != "team-a" {
			t.Errorf("%s %s is not in the team's namespace: %q", o.GetKind(), o.GetName(), o.GetNamespace())
		}
		apply(t, o)
	}

	autox := "system:serviceaccount:autox:autox"
	deployer := "system:serviceaccount:team-a:autox-deployer"
	cases := []struct {
		user    string
		attrs   authzv1.ResourceAttributes
		allowed bool
	}{
		{autox, authzv1.ResourceAttributes{Verb: "list", Resource: "secrets", Namespace: "team-a"}, true},
		{autox, authzv1.ResourceAttributes{Verb: "watch", Group: "apps", Resource: "deployments", Namespace: "team-a"}, true},
		{autox, authzv1.ResourceAttributes{Verb: "create", Resource: "events", Namespace: "team-a"}, true},
		{autox, authzv1.ResourceAttributes{Verb: "get", Resource: "serviceaccounts", Namespace: "team-a", Name: "autox-deployer"}, true},
		{autox, authzv1.ResourceAttributes{Verb: "impersonate", Resource: "serviceaccounts", Namespace: "team-a", Name: "autox-deployer"}, true},
		{autox, authzv1.ResourceAttributes{Verb: "impersonate", Resource: "serviceaccounts", Namespace: "team-a", Name: "team-a-deployer"}, true},
		{autox, authzv1.ResourceAttributes{Verb: "impersonate", Resource: "serviceaccounts", Namespace: "kube-system", Name: "default"}, false},
		{autox, authzv1.ResourceAttributes{Verb: "impersonate", Resource: "users", Name: "admin"}, false},
		// The remediation records, in autox's own namespace (Role autox-leader-election).
		{autox, authzv1.ResourceAttributes{Verb: "get", Resource: "configmaps", Namespace: "autox", Name: "autox-remediation"}, true},
		{autox, authzv1.ResourceAttributes{Verb: "update", Resource: "configmaps", Namespace: "autox", Name: "autox-remediation"}, true},
		{autox, authzv1.ResourceAttributes{Verb: "create", Resource: "configmaps", Namespace: "autox"}, true},
		{autox, authzv1.ResourceAttributes{Verb: "impersonate", Resource: "groups", Name: "system:masters"}, false},
		{deployer, authzv1.ResourceAttributes{Verb: "create", Resource: "configmaps", Namespace: "team-a"}, true},
		{deployer, authzv1.ResourceAttributes{Verb: "create", Resource: "secrets", Namespace: "team-a"}, true},
		{deployer, authzv1.ResourceAttributes{Verb: "create", Resource: "configmaps", Namespace: "default"}, false},
		{deployer, authzv1.ResourceAttributes{Verb: "create", Group: rbacv1.GroupName, Resource: "clusterroles"}, false},
	}
	for _, verb := range []string{"create", "update", "patch", "delete"} {
		for _, res := range []string{"secrets", "configmaps", "services", "serviceaccounts"} {
			cases = append(cases, struct {
				user    string
				attrs   authzv1.ResourceAttributes
				allowed bool
			}{autox, authzv1.ResourceAttributes{Verb: verb, Resource: res, Namespace: "team-a"}, false})
		}
	}
	review := func(user string, attrs authzv1.ResourceAttributes) (bool, string, error) {
		r, err := cluster.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
			User: user, ResourceAttributes: &attrs}}, metav1.CreateOptions{})
		if err != nil {
			return false, "", err
		}
		return r.Status.Allowed, r.Status.Reason, nil
	}
	// RBAC caches nothing, but fresh bindings may take a moment to be seen.
	testenv.Eventually(t, 30*time.Second, "the bindings in force", func() (bool, error) {
		a, _, err := review(autox, cases[0].attrs)
		d, _, err2 := review(deployer, authzv1.ResourceAttributes{Verb: "get", Resource: "secrets", Namespace: "team-a"})
		return a && d, errors.Join(err, err2)
	})
	for _, c := range cases {
		allowed, reason, err := review(c.user, c.attrs)
		if err != nil {
			t.Fatal(err)
		}
		if allowed != c.allowed {
			t.Errorf("%s %s %s %s/%s: allowed %v, want %v (%s)", c.user, c.attrs.Verb, c.attrs.Resource, c.attrs.Namespace, c.attrs.Name, allowed, c.allowed, reason)
		}
	}

	// A real request as autox: it reads the account, but writes nothing
	// of a release's.
	rc := rest.CopyConfig(cluster.Config)
	rc.Impersonate = rest.ImpersonationConfig{UserName: autox}
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().ServiceAccounts("team-a").Get(ctx, "autox-deployer", metav1.GetOptions{}); err != nil {
		t.Errorf("autox reads the default account: %v", err)
	}
	// It reads and writes its remediation records in its own namespace
	// (attempts.Store, DESIGN §3): remediation works in this overlay.
	records := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "autox-remediation"}}
	if _, err := client.CoreV1().ConfigMaps("autox").Create(ctx, records, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
		t.Errorf("autox's create of its remediation records: %v", err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "web"}}
	if _, err := client.CoreV1().ConfigMaps("team-a").Create(ctx, cm, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); !apierrors.IsForbidden(err) {
		t.Errorf("autox's own create of a ConfigMap: %v, want Forbidden", err)
	}
}
