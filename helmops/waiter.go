package helmops

import (
	"bytes"
	"fmt"
	"io"
	"sync"
	"time"

	"helm.sh/helm/v4/pkg/kube"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/resource"
)

// Helm 4 waits through a kube.Waiter chosen by each action's WaitStrategy,
// and an empty strategy fails the action after it has written (a failed
// revision, or a rollback left pending-rollback): every action autox builds
// sets one (policy.go), and these are what they mean (DESIGN §3):
//   - wait: true — kube.StatusWatcherStrategy, Helm 4's own status watcher
//     (kstatus), for the release's objects, its hooks and its deletions.
//   - otherwise — kube.HookOnlyStrategy, which Helm's actions read as "wait
//     for hooks only", answered by hooksOnly below: the release's objects are
//     not waited for, and hooks are watched and their deletions waited for as
//     Helm 3 did.
//   - the uninstall of a reinstall, which must see its objects gone —
//     kube.LegacyStrategy, Helm 3's polling, as autox did on Helm 3.

// hookAnnotation marks the objects of a chart's hooks (Helm's
// release.HookAnnotation), in their manifests and so in what Build makes.
const hookAnnotation = "helm.sh/hook"

// kubeClient is Helm's kube client as autox runs it: without its
// reachability check, and with hooksOnly for kube.HookOnlyStrategy. Only the
// methods below and those of kube.Interface may be used: *kube.Client embeds
// a Waiter that is nil until SetWaiter, so its promoted Wait methods panic.
type kubeClient struct {
	*kube.Client
	// deleted, when set, records what the client is asked to delete (an
	// uninstall's report of the objects it left: leftbehind.go).
	deleted *deletions
	// writes, when set, notes the client's writes (nowrite.go).
	writes *writes
	// refresh, when set, makes the shared discovery and REST mapping be
	// read anew (Manager.forgetAPIs).
	refresh func()
	// conflicts, when set, answers an install's conflict reads from
	// lists (conflictreads.go).
	conflicts *conflictReads
	// clientSideCreates, set for a client-side install, makes Create
	// create without Helm 4's process-wide mutex (creates.go).
	clientSideCreates bool
}

// Build is Helm's, except that a kind the REST mapper does not know makes
// it read discovery anew and build once more: the CRD may have been created
// since the shared mapper read it (by another release, or by hand), and
// without this the release would fail until the cached discovery expires.
func (c kubeClient) Build(reader io.Reader, validate bool) (kube.ResourceList, error) {
	infos, err := c.build(reader, validate)
	if err == nil && c.conflicts != nil {
		c.conflicts.wrap(infos)
	}
	return infos, err
}

func (c kubeClient) build(reader io.Reader, validate bool) (kube.ResourceList, error) {
	if c.refresh == nil {
		return c.Client.Build(reader, validate)
	}
	manifest, err := io.ReadAll(reader)
	if err != nil {
		return nil, err
	}
	infos, err := c.Client.Build(bytes.NewReader(manifest), validate)
	if isNoMatch(err) {
		c.refresh()
		infos, err = c.Client.Build(bytes.NewReader(manifest), validate)
	}
	return infos, err
}

func (c kubeClient) Delete(resources kube.ResourceList, policy metav1.DeletionPropagation) (*kube.Result, []error) {
	if c.deleted != nil {
		c.deleted.add(resources)
	}
	c.writes.note()
	return c.Client.Delete(resources, policy)
}

// IsReachable is not asked of the API server: before every install and
// upgrade Helm asks it for its version only to learn that it answers, one
// request per release in series with the rest. The capabilities shared by
// all operations were read from that server, and an unreachable one fails
// the operation's next request instead, before any write.
func (kubeClient) IsReachable() error { return nil }

func (c kubeClient) GetWaiter(ws kube.WaitStrategy) (kube.Waiter, error) {
	return c.GetWaiterWithOptions(ws)
}

func (c kubeClient) GetWaiterWithOptions(ws kube.WaitStrategy, opts ...kube.WaitOption) (kube.Waiter, error) {
	if ws == kube.HookOnlyStrategy {
		// Helm's legacy waiter builds a whole clientset (some 60 typed
		// clients), and every install and upgrade asks for a waiter: it
		// was 7 % of autox's allocations in a 10,000-trigger convergence,
		// for charts that mostly have no hook to wait for. It is built
		// when a hook is first waited for.
		return hooksOnly{legacy: sync.OnceValues(func() (kube.Waiter, error) {
			return c.Client.GetWaiter(kube.LegacyStrategy)
		})}, nil
	}
	return c.Client.GetWaiterWithOptions(ws, opts...)
}

// hooksOnly waits for hooks only, as Helm 3 did without --wait: a hook is
// watched until it completed (a Job) or succeeded (a Pod), and a deleted
// hook is waited for until it is gone — which Helm 4's hookOnly waiter does
// not do (its WaitForDelete returns at once), so that a hook held by a
// finalizer for a moment made the next run's create of the same hook
// (before-hook-creation) fail with AlreadyExists. The release's own objects
// are neither waited for when applied nor when deleted (an uninstall without
// wait returns once it has deleted them, as on Helm 3). Both waits are Helm
// 3's polling (Helm 4's legacy waiter): the requests and permissions Helm 3
// needed, and no discovery of its own per operation.
type hooksOnly struct {
	// legacy is Helm 4's legacy waiter, built on first use.
	legacy func() (kube.Waiter, error)
}

func (hooksOnly) Wait(kube.ResourceList, time.Duration) error         { return nil }
func (hooksOnly) WaitWithJobs(kube.ResourceList, time.Duration) error { return nil }

func (w hooksOnly) WatchUntilReady(resources kube.ResourceList, timeout time.Duration) error {
	legacy, err := w.legacy()
	if err != nil {
		return fmt.Errorf("cannot wait for hooks: %w", err)
	}
	return legacy.WatchUntilReady(resources, timeout)
}

// WaitForDelete waits until the deleted hooks among resources are gone.
func (w hooksOnly) WaitForDelete(resources kube.ResourceList, timeout time.Duration) error {
	hooks := hookObjects(resources)
	if len(hooks) == 0 {
		return nil
	}
	legacy, err := w.legacy()
	if err != nil {
		return fmt.Errorf("cannot wait for deleted hooks: %w", err)
	}
	return legacy.WaitForDelete(hooks, timeout)
}

// hookObjects are the objects of resources that carry Helm's hook annotation.
func hookObjects(resources kube.ResourceList) kube.ResourceList {
	var out kube.ResourceList
	for _, info := range resources {
		if isHook(info) {
			out = append(out, info)
		}
	}
	return out
}

func isHook(info *resource.Info) bool {
	if info == nil || info.Object == nil {
		return false
	}
	obj, err := meta.Accessor(info.Object)
	if err != nil {
		return false
	}
	_, ok := obj.GetAnnotations()[hookAnnotation]
	return ok
}
