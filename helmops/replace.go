package helmops

import (
	"context"
	"fmt"
	"slices"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/kube"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/cli-runtime/pkg/resource"
)

// Ref names a release.
type Ref struct{ Namespace, Name string }

func (r Ref) String() string { return r.Namespace + "/" + r.Name }

// Helm's ownership marks on the objects of a release.
const (
	managedByLabel        = "app.kubernetes.io/managed-by"
	releaseNameAnnotation = "meta.helm.sh/release-name"
	releaseNSAnnotation   = "meta.helm.sh/release-namespace"
)

// DryRunReplacement checks, writing nothing, that d would install in place
// of release old, which has another name or namespace and is to be removed
// after it (a release spec that now wants another namespace or name): the
// dry run of Reinstall (dryRunInstall), except that objects old owns are
// accepted, since they go with it. Helm's own check would refuse them (a
// cluster-scoped object old made names old's namespace), so it is off and
// done here: every object of the new release that exists must carry Helm's
// marks of d's release or of old's. A release that fails this keeps old
// running: its removal waits.
func (m *Manager) DryRunReplacement(ctx context.Context, d Target, old Ref) error {
	if err := notStarted(ctx, "dry run", d.Namespace, d.Name); err != nil {
		return err
	}
	in, cfg, err := m.newInstall(ctx, d, true) // a replacement: as a reinstall
	if err != nil {
		return err
	}
	in.DryRunStrategy = action.DryRunServer
	in.TakeOwnership = true // ownership is checked below, old's objects allowed
	// As in dryRunInstall: Helm's rendering and mapping take no context, so
	// the caller stops waiting when ctx ends; a dry run writes nothing.
	err = m.untilDone(ctx, func() error {
		rel, err := dryRun(ctx, in, d)
		if err != nil {
			return err
		}
		manifest := installManifest(rel)
		if err := owners(ctx, cfg.KubeClient, manifest, Ref{Namespace: d.Namespace, Name: d.Name}, old); err != nil {
			return err
		}
		return dryRunCreate(ctx, cfg.KubeClient, manifest)
	})
	if err != nil {
		m.forgetCapabilities()
		return fmt.Errorf("release %s/%s does not render or validate: %w", d.Namespace, d.Name, d.Redact.Error(err))
	}
	return nil
}

// owners returns an error for each object of manifest that exists without
// Helm's marks of one of the releases allowed.
func owners(ctx context.Context, kc kube.Interface, manifest string, allowed ...Ref) error {
	return eachObject(ctx, kc, manifest, func(info *resource.Info) error {
		existing, err := resource.NewHelper(info.Client, info.Mapping).Get(info.Namespace, info.Name)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("cannot read %s: %w", info.ObjectName(), err)
		}
		obj, err := meta.Accessor(existing)
		if err != nil {
			return fmt.Errorf("cannot read the metadata of %s: %w", info.ObjectName(), err)
		}
		owner := Ref{Namespace: obj.GetAnnotations()[releaseNSAnnotation], Name: obj.GetAnnotations()[releaseNameAnnotation]}
		if obj.GetLabels()[managedByLabel] == "Helm" && slices.Contains(allowed, owner) {
			return nil
		}
		who := "no Helm release"
		if owner.Name != "" {
			who = "release " + owner.String()
		}
		return fmt.Errorf("%s exists and belongs to %s", info.ObjectName(), who)
	})
}
