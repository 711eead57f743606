package helmops

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/autox-dev/autox/internal/format"
)

func TestNamespacesError(t *testing.T) {
	e1, e2 := errors.New("forbidden one"), errors.New("forbidden two")
	err := error(&NamespacesError{Failed: map[string]error{"zeta": e1, "alpha": e2, "mid": e1}})
	want := "cannot read release records in namespace(s) alpha, mid, zeta: alpha: forbidden two; mid: forbidden one; zeta: forbidden one"
	for i := 0; i < 20; i++ { // map order varies from call to call
		if got := err.Error(); got != want {
			t.Fatalf("Error() = %q, want %q", got, want)
		}
	}
	var ne *NamespacesError
	if !errors.As(err, &ne) || !reflect.DeepEqual(ne.Unwrap(), []error{e2, e1, e1}) || !errors.Is(err, e2) {
		t.Errorf("Unwrap = %v", ne.Unwrap())
	}

	wrapped := fmt.Errorf("cannot read releases of spec web: %w", err)
	if got := FailedNamespaces(wrapped); !reflect.DeepEqual(got, map[string]bool{"alpha": true, "mid": true, "zeta": true}) {
		t.Errorf("FailedNamespaces = %v", got)
	}
	for _, none := range []error{nil, errors.New("other"), &NamespacesError{}} {
		if got := FailedNamespaces(none); got != nil {
			t.Errorf("FailedNamespaces(%v) = %v, want nil", none, got)
		}
	}
}

// TestEachNamespace: every namespace is read once even after a failure, and a
// context ended mid-way aborts with the context's error and no results.
func TestEachNamespace(t *testing.T) {
	var read []string
	got, err := eachNamespace(context.Background(), []string{"a", "bad", "c", "a"}, func(ns string) ([]string, error) {
		read = append(read, ns)
		if ns == "bad" {
			return nil, errors.New("no")
		}
		return []string{ns + "-rel"}, nil
	})
	if !reflect.DeepEqual(read, []string{"a", "bad", "c"}) || !reflect.DeepEqual(got, []string{"a-rel", "c-rel"}) ||
		!reflect.DeepEqual(FailedNamespaces(err), map[string]bool{"bad": true}) {
		t.Errorf("read %v, got %v, %v", read, got, err)
	}

	// The read that sees the cancel may fail with it or still succeed (Helm's
	// drivers do not pass the context on): either way nothing more is read.
	for _, failWithCancel := range []bool{true, false} {
		ctx, cancel := context.WithCancel(context.Background())
		read = nil
		got, err = eachNamespace(ctx, []string{"a", "b", "c"}, func(ns string) ([]string, error) {
			read = append(read, ns)
			if ns == "b" {
				cancel()
				if failWithCancel {
					return nil, context.Canceled
				}
			}
			return []string{ns}, nil
		})
		if !errors.Is(err, context.Canceled) || FailedNamespaces(err) != nil || got != nil || !reflect.DeepEqual(read, []string{"a", "b"}) {
			t.Errorf("cancel (read fails: %v): read %v, got %v, %v", failWithCancel, read, got, err)
		}
	}
}

// limitedUser returns a client config of a user who may read release records
// in namespace readable only (an RBAC Role there, nothing elsewhere).
func limitedUser(t *testing.T, readable string) *rest.Config {
	t.Helper()
	ctx := context.Background()
	name := "autox-limited-" + readable
	user, err := cluster.Env.ControlPlane.AddUser(envtest.User{Name: name}, nil)
	if err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "read-records"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets", "configmaps"}, Verbs: []string{"get", "list"}}},
	}
	if _, err := cluster.Client.RbacV1().Roles(readable).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "read-records"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "read-records"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: name}},
	}
	if _, err := cluster.Client.RbacV1().RoleBindings(readable).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return user.Config()
}

// TestUnreadableNamespace: a namespace autox may not read (RBAC) does not
// hide the releases of the others; it is named in a *NamespacesError.
func TestUnreadableNamespace(t *testing.T) {
	ctx := context.Background()
	admin := newManager(t, DriverSecret)
	readable, forbidden := cluster.Namespace(t), cluster.Namespace(t)
	for _, ns := range []string{forbidden, readable} {
		if _, err := admin.Install(ctx, desired(t, ns, "r", "charts/hello", nil)); err != nil {
			t.Fatal(err)
		}
	}
	limited, err := New(withClients(t, Options{RESTConfig: limitedUser(t, readable)}))
	if err != nil {
		t.Fatal(err)
	}
	namespaces := []string{forbidden, readable}

	check := func(what string, got []string, err error) {
		t.Helper()
		if !reflect.DeepEqual(got, []string{readable + "/r"}) {
			t.Errorf("%s returned %v, want the release of the readable namespace", what, got)
		}
		if !reflect.DeepEqual(FailedNamespaces(err), map[string]bool{forbidden: true}) || !apierrors.IsForbidden(err) {
			t.Errorf("%s error = %v, want a NamespacesError naming %s with the Forbidden cause", what, err, forbidden)
		}
	}
	qualified := func(rels []*format.Release) []string {
		var out []string
		for _, r := range rels {
			out = append(out, r.Namespace+"/"+r.Name)
		}
		return out
	}

	rels, err := limited.SpecReleases(ctx, namespaces, "spec")
	check("SpecReleases", qualified(rels), err)
	rels, err = limited.ManagedReleases(ctx, namespaces)
	check("ManagedReleases", qualified(rels), err)
	inv, err := limited.NewInventory()
	if err != nil {
		t.Fatal(err)
	}
	recs, err := inv.Managed(ctx, namespaces)
	var got []string
	for _, r := range recs {
		got = append(got, r.Namespace+"/"+r.Name)
	}
	check("Inventory.Managed", got, err)

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if rels, err := limited.SpecReleases(cancelled, namespaces, "spec"); rels != nil || !errors.Is(err, context.Canceled) {
		t.Errorf("SpecReleases with a cancelled context = %v, %v", rels, err)
	}
	if recs, err := inv.Managed(cancelled, namespaces); recs != nil || !errors.Is(err, context.Canceled) {
		t.Errorf("Inventory.Managed with a cancelled context = %v, %v", recs, err)
	}
}
