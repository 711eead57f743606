package helmops

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"helm.sh/helm/v4/pkg/release/common"
	"helm.sh/helm/v4/pkg/storage/driver"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/internal/drift"
	"github.com/autox-dev/autox/internal/format"
	"github.com/autox-dev/autox/internal/redact"
)

// Drift checks (DESIGN §3, issue 33): the objects of a release's deployed
// revision compared with the cluster, and in mode correct put back, without
// a Helm revision. This file does the reads and writes; internal/drift
// decides. Every request goes through the DriftChecker's own client: its
// own rate limiter, so that drift checks never take the tokens installs and
// upgrades need, and the Manager's fenced transport, so that no correction
// lands after the leadership term. A check that fails is reported in its
// DriftReport and blocks nothing: it makes no Helm call at all.

// Defaults of DriftOptions.
const (
	DefaultDriftQPS   = 10
	DefaultDriftBurst = 20
)

// DriftOptions configure a DriftChecker.
type DriftOptions struct {
	// QPS and Burst bound the checker's requests per second, apart from
	// the Manager's limit; 0: DefaultDriftQPS and DefaultDriftBurst.
	QPS   float32
	Burst int
	// Memory remembers the corrections for contested fields; nil: a new
	// one. Keep one per process: a new term goes on counting.
	Memory *drift.Memory
	// Now is the clock; nil: time.Now.
	Now func() time.Time
}

// DriftChecker checks and corrects the objects of releases; safe for
// concurrent use. Build one per Manager (per leadership term).
type DriftChecker struct {
	m      *Manager
	config *rest.Config // the Manager's, with the checker's rate limiter
	mem    *drift.Memory
	now    func() time.Time

	mu      sync.Mutex
	clients map[ServiceAccount]*driftClients
	records kubernetes.Interface // autox's own, shared by all
	// recs are the records last read, by release (namespace/name): a check
	// whose record the index shows at the same resourceVersion makes no
	// GET of it.
	recs map[string]*driftRecord
}

// driftRecord is what checks use of the record of one revision of a
// release, as read at resourceVersion.
type driftRecord struct {
	revision        int
	resourceVersion string
	manifest        string
	hide            *redact.Redactor // of the record's values
}

type driftClients struct {
	dyn     dynamic.Interface
	records kubernetes.Interface
}

// NewDriftChecker returns a DriftChecker of m's cluster and write fence.
// Call it on the Manager of autox's own identity: a release's service
// account is impersonated per check.
func (m *Manager) NewDriftChecker(opts DriftOptions) *DriftChecker {
	if opts.QPS <= 0 {
		opts.QPS = DefaultDriftQPS
	}
	if opts.Burst <= 0 {
		opts.Burst = DefaultDriftBurst
	}
	if opts.Memory == nil {
		opts.Memory = drift.NewMemory()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	rc := rest.CopyConfig(m.opts.RESTConfig) // keeps the fence (WrapTransport)
	rc.QPS, rc.Burst = opts.QPS, opts.Burst
	rc.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(opts.QPS, opts.Burst)
	return &DriftChecker{m: m, config: rc, mem: opts.Memory, now: opts.Now, clients: map[ServiceAccount]*driftClients{},
		recs: map[string]*driftRecord{}}
}

// Memory is the checker's memory of corrections.
func (c *DriftChecker) Memory() *drift.Memory { return c.mem }

// DriftTarget is one release to check.
type DriftTarget struct {
	Namespace, Name string
	// Revision is the release's newest revision (as the record index has
	// it): its record is read, and must be deployed.
	Revision int
	// ServiceAccount is the identity the release's operations run as
	// (zero: autox's own): the dry runs, reads and corrections run as it.
	ServiceAccount ServiceAccount
	// Policy is the release's drift policy; nil or off checks nothing.
	Policy *config.Drift
	// Suspended releases are checked and reported, never written.
	Suspended bool
	// Only, when set, limits the check to these objects of the release
	// (as Objects names them: the objects a watch saw change); nil checks
	// every object.
	Only []drift.ObjectRef
	// Redact, when set, masks the release's values in errors (the one its
	// operations use, which knows the values from Secret sources); nil:
	// the string values of the revision's record.
	Redact *redact.Redactor
}

// DriftReport is the check of one release. It holds no values: each
// object's fields are named by path only, and errors are redacted of the
// release's values (a Secret's error is reduced to its reason).
type DriftReport struct {
	Release  drift.Release
	Revision int
	// RecordVersion is the resourceVersion of the record the check read
	// (or, unchanged, took from the checker's cache).
	RecordVersion string
	Objects       []ObjectDrift
}

// ObjectDrift is the check of one object of a release.
type ObjectDrift struct {
	drift.Result
	// CheckErr says why the object could not be compared (its dry run was
	// refused: Forbidden, a webhook down, a duplicate key): reported, and
	// tried again at the next check.
	CheckErr error
	// Corrected says the correction was written; CorrectErr why it was
	// not (a Conflict: the object changed since it was read).
	Corrected  bool
	CorrectErr error
	// LiveUID and LiveVersion are the uid and resourceVersion of the live
	// object the check read (empty: missing, or not read): a caller that
	// watches the object knows from them whether it changed since.
	LiveUID     types.UID
	LiveVersion string
}

// Drifted reports whether any object of the release drifted.
func (r *DriftReport) Drifted() bool {
	for _, o := range r.Objects {
		if o.Result.Drifted() {
			return true
		}
	}
	return false
}

// Failed are the objects whose check failed.
func (r *DriftReport) Failed() []ObjectDrift {
	var out []ObjectDrift
	for _, o := range r.Objects {
		if o.CheckErr != nil {
			out = append(out, o)
		}
	}
	return out
}

// Check checks the objects of release t's revision t.Revision and, in mode
// correct, puts back what drifted. The error says the release could not
// be checked at all (its record unreadable, not deployed, not this
// instance's); a failure of one object is in its ObjectDrift. Neither
// blocks anything: Check never makes a Helm call.
func (c *DriftChecker) Check(ctx context.Context, t DriftTarget) (*DriftReport, error) {
	rep := &DriftReport{Release: drift.Release{Namespace: t.Namespace, Name: t.Name}, Revision: t.Revision}
	if !t.Policy.Enabled() {
		return rep, nil
	}
	rules, err := drift.Compile(t.Policy)
	if err != nil {
		return nil, fmt.Errorf("drift rules of release %s/%s: %w", t.Namespace, t.Name, err)
	}
	cl, err := c.clientsFor(t.ServiceAccount)
	if err != nil {
		return nil, err
	}
	rec, cached, err := c.record(ctx, cl, t)
	if err != nil {
		return nil, err
	}
	rep.RecordVersion = rec.resourceVersion
	hide := t.Redact
	if hide == nil {
		hide = rec.hide
	}
	objs, err := manifestObjects(rec.manifest, t)
	if err != nil {
		return nil, fmt.Errorf("cannot read the manifest of release %s/%s revision %d: %w", t.Namespace, t.Name, t.Revision, hide.Error(err))
	}
	// A correction starts from live reads: of the object, and of the
	// record when the check took it from the cache (confirmed once).
	var confirmErr error
	confirmed := !cached
	confirm := func() error {
		if !confirmed {
			confirmErr, confirmed = c.confirmRecord(ctx, cl, t, rec), true
		}
		return confirmErr
	}
	for _, desired := range objs {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		if t.Only != nil {
			if _, err := c.resource(cl, desired, t.Namespace); err == nil && !contains(t.Only, drift.RefOf(desired)) {
				continue
			}
		}
		rep.Objects = append(rep.Objects, c.checkObject(ctx, cl, t, rules, desired, hide, confirm))
	}
	return rep, nil
}

func contains(refs []drift.ObjectRef, r drift.ObjectRef) bool {
	for _, x := range refs {
		if x == r {
			return true
		}
	}
	return false
}

// Objects names the objects of release t's revision t.Revision, each with
// its namespace as the check uses it (the release's for a namespaced kind
// the manifest leaves without one, none for a cluster-wide kind): what a
// caller watches to check an object only when it changed. An object whose
// kind the cluster does not know is named as the manifest has it.
func (c *DriftChecker) Objects(ctx context.Context, t DriftTarget) ([]drift.ObjectRef, error) {
	cl, err := c.clientsFor(ServiceAccount{})
	if err != nil {
		return nil, err
	}
	rec, _, err := c.record(ctx, cl, t)
	if err != nil {
		return nil, err
	}
	objs, err := manifestObjects(rec.manifest, t)
	if err != nil {
		return nil, fmt.Errorf("cannot read the manifest of release %s/%s revision %d: %w", t.Namespace, t.Name, t.Revision, rec.hide.Error(err))
	}
	out := make([]drift.ObjectRef, 0, len(objs))
	for _, o := range objs {
		_, _ = c.resource(cl, o, t.Namespace) // sets the namespace
		out = append(out, drift.RefOf(o))
	}
	return out, nil
}

// recordsOf is the storage driver of the records of t's namespace.
func (c *DriftChecker) recordsOf(cl *driftClients, t DriftTarget) driver.Driver {
	discard := slog.New(slog.DiscardHandler).Handler()
	if c.m.opts.StorageDriver == DriverConfigMap {
		cm := driver.NewConfigMaps(cl.records.CoreV1().ConfigMaps(t.Namespace))
		cm.SetLogger(discard)
		return cm
	}
	return newSecretRecords(cl.records.CoreV1().Secrets(t.Namespace), discard)
}

// noNewer fails unless the release has no record of the revision after
// t's, read just before a correction: one that exists (an upgrade running,
// or done since t.Revision was read) or cannot be read stops it.
func (c *DriftChecker) noNewer(ctx context.Context, cl *driftClients, t DriftTarget) error {
	d := c.recordsOf(cl, t)
	next := t.Revision + 1
	err := c.m.untilDone(ctx, func() error {
		_, err := d.Get(recordKey(t.Name, next))
		return err
	})
	switch {
	case errors.Is(err, driver.ErrReleaseNotFound):
		return nil
	case err != nil:
		return fmt.Errorf("not corrected: cannot read whether release %s/%s has a revision %d: %w", t.Namespace, t.Name, next, err)
	}
	return fmt.Errorf("not corrected: release %s/%s has a revision %d newer than the checked revision %d", t.Namespace, t.Name, next, t.Revision)
}

// record is the record of t's revision: the cached one (cached true) when
// the record index shows it at the resourceVersion it was read at, else
// read and checked (readRecord) and cached.
func (c *DriftChecker) record(ctx context.Context, cl *driftClients, t DriftTarget) (*driftRecord, bool, error) {
	key := t.Namespace + "/" + t.Name
	if rv, ok := c.RecordVersion(t); ok {
		c.mu.Lock()
		r := c.recs[key]
		c.mu.Unlock()
		if r != nil && r.revision == t.Revision && r.resourceVersion == rv {
			return r, true, nil
		}
	}
	r, err := c.readRecord(ctx, cl, t)
	if err != nil {
		return nil, false, err
	}
	c.mu.Lock()
	c.recs[key] = r
	c.mu.Unlock()
	return r, false, nil
}

// RecordVersion is the resourceVersion of the record of t's revision as the
// Manager's record index shows it, without a request; false when the index
// cannot vouch for t's namespace or has no such record.
func (c *DriftChecker) RecordVersion(t DriftTarget) (string, bool) {
	ri := c.m.index.Load().usable(t.Namespace)
	if ri == nil {
		return "", false
	}
	for _, r := range ri.records(t.Name) {
		if r.revision == t.Revision {
			return r.resourceVersion, true
		}
	}
	return "", false
}

// Forget drops what the checker keeps of release namespace/name.
func (c *DriftChecker) Forget(namespace, name string) {
	c.mu.Lock()
	delete(c.recs, namespace+"/"+name)
	c.mu.Unlock()
}

// readRecord reads the record of t's revision live and checks it: it must
// be deployed and this instance's.
func (c *DriftChecker) readRecord(ctx context.Context, cl *driftClients, t DriftTarget) (*driftRecord, error) {
	meta, data, _, err := fetchRecord(ctx, cl.records, c.m.opts.StorageDriver, t.Namespace, recordKey(t.Name, t.Revision))
	if err != nil {
		return nil, fmt.Errorf("cannot read revision %d of release %s/%s: %w", t.Revision, t.Namespace, t.Name, err)
	}
	rel, err := decodeRecord(data)
	if err != nil {
		return nil, fmt.Errorf("cannot read revision %d of release %s/%s: %w", t.Revision, t.Namespace, t.Name, err)
	}
	if rel.Info == nil || rel.Info.Status != common.StatusDeployed {
		return nil, fmt.Errorf("revision %d of release %s/%s is not deployed: its objects are not checked", t.Revision, t.Namespace, t.Name)
	}
	if !format.RecordOf(rel.Name, t.Namespace, rel.Version, meta.Labels).OwnedBy(c.m.opts.Instance) {
		return nil, fmt.Errorf("revision %d of release %s/%s is not this instance's: its objects are not checked", t.Revision, t.Namespace, t.Name)
	}
	return &driftRecord{revision: t.Revision, resourceVersion: meta.ResourceVersion, manifest: rel.Manifest, hide: redact.New(rel.Config)}, nil
}

// confirmRecord reads the record of t's revision live before a correction
// that a cached record led to: it must still be deployed, this instance's
// and the one rec was read from.
func (c *DriftChecker) confirmRecord(ctx context.Context, cl *driftClients, t DriftTarget, rec *driftRecord) error {
	live, err := c.readRecord(ctx, cl, t)
	if err != nil {
		return fmt.Errorf("not corrected: %w", err)
	}
	if live.resourceVersion != rec.resourceVersion {
		c.Forget(t.Namespace, t.Name)
		return fmt.Errorf("not corrected: revision %d of release %s/%s changed since it was read", t.Revision, t.Namespace, t.Name)
	}
	return nil
}

// checkObject checks one object: the live object, the dry run of the
// desired one (both as the release's identity), the engine's decision,
// and in mode correct its correction.
//
// confirm is called before a correction: its error stops it.
func (c *DriftChecker) checkObject(ctx context.Context, cl *driftClients, t DriftTarget, rules *drift.Rules, desired *unstructured.Unstructured, hide *redact.Redactor, confirm func() error) ObjectDrift {
	od := ObjectDrift{Result: drift.Result{Object: drift.RefOf(desired)}}
	secret := desired.GetKind() == "Secret" && desired.GroupVersionKind().Group == ""
	fail := func(doing string, err error) error {
		return fmt.Errorf("cannot %s %s: %w", doing, od.Object, maskErr(err, secret, hide))
	}
	ri, err := c.resource(cl, desired, t.Namespace)
	if err != nil {
		od.CheckErr = fail("map", err)
		return od
	}
	name := desired.GetName()
	live, err := ri.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		live, err = nil, nil
	}
	if err != nil {
		od.CheckErr = fail("read", err)
		return od
	}
	if live != nil {
		od.LiveUID, od.LiveVersion = live.GetUID(), live.GetResourceVersion()
	}
	var dry *unstructured.Unstructured
	if live != nil {
		dry, err = ri.Apply(ctx, name, desired, metav1.ApplyOptions{FieldManager: format.FieldManager, Force: true, DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			od.CheckErr = fail("dry-run apply", err)
			return od
		}
	}
	mode := t.Policy.ModeOrOff()
	owner := drift.Release{Namespace: t.Namespace, Name: t.Name}
	res, err := drift.Check(drift.Input{Release: owner, Desired: desired, DryRun: dry, Live: live,
		Mode: mode, Suspended: t.Suspended, Rules: rules, Memory: c.mem, Now: c.now()})
	od.Result = res
	if err != nil {
		od.CheckErr = fail("compare", err)
		return od
	}
	// The engine writes nothing for these; neither does the executor.
	if res.Correction == nil || t.Suspended || mode != config.DriftCorrect {
		return od
	}
	if err := ctx.Err(); err != nil {
		od.CorrectErr = err
		return od
	}
	// Revision t.Revision stays deployed while an upgrade to the next one
	// applies its objects: a correction then would put back what that
	// upgrade just wrote, or re-create an object it removed.
	if err := confirm(); err != nil {
		od.CorrectErr = err
		return od
	}
	if err := c.noNewer(ctx, cl, t); err != nil {
		od.CorrectErr = err
		return od
	}
	if res.Correction.Create != nil {
		_, err = ri.Create(ctx, res.Correction.Create, metav1.CreateOptions{FieldManager: format.FieldManager})
	} else {
		_, err = ri.Patch(ctx, name, types.JSONPatchType, res.Correction.Patch, metav1.PatchOptions{FieldManager: format.FieldManager})
	}
	if err != nil {
		od.CorrectErr = fail("correct", err)
		return od
	}
	od.Corrected = true
	c.mem.Corrected(owner, res.Object, res.Correction.Paths, c.now())
	return od
}

// resource is the dynamic client of desired's resource, in its namespace
// (the release's when the manifest names none and the kind is namespaced).
func (c *DriftChecker) resource(cl *driftClients, desired *unstructured.Unstructured, namespace string) (dynamic.ResourceInterface, error) {
	if err := c.m.discovery.init(); err != nil {
		return nil, err
	}
	gvk := desired.GroupVersionKind()
	mapping, err := c.m.discovery.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, err
	}
	if mapping.Scope.Name() != meta.RESTScopeNameNamespace {
		desired.SetNamespace("")
		return cl.dyn.Resource(mapping.Resource), nil
	}
	if desired.GetNamespace() == "" {
		desired.SetNamespace(namespace)
	}
	return cl.dyn.Resource(mapping.Resource).Namespace(desired.GetNamespace()), nil
}

// clientsFor are the checker's clients acting as sa, built once.
func (c *DriftChecker) clientsFor(sa ServiceAccount) (*driftClients, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cl := c.clients[sa]; cl != nil {
		return cl, nil
	}
	rc := rest.CopyConfig(c.config)
	if !sa.IsZero() {
		rc.Impersonate = rest.ImpersonationConfig{UserName: sa.Username()}
	}
	hc, err := rest.HTTPClientFor(rc)
	if err != nil {
		return nil, fmt.Errorf("cannot create the drift client of %s: %w", sa, err)
	}
	dyn, err := dynamic.NewForConfigAndClient(rc, hc)
	if err != nil {
		return nil, fmt.Errorf("cannot create the drift client of %s: %w", sa, err)
	}
	// Records are read as autox, as every other read of them.
	records := c.records
	if records == nil {
		if records, err = kubernetes.NewForConfig(c.config); err != nil {
			return nil, fmt.Errorf("cannot create the drift client of %s: %w", sa, err)
		}
		c.records = records
	}
	cl := &driftClients{dyn: dyn, records: records}
	c.clients[sa] = cl
	return cl, nil
}

// maskErr is err redacted of the release's values; a Secret's error is
// reduced to the API server's reason and code, since its message may quote
// the Secret's data.
func maskErr(err error, secret bool, hide *redact.Redactor) error {
	if !secret {
		return hide.Error(err)
	}
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		s := st.Status()
		return &maskedError{msg: fmt.Sprintf("the API server answered %d %s (the Secret's message is not shown)", s.Code, s.Reason), err: err}
	}
	return &maskedError{msg: "the request failed (the Secret's message is not shown)", err: err}
}

// maskedError keeps err for errors.Is/As (apierrors.IsConflict and the
// like) and shows only msg.
type maskedError struct {
	msg string
	err error
}

func (e *maskedError) Error() string { return e.msg }
func (e *maskedError) Unwrap() error { return e.err }
