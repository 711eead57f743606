package apply

import (
	"context"
	"fmt"

	"github.com/autox-dev/autox/helmops"
	"github.com/autox-dev/autox/triggers/plan"
)

// Impersonate returns the Helm whose operations run as a service account
// (helmops.Manager.As): it fails when the account does not exist.
type Impersonate func(ctx context.Context, sa helmops.ServiceAccount) (Helm, error)

// helmFor is the Helm a step's operation runs with: as the step's service
// account in the release's namespace, or as autox. A step that names an
// account never falls back to autox's own identity: without a way to
// impersonate it fails, changing nothing.
func (a *Applier) helmFor(ctx context.Context, s plan.Step) (Helm, error) {
	if s.ServiceAccount == "" {
		return a.opts.Helm, nil
	}
	sa := helmops.ServiceAccount{Namespace: s.Namespace, Name: s.ServiceAccount}
	if a.opts.Impersonate == nil {
		return nil, fmt.Errorf("release %s/%s runs as %s, and this autox cannot act as an account; nothing was changed", s.Namespace, s.Release, sa)
	}
	return a.opts.Impersonate(ctx, sa)
}

// asAccount is what Events and errors say about the identity of a step's
// operation: nothing for autox's own, " as service account ns/name" else.
func asAccount(s plan.Step) string {
	if s.ServiceAccount == "" {
		return ""
	}
	return " as " + helmops.ServiceAccount{Namespace: s.Namespace, Name: s.ServiceAccount}.String()
}
