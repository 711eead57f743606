// Package driftwatch is the drift loop of one leadership term: it checks
// the releases its Source names (in sync, not locked, this instance's, with
// drift on) when one of their objects changed, as metadata-only watches
// shared per kind and namespace see it, and on a slow periodic re-check,
// which is skipped without a request while the watches and the record
// index show the release's objects and record as its last clean check
// read them.
// A release with drift off is never named by the Source, so it costs no
// watch and no request. Checks run in a small worker pool through the
// checker's own rate limiter; a failed check is reported and retried with
// backoff; a release being operated on (Busy) is skipped, so drift never
// blocks an install, upgrade or uninstall.
package driftwatch

import (
	"context"
	"hash/fnv"
	"maps"
	"reflect"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"

	"github.com/autox-dev/autox/helmops"
	"github.com/autox-dev/autox/internal/drift"
	"github.com/autox-dev/autox/internal/metainformer"
)

// Checker is what the loop uses of a helmops.DriftChecker.
type Checker interface {
	Check(ctx context.Context, t helmops.DriftTarget) (*helmops.DriftReport, error)
	Objects(ctx context.Context, t helmops.DriftTarget) ([]drift.ObjectRef, error)
	// RecordVersion is the resourceVersion of t's record as the record
	// index shows it, without a request (false: the index cannot say).
	RecordVersion(t helmops.DriftTarget) (string, bool)
	// Forget drops what the checker keeps of a release.
	Forget(namespace, name string)
}

// Target is one release to check: the check's target and what names the
// release's trigger object (for its Events).
type Target struct {
	helmops.DriftTarget
	// Spec is the release's spec; ObjectNamespace and ObjectName its
	// trigger object for a selector spec's release ("" for a named spec's).
	Spec                        string
	ObjectNamespace, ObjectName string
}

// Options configure a Loop.
type Options struct {
	Checker  Checker
	Metadata metadata.Interface
	Mapper   meta.RESTMapper
	// Source names the releases to check now: in sync, not locked, newest
	// revision deployed, this instance's, drift warn or correct. It is read
	// every Refresh.
	Source func(ctx context.Context) ([]Target, error)
	// Busy, if set, says a release is being operated on: its check waits.
	Busy func(namespace, name string) bool
	// Report hears every check that ran (report non-nil) or failed (err).
	Report func(t Target, rep *helmops.DriftReport, err error)
	// Events, if set, records the checks' Events on the object Ref names
	// (nil: no Event); Metrics, if set, counts them.
	Events  record.EventRecorder
	Ref     func(Target) *corev1.ObjectReference
	Metrics *Metrics
	// Workers checks run at once (default 2).
	Workers int
	// Coalesce is how long a change waits so that changes of one release
	// make one check (default 2s); Period the periodic re-check of each
	// release (default 10m, spread); Refresh how often Source is read
	// (default 30s).
	Coalesce, Period, Refresh time.Duration
	// VerifyEvery, if above 0, makes every VerifyEvery-th periodic check
	// of a release a real one even when nothing changed; 0: a periodic
	// check of a release whose objects and record are as its last clean
	// check read them is skipped (see quiet).
	VerifyEvery int
	// RetryBase and RetryMax bound the backoff of a failed check
	// (defaults 5s and 5m).
	RetryBase, RetryMax time.Duration
	Log                 zerolog.Logger
}

// watchKey is one shared informer: a resource in a namespace ("" for a
// cluster-wide kind).
type watchKey struct {
	GVR       schema.GroupVersionResource
	Namespace string
}

// objKey is one watched object.
type objKey struct {
	watchKey
	Name string
}

// version is what tells one state of an object from another: a new uid
// is a new object, and every write moves the resourceVersion.
type version struct {
	UID             types.UID
	ResourceVersion string
}

// entry is one release the loop checks.
type entry struct {
	target   Target
	objects  map[objKey]drift.ObjectRef
	nextFull time.Time
	changed  map[drift.ObjectRef]bool
	// unwatched says an object of the release has a kind the cluster does
	// not serve (no watch): its periodic checks are never skipped.
	unwatched bool
	// clean are the objects whose last check found no drift, at the
	// version that check read; cleanRecord the resourceVersion of the
	// record they were checked against. skipped counts the periodic
	// checks skipped since the last real one.
	clean       map[objKey]version
	cleanRecord string
	skipped     int
}

// Loop is the drift loop of one term.
type Loop struct {
	o     Options
	queue workqueue.TypedRateLimitingInterface[string]
	set   *metainformer.Set[watchKey]

	mu       sync.Mutex
	releases map[string]*entry
	owners   map[objKey]map[string]bool // object -> release keys
	// drifted holds the releases whose last check left drift in place
	// (what this loop adds to autox_drifted_releases).
	drifted map[string]bool
}

// New returns a Loop of opts.
func New(o Options) *Loop {
	if o.Workers <= 0 {
		o.Workers = 2
	}
	if o.Coalesce <= 0 {
		o.Coalesce = 2 * time.Second
	}
	if o.Period <= 0 {
		o.Period = 10 * time.Minute
	}
	if o.Refresh <= 0 {
		o.Refresh = 30 * time.Second
	}
	if o.RetryBase <= 0 {
		o.RetryBase = 5 * time.Second
	}
	if o.RetryMax <= 0 {
		o.RetryMax = 5 * time.Minute
	}
	l := &Loop{o: o, releases: map[string]*entry{}, owners: map[objKey]map[string]bool{}, drifted: map[string]bool{}}
	l.queue = workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](o.RetryBase, o.RetryMax),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: ""})
	l.set = metainformer.NewSet(l.spec, nil)
	return l
}

func releaseKey(ns, name string) string { return ns + "/" + name }

// Run runs the loop until ctx ends; it stops every watch and worker before
// it returns.
func (l *Loop) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	defer func() {
		l.queue.ShutDown()
		wg.Wait()
		l.set.Stop()
		l.mu.Lock()
		for k := range l.drifted {
			l.setDrifted(k, false)
		}
		l.mu.Unlock()
	}()
	for i := 0; i < l.o.Workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for l.next(ctx) {
			}
		}()
	}
	t := time.NewTicker(l.o.Refresh)
	defer t.Stop()
	for {
		l.refresh(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// refresh reads the Source, learns the objects of new or changed releases
// and runs exactly the watches they need.
func (l *Loop) refresh(ctx context.Context) {
	targets, err := l.o.Source(ctx)
	if err != nil {
		l.o.Log.Warn().Err(err).Msg("drift: cannot list the releases to check")
		return
	}
	l.o.Log.Debug().Int("releases", len(targets)).Msg("drift: releases to check")
	now := time.Now()
	want := map[string]Target{}
	for _, t := range targets {
		if t.Policy.Enabled() {
			want[releaseKey(t.Namespace, t.Name)] = t
		}
	}
	l.mu.Lock()
	for k, e := range l.releases {
		if _, ok := want[k]; !ok {
			l.drop(k, e)
		}
	}
	var learn []Target
	for k, t := range want {
		if e, ok := l.releases[k]; ok && e.target.Revision == t.Revision {
			if !sameCheck(e.target, t) {
				e.clean = nil // what was clean may not be under the new policy
			}
			e.target = t // a policy change applies at the next check
			continue
		}
		learn = append(learn, t)
	}
	l.mu.Unlock()
	for _, t := range learn {
		refs, err := l.o.Checker.Objects(ctx, t.DriftTarget)
		if err != nil {
			l.o.Log.Warn().Err(err).Str("release", releaseKey(t.Namespace, t.Name)).Msg("drift: cannot read the release's objects")
			continue
		}
		objs := map[objKey]drift.ObjectRef{}
		unwatched := false
		for _, r := range refs {
			m, err := l.o.Mapper.RESTMapping(schema.GroupKind{Group: r.Group, Kind: r.Kind}, r.Version)
			if err != nil {
				unwatched = true
				continue // a kind not served (yet): the periodic check covers it
			}
			objs[objKey{watchKey{m.Resource, r.Namespace}, r.Name}] = r
		}
		k := releaseKey(t.Namespace, t.Name)
		l.mu.Lock()
		if old, ok := l.releases[k]; ok {
			l.drop(k, old)
		}
		// The first check of a release is spread over the period, and a
		// new revision's is soon: the watches' initial lists are no change.
		first := spread(k, l.o.Period)
		if t.Revision > 1 {
			first = l.o.Coalesce
		}
		l.releases[k] = &entry{target: t, objects: objs, nextFull: now.Add(first), changed: map[drift.ObjectRef]bool{}, unwatched: unwatched}
		for ok := range objs {
			if l.owners[ok] == nil {
				l.owners[ok] = map[string]bool{}
			}
			l.owners[ok][k] = true
		}
		l.mu.Unlock()
		l.queue.AddAfter(k, first)
	}
	l.mu.Lock()
	keys := map[watchKey]bool{}
	for ok := range l.owners {
		keys[ok.watchKey] = true
	}
	l.mu.Unlock()
	list := make([]watchKey, 0, len(keys))
	for k := range keys {
		list = append(list, k)
	}
	sort.Slice(list, func(i, j int) bool {
		return list[i].GVR.String()+list[i].Namespace < list[j].GVR.String()+list[j].Namespace
	})
	l.set.Sync(ctx, list)
}

// drop forgets release k (l.mu held).
func (l *Loop) drop(k string, e *entry) {
	for ok := range e.objects {
		delete(l.owners[ok], k)
		if len(l.owners[ok]) == 0 {
			delete(l.owners, ok)
		}
	}
	delete(l.releases, k)
	l.setDrifted(k, false)
	l.o.Checker.Forget(e.target.Namespace, e.target.Name)
}

// setDrifted records whether release k has drift left (l.mu held).
func (l *Loop) setDrifted(k string, drifted bool) {
	if l.drifted[k] == drifted {
		return
	}
	if drifted {
		l.drifted[k] = true
	} else {
		delete(l.drifted, k)
	}
	if l.o.Metrics != nil {
		d := 1.0
		if !drifted {
			d = -1
		}
		l.o.Metrics.drifted.Add(d)
	}
}

// report tells of one check: the Report hook, Events, metrics and logs.
func (l *Loop) report(k string, t Target, rep *helmops.DriftReport, err error) {
	if l.o.Report != nil {
		l.o.Report(t, rep, err)
	}
	l.o.Metrics.count(rep, err)
	log := l.o.Log.With().Str("release", k).Logger()
	if err != nil {
		log.Warn().Err(err).Msg("drift check failed; retrying later")
		return
	}
	for _, o := range rep.Failed() {
		log.Warn().Err(o.CheckErr).Str("object", o.Object.String()).Msg("drift check of an object failed; retrying later")
	}
	l.mu.Lock()
	if l.releases[k] != nil {
		l.setDrifted(k, outstanding(rep))
	}
	l.mu.Unlock()
	var ref *corev1.ObjectReference
	if l.o.Events != nil && l.o.Ref != nil {
		ref = l.o.Ref(t)
	}
	for _, e := range Events(t, rep) {
		log.Info().Str("reason", e.Reason).Msg(e.Message)
		if ref != nil {
			l.o.Events.Event(ref, e.Type, e.Reason, e.Message)
		}
	}
}

// spread is a stable offset of release k within period, so that the
// periodic checks of many releases do not come at once.
func spread(k string, period time.Duration) time.Duration {
	h := fnv.New64a()
	_, _ = h.Write([]byte(k))
	return time.Duration(h.Sum64() % uint64(period))
}

// changed queues the releases owning object o for a check after Coalesce.
func (l *Loop) changed(o objKey) {
	l.mu.Lock()
	var keys []string
	for k := range l.owners[o] {
		if e := l.releases[k]; e != nil {
			e.changed[e.objects[o]] = true
			keys = append(keys, k)
		}
	}
	l.mu.Unlock()
	for _, k := range keys {
		l.queue.AddAfter(k, l.o.Coalesce)
	}
}

// next runs one check; false when the queue is shut down.
func (l *Loop) next(ctx context.Context) bool {
	k, quit := l.queue.Get()
	if quit {
		return false
	}
	defer l.queue.Done(k)
	l.mu.Lock()
	e := l.releases[k]
	if e == nil {
		l.mu.Unlock()
		l.queue.Forget(k)
		return true
	}
	t := e.target
	now := time.Now()
	full := !now.Before(e.nextFull)
	if !full && len(e.changed) == 0 {
		l.mu.Unlock()
		return true // a stale periodic entry; the next one is queued
	}
	if full && len(e.changed) == 0 && (l.o.VerifyEvery <= 0 || e.skipped+1 < l.o.VerifyEvery) && l.quietNow(e) {
		e.skipped++
		e.nextFull = now.Add(l.o.Period)
		l.mu.Unlock()
		l.o.Metrics.checked(resultSkipped)
		l.queue.Forget(k)
		l.queue.AddAfter(k, l.o.Period)
		return true
	}
	if l.o.Busy != nil && l.o.Busy(t.Namespace, t.Name) {
		l.mu.Unlock()
		l.queue.AddAfter(k, l.o.Coalesce)
		return true
	}
	if !full {
		for r := range e.changed {
			t.Only = append(t.Only, r)
		}
	}
	e.changed = map[drift.ObjectRef]bool{}
	if full {
		e.nextFull = now.Add(l.o.Period)
		e.skipped = 0
	}
	l.mu.Unlock()

	rep, err := l.o.Checker.Check(ctx, t.DriftTarget)
	if ctx.Err() != nil {
		return true // the term ended: its checks say nothing
	}
	l.report(k, t, rep, err)
	failed := err != nil || (rep != nil && len(rep.Failed()) > 0)
	l.mu.Lock()
	if e := l.releases[k]; e != nil && sameCheck(e.target, t) {
		e.learn(rep, failed)
	}
	l.mu.Unlock()
	if failed {
		// Retry the whole release: the failed objects are checked again.
		l.mu.Lock()
		if e := l.releases[k]; e != nil {
			e.nextFull = time.Time{}
		}
		l.mu.Unlock()
		l.queue.AddRateLimited(k)
		return true
	}
	l.queue.Forget(k)
	// The queue keeps only the earliest of a key's delayed entries: a
	// change's check may have taken the place of the periodic one.
	l.mu.Lock()
	var until time.Duration
	if e := l.releases[k]; e != nil {
		until = time.Until(e.nextFull)
	}
	l.mu.Unlock()
	l.queue.AddAfter(k, until)
	return true
}

// sameCheck says whether a check of a and one of b decide alike: same
// revision, policy, suspension and identity.
func sameCheck(a, b Target) bool {
	return a.Revision == b.Revision && a.Suspended == b.Suspended && a.ServiceAccount == b.ServiceAccount &&
		reflect.DeepEqual(a.Policy, b.Policy)
}

// learn takes in what a check found: the objects it found without drift
// at the versions it read them, against its record. A failed check
// forgets every object (the next is a real check of all).
func (e *entry) learn(rep *helmops.DriftReport, failed bool) {
	if failed || rep == nil {
		e.clean = nil
		return
	}
	if e.clean == nil || rep.RecordVersion != e.cleanRecord {
		e.clean, e.cleanRecord = map[objKey]version{}, rep.RecordVersion
	}
	keys := make(map[drift.ObjectRef]objKey, len(e.objects))
	for ok, r := range e.objects {
		keys[r] = ok
	}
	for _, o := range rep.Objects {
		ok, watched := keys[o.Object]
		if !watched {
			continue
		}
		if o.Drifted() || o.Corrected || o.CorrectErr != nil || o.LiveVersion == "" {
			delete(e.clean, ok)
			continue
		}
		e.clean[ok] = version{UID: o.LiveUID, ResourceVersion: o.LiveVersion}
	}
}

// quietNow says whether a periodic check of e can be skipped now: the
// watches and the record index see every object and the record as the
// last clean checks read them (l.mu held).
func (l *Loop) quietNow(e *entry) bool {
	if e.unwatched || len(e.clean) != len(e.objects) {
		return false
	}
	record, ok := l.o.Checker.RecordVersion(e.target.DriftTarget)
	if !ok || record != e.cleanRecord {
		return false
	}
	current := make(map[objKey]version, len(e.objects))
	for ok := range e.objects {
		if v, seen := l.watched(ok); seen {
			current[ok] = v
		}
	}
	return quiet(e.clean, current)
}

// watched is object o's version as its watch has it; false when the watch
// has not synced, has no watch open (lost, or relisting), or has no such
// object.
func (l *Loop) watched(o objKey) (version, bool) {
	inf := l.set.Get(o.watchKey)
	if inf == nil || !inf.HasSynced() || !inf.Watching() {
		return version{}, false
	}
	key := o.Name
	if o.Namespace != "" {
		key = o.Namespace + "/" + o.Name
	}
	obj, exists, err := inf.Indexer().GetByKey(key)
	if err != nil || !exists {
		return version{}, false
	}
	m, isMeta := obj.(*metav1.PartialObjectMetadata)
	if !isMeta {
		return version{}, false
	}
	return version{UID: m.UID, ResourceVersion: m.ResourceVersion}, true
}

// quiet says whether nothing changed of a release's objects since their
// last clean checks: every object clean then is seen now (current) at the
// same uid and resourceVersion. A missing object, one not seen, or any
// write since is a change.
func quiet(clean, current map[objKey]version) bool {
	if len(clean) == 0 {
		return false
	}
	for ok, v := range clean {
		if cur, seen := current[ok]; !seen || cur != v {
			return false
		}
	}
	return true
}

// spec is the metadata informer of one watch key: it tells the loop of
// objects that changed in a way that can be drift.
func (l *Loop) spec(k watchKey) metainformer.Spec {
	var res metadata.ResourceInterface = l.o.Metadata.Resource(k.GVR)
	if k.Namespace != "" {
		res = l.o.Metadata.Resource(k.GVR).Namespace(k.Namespace)
	}
	emit := func(obj interface{}) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		if m, ok := obj.(*metav1.PartialObjectMetadata); ok {
			l.changed(objKey{k, m.Name})
		}
	}
	return metainformer.Spec{
		List:  func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return res.List(ctx, o) },
		Watch: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) { return res.Watch(ctx, o) },
		// Annotations are kept as a hash only (a Secret's may hold its
		// data), managed fields not at all.
		Transform: func(obj interface{}) (interface{}, error) {
			if m, ok := obj.(*metav1.PartialObjectMetadata); ok {
				m.Annotations = map[string]string{annotationsHash: hashOf(m.Annotations)}
				m.ManagedFields = nil
			}
			return obj, nil
		},
		Handler: cache.ResourceEventHandlerDetailedFuncs{
			AddFunc: func(obj interface{}, initial bool) {
				if !initial {
					emit(obj) // created again: maybe by someone else
				}
			},
			UpdateFunc: func(oldObj, newObj interface{}) {
				o, ok1 := oldObj.(*metav1.PartialObjectMetadata)
				n, ok2 := newObj.(*metav1.PartialObjectMetadata)
				if ok1 && ok2 && !Changed(o, n) {
					return
				}
				emit(newObj)
			},
			DeleteFunc: emit,
		},
	}
}

const annotationsHash = "autox.dev/annotations-hash"

func hashOf(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	h := fnv.New64a()
	for _, k := range keys {
		_, _ = h.Write([]byte(k + "\x00" + m[k] + "\x00"))
	}
	return strconv.FormatUint(h.Sum64(), 16)
}

// Changed says whether an update of an object can be drift: a new uid,
// generation, labels or annotations, or any write of a kind without a
// generation (a ConfigMap's data moves only its resourceVersion). A
// status-only update of a Deployment is not.
func Changed(o, n *metav1.PartialObjectMetadata) bool {
	if o.UID != n.UID || o.Generation != n.Generation || !maps.Equal(o.Labels, n.Labels) || !maps.Equal(o.Annotations, n.Annotations) {
		return true
	}
	return n.Generation == 0 && o.ResourceVersion != n.ResourceVersion
}
