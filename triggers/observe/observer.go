// Package observe makes the live reads of one reconcile and hands them to
// the pure plan as one plan.Observation. An Observer reads in two explicit
// phases: the trigger (the spec's or object's releases, the trigger object
// itself, who else claims it and whether a selector spec serves it), then
// the release specs its trigger state asks for (names in use, releases of
// those names, values sources and local charts, these two only while the
// trigger is wanted). It decides nothing beyond what to read; it writes
// nothing. The readers of trigger objects (TriggerReader), values sources
// (SourceReader) and chart identities (ChartIdentities) live here too, and
// the periodic pass reads through the same Observer.
package observe

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	corev1 "k8s.io/api/core/v1"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/helmops"
	"github.com/autox-dev/autox/helmops/chartsource"
	"github.com/autox-dev/autox/internal/format"
	"github.com/autox-dev/autox/triggers/plan"
)

// Releases is the part of helmops.Manager that observation reads with.
type Releases interface {
	SpecReleases(ctx context.Context, namespaces []string, spec string) ([]*format.Release, error)
	ObjectReleases(ctx context.Context, namespaces []string, spec string, obj format.Object) ([]*format.Release, error)
	Lookup(ctx context.Context, namespace, name string) (*format.Release, error)
	NamesInUse(ctx context.Context, namespace string, names []string) (map[string]bool, error)
	// Instance is the autox instance whose releases these are.
	Instance() string
}

// Records lists release records by their labels (helmops.Inventory).
type Records interface {
	Managed(ctx context.Context, namespaces []string) ([]format.Record, error)
}

// Triggers reads trigger objects live: one object for a reconcile, every
// object of a (resource, namespace, selector) for a pass. TriggerReader is
// the one implementation.
type Triggers interface {
	Get(ctx context.Context, t config.Trigger) (plan.TriggerRead, *corev1.ObjectReference, error)
	List(ctx context.Context, k ListKey) (map[string]plan.TriggerRead, error)
	// Reference names an object read by List for Events (nil: unknown).
	Reference(t config.Trigger, uid string) *corev1.ObjectReference
}

// BulkReads lets a pass's LIST stand in for the live GET of a trigger
// (DESIGN §5): Listing hears each LIST of a pass, before it is sent (done
// with its objects after; nil objects: it failed), and Take hands out a
// listed object as the live read of the key (specName, obj) under cfg, or
// refuses (false), and the reconcile GETs. The controller's bulkReads is
// the one implementation.
type BulkReads interface {
	Listing(ctx context.Context, cfg *config.Config, k ListKey) (done func(objs map[string]plan.TriggerRead))
	Take(cfg *config.Config, specName string, obj format.Object, t config.Trigger) (plan.TriggerRead, bool)
}

// liveOnlyKey marks a context whose reads must all be GETs.
type liveOnlyKey struct{}

// LiveOnly returns ctx marked so that the Observer reads the trigger with a
// GET even where a pass's LIST could stand in: the reobservation after a
// reconcile's removals must see what they left, not what a LIST (perhaps
// of a pass that began since) held.
func LiveOnly(ctx context.Context) context.Context {
	return context.WithValue(ctx, liveOnlyKey{}, true)
}

func liveOnly(ctx context.Context) bool { v, _ := ctx.Value(liveOnlyKey{}).(bool); return v }

// Options are what an Observer reads with.
type Options struct {
	Releases Releases
	// Records lists release records; selector specs need them to admit
	// objects within maxObjects when no pass has done so yet.
	Records  Records
	Triggers Triggers
	// Sources reads the Secrets and ConfigMaps of valuesFrom entries; nil
	// fails every release spec that has some.
	Sources ValuesSources
	Charts  chartsource.ChartSource
	// Attempts reads the failed attempts recorded for release specs with
	// remediation retries; nil fails every such release spec.
	Attempts AttemptReader
	// GCNamespaces are the namespaces whose releases of ours are looked at.
	GCNamespaces func() []string
	// Managed is the record of managed namespaces as last read or written
	// (DESIGN §4); nil when none is kept.
	Managed func() *plan.ManagedNamespaces
	// Defaults are the policies of release specs that set none
	// (--helm-timeout, --max-history).
	Defaults config.PolicyDefaults
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	Log zerolog.Logger
	// DefaultServiceAccount is --default-service-account, which the plan
	// makes releases that name no account run as.
	DefaultServiceAccount string
	// Departed returns the dependsOn of a spec's release specs that left
	// the config (ConfigState.Departed); nil knows none.
	Departed func(spec string) map[string][]string
}

// Observer gathers observations. It keeps what several reconciles and the
// pass share: the claim index of the config in force, the identities of
// local charts, and which objects each selector spec serves.
type Observer struct {
	opts Options
	// bulk, if set (SetBulk, before any read), hands out a pass's LISTs.
	bulk       BulkReads
	charts     *ChartIdentities
	admissions *Admissions
	claims     atomic.Pointer[plan.ClaimIndex]
}

// New returns an Observer reading with opts.
func New(opts Options) *Observer {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.GCNamespaces == nil {
		opts.GCNamespaces = func() []string { return nil }
	}
	if opts.Departed == nil {
		opts.Departed = func(string) map[string][]string { return nil }
	}
	return &Observer{opts: opts, charts: NewChartIdentities(opts.Charts), admissions: &Admissions{}}
}

// SetBulk makes b hear the pass's LISTs and offer them as live reads of
// triggers; call it before the Observer reads anything.
func (ob *Observer) SetBulk(b BulkReads) { ob.bulk = b }

// Defaults are the policies of release specs that set none.
func (ob *Observer) Defaults() config.PolicyDefaults { return ob.opts.Defaults }

// Instance is the autox instance observed.
func (ob *Observer) Instance() string { return ob.opts.Releases.Instance() }

// Admissions are the objects each selector spec serves within maxObjects.
func (ob *Observer) Admissions() *Admissions { return ob.admissions }

// Claims returns the claim index of cfg, built once per config.
func (ob *Observer) Claims(cfg *config.Config) *plan.ClaimIndex {
	if idx := ob.claims.Load(); idx != nil && idx.Config() == cfg {
		return idx
	}
	idx := plan.NewClaimIndex(cfg)
	ob.claims.Store(idx)
	return idx
}

// Observe reads everything the decision for one spec needs, or for one
// object of a selector spec (obj not zero), in two phases: the trigger, then
// the release specs. An error means nothing can be decided (the trigger or
// every namespace unreadable); failures of one release spec are in its
// ReleaseSpecObservation.
func (ob *Observer) Observe(ctx context.Context, cfg *config.Config, specName string, obj format.Object) (*plan.Observation, error) {
	o, state, err := ob.observeTrigger(ctx, cfg, specName, obj)
	if err != nil {
		return nil, err
	}
	if o.Config != nil {
		ob.observeReleaseSpecs(ctx, cfg, o, state.Wanted())
	}
	o.Now, o.Managed = ob.opts.Now(), ob.managed()
	return o, nil
}

// managed is the record of managed namespaces as last read or written.
func (ob *Observer) managed() *plan.ManagedNamespaces {
	if ob.opts.Managed == nil {
		return nil
	}
	return ob.opts.Managed()
}

// observeTrigger is the first phase: the spec's (or the object's) releases,
// then the trigger object live, who claims it, and for a wanted object of a
// selector spec without releases whether the spec serves it. A spec removed
// from the config needs nothing more. state is the trigger's state as the
// first phase found it (conflict and over-limit included).
func (ob *Observer) observeTrigger(ctx context.Context, cfg *config.Config, specName string, obj format.Object) (o *plan.Observation, state plan.TriggerState, err error) {
	spec := cfg.Specs[specName]
	if spec != nil && !obj.IsZero() {
		if spec, err = spec.ForObject(specName, obj.Namespace, obj.Name); err != nil {
			return nil, 0, err
		}
	}
	o = &plan.Observation{Spec: specName, Config: spec, Object: obj, Instance: ob.Instance(), InForce: cfg,
		ReleaseSpecs: map[string]plan.ReleaseSpecObservation{}, Defaults: ob.opts.Defaults, DefaultServiceAccount: ob.opts.DefaultServiceAccount,
		Departed: ob.opts.Departed(specName)}
	state = plan.TriggerSpecRemoved
	// A namespace whose records cannot be read fails the release specs
	// that live there, a release whose newest record cannot be decoded the
	// release spec that wants it; the others are decided from what could
	// be read.
	var current []*format.Release
	if obj.IsZero() {
		current, err = ob.opts.Releases.SpecReleases(ctx, ob.opts.GCNamespaces(), specName)
	} else {
		current, err = ob.opts.Releases.ObjectReleases(ctx, ob.opts.GCNamespaces(), specName, obj)
	}
	unread := helmops.FailedNamespaces(err)
	o.Undecodable = helmops.FailedReleases(err)
	if err != nil && unread == nil && o.Undecodable == nil {
		return nil, 0, fmt.Errorf("cannot read releases of spec %s: %w", specName, err)
	}
	o.Current = current
	if len(unread) > 0 {
		var nerr *helmops.NamespacesError
		errors.As(err, &nerr)
		o.Unread = nerr.Failed
	}
	if spec == nil {
		return o, state, nil
	}
	if !obj.IsZero() {
		o.OutOfScope = !cfg.Covers(cfg.Specs[specName].Trigger, obj.Namespace)
	}
	if !o.OutOfScope {
		// An object out of scope is decided from the config alone: its
		// namespace may no longer be readable at all.
		if o.Trigger, o.Ref, err = ob.readTrigger(ctx, cfg, specName, obj, spec.Trigger); err != nil {
			return nil, 0, err
		}
	}
	t := spec.Trigger
	if o.Trigger.Found {
		// Who else claims this object is judged from its labels as read now.
		self := obj
		if self.IsZero() {
			self = format.Object{Namespace: t.Namespace, Name: t.Name}
		}
		o.Claimants = ob.Claims(cfg).Claimants(t.Group, t.Resource, self, o.Trigger.Labels)
	}
	state, _ = plan.TriggerOf(*o)
	if !obj.IsZero() && state.Wanted() && len(o.Current) == 0 {
		if o.OverLimit, err = ob.overLimit(ctx, cfg, specName, obj); err != nil {
			return nil, 0, err
		}
		state, _ = plan.TriggerOf(*o)
	}
	return o, state, nil
}

// readTrigger reads the trigger live: from the pass's LIST when the bulk
// reads vouch for it, else with a GET.
func (ob *Observer) readTrigger(ctx context.Context, cfg *config.Config, specName string, obj format.Object, t config.Trigger) (plan.TriggerRead, *corev1.ObjectReference, error) {
	if ob.bulk != nil && !liveOnly(ctx) {
		if read, ok := ob.bulk.Take(cfg, specName, obj, t); ok {
			return read, ob.opts.Triggers.Reference(t, read.UID), nil
		}
	}
	return ob.opts.Triggers.Get(ctx, t)
}

// observeReleaseSpecs is the second phase: for each release spec whose
// namespace could be read, whether someone else holds its release name, and
// while the trigger is wanted its values sources and local chart.
func (ob *Observer) observeReleaseSpecs(ctx context.Context, cfg *config.Config, o *plan.Observation, wanted bool) {
	spec := o.Config
	free := ob.freeNames(ctx, o)
	sources := NewSourceCache(ob.opts.Sources)
	attempts := ob.attemptCache()
	for _, id := range spec.ReleaseSpecIDs() {
		rs := spec.ReleaseSpecs[id]
		if o.Unread[rs.Namespace] != nil || o.Undecodable[rs.Namespace+"/"+rs.ReleaseName] != nil {
			continue // fails, whatever else would be read
		}
		ro := ob.observeReleaseSpec(ctx, o, wanted, sources, rs, free[rs.Namespace+"/"+rs.ReleaseName], cfg.Dir)
		if ro.Err == nil {
			ro.Attempts, ro.Err = attempts.of(ctx, o, id, rs)
		}
		o.ReleaseSpecs[id] = ro
	}
}

// ownsName reports whether one of the observed releases has the name
// release spec rs wants.
func ownsName(o *plan.Observation, rs *config.ReleaseSpec) bool {
	for _, c := range o.Current {
		if plan.Wants(rs, c.Namespace, c.Name) {
			return true
		}
	}
	return false
}

// freeNames are the names ("namespace/name") that release specs of the
// spec want, that none of its releases has, and that no release record at
// all uses: one metadata LIST per namespace instead of a Lookup per release
// spec, the common case of a first install. A name it cannot vouch for
// (the LIST failed, or a record exists) is looked up as before.
func (ob *Observer) freeNames(ctx context.Context, o *plan.Observation) map[string]bool {
	spec := o.Config
	byNS := map[string][]string{}
	for _, id := range spec.ReleaseSpecIDs() {
		rs := spec.ReleaseSpecs[id]
		if o.Unread[rs.Namespace] == nil && !ownsName(o, rs) {
			byNS[rs.Namespace] = append(byNS[rs.Namespace], rs.ReleaseName)
		}
	}
	free := map[string]bool{}
	for ns, names := range byNS {
		inUse, err := ob.opts.Releases.NamesInUse(ctx, ns, names)
		if err != nil {
			continue
		}
		for _, n := range names {
			if !inUse[n] {
				free[ns+"/"+n] = true
			}
		}
	}
	return free
}

func (ob *Observer) observeReleaseSpec(ctx context.Context, o *plan.Observation, wanted bool, sources *SourceCache, rs *config.ReleaseSpec, free bool, configDir string) plan.ReleaseSpecObservation {
	var ro plan.ReleaseSpecObservation
	if !free && !ownsName(o, rs) {
		// Not ours under this spec: is the name taken by someone else
		// (another tool, spec or autox instance)?
		other, err := ob.opts.Releases.Lookup(ctx, rs.Namespace, rs.ReleaseName)
		if err != nil {
			ro.Err = err
			return ro
		}
		ro.Other = other
	}
	if !wanted {
		return ro // an unwanted trigger's releases go, whatever their sources hold
	}
	if len(rs.ValuesFrom) > 0 {
		if ro.Sources, ro.Err = sources.Read(ctx, rs); ro.Err != nil {
			return ro
		}
	}
	ro.Chart = plan.ChartID{Name: rs.Chart.Name, Version: rs.Chart.Version}
	if rs.Chart.Path != "" {
		// Only a local chart must be read to learn its name and version;
		// a repository chart names them in the config, and is fetched
		// only when an operation needs it.
		ch, chartID, err := ob.charts.Load(ctx, rs.Chart, configDir)
		if err != nil {
			ro.Err = err
			return ro
		}
		ro.Chart, ro.Loaded = chartID, ch
	}
	return ro
}

// Unattributed is the observation of a selector spec's releases that name
// no object (made while the spec named one trigger): no object wants them,
// so they are decided like the releases of a removed spec, with the policies
// and identity of the spec's release spec of their id. undecodable are
// the spec's releases that could not be read: they leave it incomplete.
func (ob *Observer) Unattributed(cfg *config.Config, specName string, rels []*format.Release, undecodable map[string]error) *plan.Observation {
	return &plan.Observation{Spec: specName, Instance: ob.Instance(), InForce: cfg, Current: rels, Unattributed: true,
		SpecSuspended: cfg.Specs[specName] != nil && cfg.Specs[specName].Suspend, Policies: cfg.Specs[specName], Undecodable: undecodable,
		Departed: ob.opts.Departed(specName),
		Now:      ob.opts.Now(), Defaults: ob.opts.Defaults, DefaultServiceAccount: ob.opts.DefaultServiceAccount}
}

// LoadChart loads a chart for an operation: a repository chart the decision
// did not need, fetched only now.
func (ob *Observer) LoadChart(ctx context.Context, ref config.Chart, configDir string) (*chart.Chart, plan.ChartID, error) {
	return ob.charts.Load(ctx, ref, configDir)
}

// ChartIDs names the charts of spec's release specs that can be named
// without fetching anything; one that cannot is left out. memo (nil: none)
// holds the local charts this pass has named already.
func (ob *Observer) ChartIDs(spec *config.Spec, configDir string, memo PassCharts) map[string]plan.ChartID {
	ids := make(map[string]plan.ChartID, len(spec.ReleaseSpecs))
	for id, rs := range spec.ReleaseSpecs {
		var local string
		if rs.Chart.Path != "" && memo != nil {
			local = chartPath(rs.Chart, configDir)
			if cid, ok := memo[local]; ok {
				ids[id] = cid
				continue
			}
		}
		cid, ok := ob.charts.ID(rs.Chart, configDir)
		if !ok {
			continue
		}
		ids[id] = cid
		if local != "" {
			memo[local] = cid
		}
	}
	return ids
}

// PassCharts are the local charts one pass has identified, by path: each is
// looked up (a stat of its Chart.yaml) once per pass, not once per release
// spec (40,000 stats at 10,000 specs of two release specs).
type PassCharts map[string]plan.ChartID

// ListTriggers makes one live LIST per (resource, namespace, selector) the
// config's triggers use, of the specs wants keeps (nil: all): what a
// periodic pass proves specs in sync from. A failed LIST leaves its key
// out: its specs then get the full reconcile, whose live GET reports the
// error and changes nothing.
func (ob *Observer) ListTriggers(ctx context.Context, cfg *config.Config, wants func(spec string) bool) map[ListKey]map[string]plan.TriggerRead {
	out := map[ListKey]map[string]plan.TriggerRead{}
	failed := map[ListKey]bool{}
	for _, name := range cfg.SpecNames() {
		if wants != nil && !wants(name) {
			continue
		}
		for _, k := range KeysFor(cfg, cfg.Specs[name].Trigger) {
			if _, done := out[k]; done || failed[k] {
				continue
			}
			var done func(map[string]plan.TriggerRead)
			if ob.bulk != nil {
				done = ob.bulk.Listing(ctx, cfg, k)
			}
			objs, err := ob.opts.Triggers.List(ctx, k)
			if done != nil {
				done(objs)
			}
			if err != nil {
				ob.opts.Log.Debug().Err(err).Msg("cannot list triggers; their specs get a full reconcile")
				failed[k] = true
				continue
			}
			out[k] = objs
		}
	}
	return out
}

// Listings groups the LISTs of ListTriggers by spec: each spec's objects,
// and whether every LIST its trigger needs was read.
func Listings(cfg *config.Config, listed map[ListKey]map[string]plan.TriggerRead) map[string]plan.Listing {
	out := make(map[string]plan.Listing, len(cfg.Specs))
	for name, spec := range cfg.Specs {
		l := plan.Listing{OK: true, Objects: map[format.Object]plan.TriggerRead{}}
		keys := KeysFor(cfg, spec.Trigger)
		for _, k := range keys {
			objs, ok := listed[k]
			if !ok {
				l.OK = false
				break
			}
			if !spec.Trigger.IsSelector() {
				if obs, found := objs[spec.Trigger.Name]; found {
					l.Objects[format.Object{Namespace: k.Namespace, Name: spec.Trigger.Name}] = obs
				}
				continue
			}
			for n, obs := range objs {
				l.Objects[format.Object{Namespace: k.Namespace, Name: n}] = obs
			}
		}
		out[name] = l
	}
	return out
}

// ReadSources reads the values sources of keys live, each once: what a
// pass hands plan.InSync.
func (ob *Observer) ReadSources(ctx context.Context, keys []plan.SourceKey) plan.Sources {
	return NewSourceCache(ob.opts.Sources).ReadAll(ctx, keys)
}
