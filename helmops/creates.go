package helmops

import (
	"errors"
	"sync"

	"helm.sh/helm/v4/pkg/kube"
	"k8s.io/cli-runtime/pkg/resource"
	"k8s.io/client-go/util/retry"
)

// Helm 4 creates a release's objects client-side under one mutex shared by
// the whole process (kube.createResource, helm/helm#30972, added against a
// data race seen in Helm's own tests): every create of every install autox
// runs at once waits for the one in flight, so the workers' installs queue
// on one API round trip at a time. At 2,000 releases the mutex alone cost
// 14 points of the floor share (45 % with it, 59 % without; BENCHMARKS.md).
// Helm 3 had no such lock.
//
// createClientSide is Helm 4's client-side Create without that mutex and
// otherwise the same: the objects in the order Helm sorted them, one kind
// after another, those of one kind at once; each a POST under autox's field
// manager, retried on a conflict (a ResourceQuota's), the object then
// refreshed from the response. What each goroutine touches is its own
// resource.Info; the REST clients they share are safe for concurrent use.
// Only a real client-side install uses it (kubeClient.clientSideCreates):
// a server-side one applies through Helm's own code, and no dry run
// reaches Create. The flag stands for the options Helm passes (they are
// unexported): an install's Create calls all pass its own apply method,
// and autox sets no RollbackOnFailure, whose uninstall on the same
// configuration would create its delete hooks server-side.
func createClientSide(resources kube.ResourceList) (*kube.Result, error) {
	if len(resources) == 0 {
		return nil, kube.ErrNoObjectsVisited
	}
	if err := byKind(resources, createObject); err != nil {
		return nil, err
	}
	return &kube.Result{Created: resources}, nil
}

// byKind runs fn for each of infos as Helm's batchPerform does: a run of
// one kind at once, the next kind once the run has ended; every error is
// returned, joined.
func byKind(infos kube.ResourceList, fn func(*resource.Info) error) error {
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
		kind string
	)
	for i, info := range infos {
		k := info.Object.GetObjectKind().GroupVersionKind().Kind
		if i > 0 && k != kind {
			wg.Wait()
		}
		kind = k
		wg.Add(1)
		go func(info *resource.Info) {
			defer wg.Done()
			if err := fn(info); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}(info)
	}
	wg.Wait()
	return errors.Join(errs...)
}

// createObject creates one object as Helm's createResource does.
func createObject(info *resource.Info) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		obj, err := resource.NewHelper(info.Client, info.Mapping).WithFieldManager(kube.ManagedFieldsManager).
			Create(info.Namespace, true, info.Object)
		if err != nil {
			return err
		}
		return info.Refresh(obj, true)
	})
}
