package testenv

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// HelmRecords is what Helm needs of its release records (the secret
// driver) in a namespace, and what a team's account needs to run releases.
var HelmRecords = rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"},
	Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}}

// Manage grants every verb Helm uses on the resources of one API group.
func Manage(group string, resources ...string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{APIGroups: []string{group}, Resources: resources,
		Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}}
}

// ServiceAccount creates a service account in ns bound to a Role of rules
// there and, when clusterRules are given, to a ClusterRole of them (named
// <ns>-<name>, removed when the test ends). It returns the account's user
// name as the API server knows it.
func (c *Cluster) ServiceAccount(t testing.TB, ns, name string, rules []rbacv1.PolicyRule, clusterRules ...rbacv1.PolicyRule) string {
	t.Helper()
	ctx := context.Background()
	rbac := c.Client.RbacV1()
	subject := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: ns}}
	if _, err := c.Client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if len(rules) > 0 {
		if _, err := rbac.Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := rbac.RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name}, Subjects: subject,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if len(clusterRules) > 0 {
		cn := ns + "-" + name
		if _, err := rbac.ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: cn}, Rules: clusterRules}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := rbac.ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: cn}, Subjects: subject,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: cn}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = rbac.ClusterRoleBindings().Delete(context.Background(), cn, metav1.DeleteOptions{})
			_ = rbac.ClusterRoles().Delete(context.Background(), cn, metav1.DeleteOptions{})
		})
	}
	return "system:serviceaccount:" + ns + ":" + name
}
