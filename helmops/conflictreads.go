package helmops

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"sync"
	"time"

	"helm.sh/helm/v4/pkg/action"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/kube"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/resource"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"

	"github.com/autox-dev/autox/internal/pages"
)

// Helm's conflict reads (issue 35, item 2). Before an install writes
// anything, Helm GETs every object of the chart to learn whether it exists
// and which release owns it (existingResourceConflict): one request per
// object, the largest read of a cold convergence (get configmaps 1.00 per
// release in the bench). When many installs make objects of one resource in
// one namespace, one consistent paged LIST of that resource's metadata
// answers the same question for all of them: when LISTs that began moments
// ago show none of an install's objects, its reads are answered "not found"
// without a request; when one object is listed, not covered by a fresh
// LIST, or read after the install wrote anything, Helm reads as before (all
// or none: see wrap). Installs whose chart may have hooks never use LISTs
// (see mayHaveHooks). docs/design.md §3 "Helm's conflict reads".
//
// Why that keeps the check: the install creates the objects client-side
// (a POST), which the API server refuses for an object that exists, so one
// created in between by someone else fails the install instead of being
// taken over; the failed revision's uninstall deletes only what the
// release owns (Helm 4 checks each object's owner marks first). The
// objects of a release that exists (kept by a resource policy, left by an
// uninstall) are in the LIST, so Helm reads them and adopts them as before.
// Server-side-apply installs, which would merge into an existing object,
// reinstalls and dry runs never use a LIST.

// conflictListMaxAge is how long after its start a LIST answers for
// absence: the same bound as a pass's bulk trigger reads.
const conflictListMaxAge = 10 * time.Second

// conflictListDemand is how many objects of one resource and namespace
// installs must have asked about within conflictListMaxAge before a LIST
// is made: below it the GETs are cheaper than a LIST of everything there.
const conflictListDemand = 32

// conflictListPage is the page size of those LISTs.
const conflictListPage = 500

// conflictListTimeout bounds one LIST (made in an install's Build, which
// has no context).
const conflictListTimeout = 30 * time.Second

// conflictKey is one resource in one namespace ("" for cluster-scoped).
type conflictKey struct {
	resource  schema.GroupVersionResource
	namespace string
}

// conflictLists keeps, per resource and namespace, the names of the newest
// consistent LIST and how much installs asked about it. Shared by the
// installs of one Manager (one identity: the LIST is made as that identity,
// as Helm's GETs are).
type conflictLists struct {
	mu     sync.Mutex
	lists  map[conflictKey]*conflictList
	asked  map[conflictKey]*demand
	now    func() time.Time
	listFn func(ctx context.Context, k conflictKey) (map[string]struct{}, error)
}

// conflictList is the result of one LIST.
type conflictList struct {
	began time.Time
	names map[string]struct{}
}

// demand counts the objects asked about since since.
type demand struct {
	since   time.Time
	n       int
	listing bool
	// failed is when the last LIST failed: none is tried again for
	// conflictListMaxAge, so a LIST refused (Forbidden) costs one request
	// per window, not one per install.
	failed time.Time
}

// absentUnder decides whether a LIST that began at began, holding names,
// answers for name at now: it proves the object absent only while fresh.
func absentUnder(began time.Time, names map[string]struct{}, name string, now time.Time) bool {
	if names == nil || name == "" || now.Sub(began) >= conflictListMaxAge || now.Before(began) {
		return false
	}
	_, listed := names[name]
	return !listed
}

// absent reports whether a fresh LIST proves that k's object name does not
// exist. It counts the question, and when enough were asked and no fresh
// LIST exists it makes one, in the caller (the install that asked), so
// that the next installs are answered by it.
func (c *conflictLists) absent(k conflictKey, name string) bool {
	c.mu.Lock()
	now := c.now()
	if l := c.lists[k]; l != nil && absentUnder(l.began, l.names, name, now) {
		c.mu.Unlock()
		return true
	}
	for key, l := range c.lists {
		if now.Sub(l.began) >= conflictListMaxAge {
			delete(c.lists, key) // no whole namespace's names kept past use
		}
	}
	d := c.asked[k]
	if d == nil || now.Sub(d.since) >= conflictListMaxAge {
		d = &demand{since: now}
		c.asked[k] = d
	}
	d.n++
	fresh := c.lists[k] != nil
	failedLately := !d.failed.IsZero() && now.Sub(d.failed) < conflictListMaxAge
	if fresh || d.listing || failedLately || d.n < conflictListDemand {
		c.mu.Unlock()
		return false
	}
	d.listing = true
	c.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), conflictListTimeout)
	began := c.now()
	names, err := c.listFn(ctx, k)
	cancel()

	c.mu.Lock()
	defer c.mu.Unlock()
	d.listing = false
	if err != nil {
		d.failed = c.now()
		return false // the installs GET as before
	}
	d.n = 0
	c.lists[k] = &conflictList{began: began, names: names}
	return absentUnder(began, names, name, c.now())
}

// newConflictLists returns the lists of a Manager reading with meta.
func newConflictLists(meta metadata.Interface) *conflictLists {
	return &conflictLists{
		lists: map[conflictKey]*conflictList{},
		asked: map[conflictKey]*demand{},
		now:   time.Now,
		listFn: func(ctx context.Context, k conflictKey) (map[string]struct{}, error) {
			names := map[string]struct{}{}
			// No resourceVersion: the API server answers from etcd, not
			// from its watch cache, and the pages are one snapshot.
			err := pages.Each(ctx, meta.Resource(k.resource).Namespace(k.namespace), metav1.ListOptions{}, conflictListPage,
				func(m *metav1.PartialObjectMetadata) { names[m.Name] = struct{}{} })
			if err != nil {
				return nil, err
			}
			return names, nil
		},
	}
}

// SharedConflictReads are conflict LISTs shared by several Managers of
// autox's own identity in one process: with --shards, every shard term's
// Manager of a replica (UseConflictReads). Each term installs a share of
// the fleet, so alone it would see conflictListDemand asked about less
// often, read more objects one by one and LIST the namespace again itself;
// shared, one LIST answers the installs of every term. The LISTs are made
// with the client given here, the replica's own (as its shared record
// index's), so that they outlive any one term; a term's fence lets reads
// through anyway, and the identity is the same. What they answer is the
// same whichever term's install asked: whether an object existed when the
// LIST began.
type SharedConflictReads struct{ lists *conflictLists }

// NewSharedConflictReads returns conflict LISTs made with meta.
func NewSharedConflictReads(meta metadata.Interface) *SharedConflictReads {
	return &SharedConflictReads{lists: newConflictLists(meta)}
}

// UseConflictReads makes m's installs answer their conflict reads from s's
// LISTs. It must be called before m's first install, which otherwise has
// made m LISTs of its own: an error says so. The Managers As makes of m
// (other identities) keep LISTs of their own, made as that identity.
func (m *Manager) UseConflictReads(s *SharedConflictReads) error {
	m.conflictsOnce.Do(func() { m.conflicts = s.lists })
	if m.conflicts != s.lists {
		return errors.New("the conflict reads of this Manager were set up by an install already: share them before it installs")
	}
	return nil
}

// conflictReads lets one install's objects be answered from lists: set on
// the install's kube client (kubeClient.conflicts), it wraps the REST
// client of each object Build returns.
type conflictReads struct {
	lists  *conflictLists
	writes *writes
}

// wrap gives each of infos (one Build: the install's manifest) a REST
// client whose first GET, asked before the install wrote anything, is
// answered "not found" when fresh LISTs prove every one of infos absent;
// every other request goes to the API server. All or none: when Helm finds
// one object of the release itself (kept, left behind), it adopts by
// updating every object of the chart — an update that would patch, not
// create, an object made after the LIST — so one object Helm must read
// makes it read them all.
func (r *conflictReads) wrap(infos kube.ResourceList) {
	proof := &installProof{reads: r}
	for _, info := range infos {
		k, ok := conflictKeyOf(info)
		if !ok {
			proof.ineligible = true
			continue
		}
		proof.objects = append(proof.objects, listedObject{key: k, name: info.Name})
		info.Client = &absentOnce{RESTClient: info.Client, proof: proof, key: k, name: info.Name}
	}
}

// conflictKeyOf is the resource and namespace of info, when a LIST may
// answer for it: a named object of a resource the API server itself
// serves (an aggregated API server may serve a create that succeeds on an
// existing name, or a LIST filtered by the caller).
func conflictKeyOf(info *resource.Info) (conflictKey, bool) {
	if info.Mapping == nil || info.Name == "" || info.Client == nil || !builtInGroups[info.Mapping.Resource.Group] {
		return conflictKey{}, false
	}
	ns := info.Namespace
	if info.Mapping.Scope.Name() != meta.RESTScopeNameNamespace {
		ns = ""
	}
	return conflictKey{resource: info.Mapping.Resource, namespace: ns}, true
}

// builtInGroups are the API groups kube-apiserver serves itself.
var builtInGroups = map[string]bool{
	"": true, "apps": true, "batch": true, "autoscaling": true, "policy": true,
	"rbac.authorization.k8s.io": true, "networking.k8s.io": true, "coordination.k8s.io": true,
	"discovery.k8s.io": true, "storage.k8s.io": true, "scheduling.k8s.io": true, "node.k8s.io": true,
	"admissionregistration.k8s.io": true, "certificates.k8s.io": true, "events.k8s.io": true,
	"flowcontrol.apiserver.k8s.io": true, "apiextensions.k8s.io": true,
}

// listedObject is one object of an install's manifest.
type listedObject struct {
	key  conflictKey
	name string
}

// installProof decides once, at the first conflict read of an install,
// whether LISTs answer for all of its objects.
type installProof struct {
	reads      *conflictReads
	objects    []listedObject
	ineligible bool

	once   sync.Once
	absent bool
}

func (p *installProof) allAbsent() bool {
	p.once.Do(func() {
		all := !p.ineligible && len(p.objects) > 0
		// Every object is asked about, so that each resource's demand
		// counts, even once one answer is no.
		for _, o := range p.objects {
			if !p.reads.lists.absent(o.key, o.name) {
				all = false
			}
		}
		p.absent = all
	})
	return p.absent
}

// absentOnce is the REST client of one object of an install (see wrap).
type absentOnce struct {
	resource.RESTClient
	proof *installProof
	key   conflictKey
	name  string

	mu    sync.Mutex
	asked bool
}

func (a *absentOnce) Get() *rest.Request {
	a.mu.Lock()
	first := !a.asked
	a.asked = true
	a.mu.Unlock()
	// Only the install's conflict check reads before its first write; a
	// read after it (a wait) must see what the install made.
	if first && !a.proof.reads.writes.any.Load() && a.proof.allAbsent() {
		return notFoundRequest(a.key.resource.GroupResource(), a.name)
	}
	return a.RESTClient.Get()
}

// notFoundRequest is a GET that the API server is not asked: it answers
// as the server would for an object that does not exist.
func notFoundRequest(gr schema.GroupResource, name string) *rest.Request {
	content := rest.ClientContentConfig{
		ContentType: "application/json",
		Negotiator:  runtime.NewClientNegotiator(scheme.Codecs.WithoutConversion(), schema.GroupVersion{Version: "v1"}),
	}
	hc := &http.Client{Transport: notFoundTransport{gr: gr, name: name}}
	return rest.NewRequestWithClient(&url.URL{Scheme: "https", Host: "listed.autox.invalid"}, "", content, hc).Verb("GET")
}

// notFoundTransport answers every request with the API server's NotFound
// status for one object.
type notFoundTransport struct {
	gr   schema.GroupResource
	name string
}

func (t notFoundTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	status := apierrors.NewNotFound(t.gr, t.name).ErrStatus
	status.Kind, status.APIVersion = "Status", "v1"
	body, err := json.Marshal(status)
	if err != nil {
		return nil, err
	}
	return &http.Response{
		StatusCode: http.StatusNotFound,
		Status:     "404 Not Found",
		Header:     http.Header{"Content-Type": []string{"application/json"}},
		Body:       io.NopCloser(bytes.NewReader(body)),
		Request:    req,
	}, nil
}

// answerConflictsFromLists lets in, a client-side install of a release its
// caller found new, answer its conflict reads from lists (see above).
func (m *Manager) answerConflictsFromLists(cfg *action.Configuration, in *action.Install, ch *chart.Chart, wrote *writes) {
	if in.ServerSideApply || in.TakeOwnership || wrote == nil || ch == nil || mayHaveHooks(ch) {
		return
	}
	kc, ok := cfg.KubeClient.(kubeClient)
	if !ok {
		return
	}
	m.conflictsOnce.Do(func() { m.conflicts = newConflictLists(m.meta) })
	kc.conflicts = &conflictReads{lists: m.conflicts, writes: wrote}
	cfg.KubeClient = kc
}

// mayHaveHooks reports whether a template of ch or of its subcharts may
// render a hook. An install runs its pre-install hooks after its pending
// record and before its objects: an object made after the LIST would fail
// the install only once the hooks ran, so an install with hooks reads as
// Helm does.
func mayHaveHooks(ch *chart.Chart) bool {
	for _, t := range ch.Templates {
		if t != nil && bytes.Contains(t.Data, []byte("helm.sh/hook")) {
			return true
		}
	}
	for _, dep := range ch.Dependencies() {
		if mayHaveHooks(dep) {
			return true
		}
	}
	return false
}
