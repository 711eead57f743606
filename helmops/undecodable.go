package helmops

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	helmrelease "helm.sh/helm/v4/pkg/release"
	release "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage/driver"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/autox-dev/autox/internal/format"
)

// UndecodableError is a release whose newest record cannot be decoded.
// Helm's drivers skip such a record and read the release from the revisions
// before it, so an upgrade, reinstall or rollback would start from revision
// N-1 of a release at revision N. autox reads none of it instead: the
// release's reconcile fails with this error, which names the record and
// never its content, until the record is repaired or removed.
type UndecodableError struct {
	Namespace, Name string // the release
	Kind, Record    string // the Secret or ConfigMap of its newest revision
	Revision        int
	// Cause says which layer of Helm's encoding failed (base64, gzip, JSON).
	Cause error
}

func (e *UndecodableError) Error() string {
	return fmt.Sprintf("release %s/%s: its newest record, %s %s (revision %d), cannot be decoded: %v; nothing is done to the release, never from an older revision, until that record is repaired or deleted",
		e.Namespace, e.Name, e.Kind, e.Record, e.Revision, e.Cause)
}

func (e *UndecodableError) Unwrap() error { return e.Cause }

// ReleasesError names the releases, "namespace/name", that could not be read
// (an *UndecodableError each); the others were returned.
type ReleasesError struct {
	Failed map[string]error
}

// Error lists the releases in sorted order, so that the same failure gives
// the same message.
func (e *ReleasesError) Error() string {
	keys := make([]string, 0, len(e.Failed))
	for k := range e.Failed {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	causes := make([]string, len(keys))
	for i, k := range keys {
		causes[i] = e.Failed[k].Error()
	}
	return "cannot read releases: " + strings.Join(causes, "; ")
}

// FailedReleases returns the releases ("namespace/name") named by a
// *ReleasesError inside err (errors.As) with their causes, or nil.
func FailedReleases(err error) map[string]error {
	var re *ReleasesError
	if !errors.As(err, &re) || len(re.Failed) == 0 {
		return nil
	}
	return re.Failed
}

// withFailed adds the releases of failed to err, the error of a read that
// returned the others: a *NamespacesError or nil. Any other error (the
// context's) is returned alone.
func withFailed(err error, failed map[string]error) error {
	if len(failed) == 0 || (err != nil && FailedNamespaces(err) == nil) {
		return err
	}
	return errors.Join(err, &ReleasesError{Failed: failed})
}

// undecoded is a release record that did not decode.
type undecoded struct {
	kind, object string // the Secret or ConfigMap
	revision     int
	labels       map[string]string
	cause        error
}

// owned reports whether the record's labels make the release the
// instance's, as format.Release.OwnedBy does for a decoded one.
func (u undecoded) owned(instance string) bool {
	return format.RecordOf("", "", 0, u.labels).OwnedBy(instance)
}

func (u undecoded) error(namespace, name string) *UndecodableError {
	return &UndecodableError{Namespace: namespace, Name: name, Kind: u.kind, Record: u.object, Revision: u.revision, Cause: u.cause}
}

// records are the release records of one LIST by release name: those that
// decoded, and those that did not.
type records struct {
	decoded   map[string][]*release.Release
	undecoded map[string][]undecoded
}

// names are the release names with records, sorted.
func (r records) names() []string {
	out := make([]string, 0, len(r.decoded)+len(r.undecoded))
	for n := range r.decoded {
		out = append(out, n)
	}
	for n := range r.undecoded {
		if _, dup := r.decoded[n]; !dup {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// revisions are the revisions of name in r, decoded or not.
func (r records) revisions(name string) []int {
	var out []int
	for _, rel := range r.decoded[name] {
		out = append(out, rel.Version)
	}
	for _, u := range r.undecoded[name] {
		out = append(out, u.revision)
	}
	return out
}

// listRecords LISTs the release records of namespace matching match (label
// equality, as the drivers' Query, owner=helm added) and decodes them as
// Helm's drivers do, the record labels set on each release, except that a
// record that does not decode is returned as undecoded instead of skipped.
func (m *Manager) listRecords(ctx context.Context, namespace string, match map[string]string) (records, error) {
	set := labels.Set{"owner": "helm"}
	for k, v := range match {
		set[k] = v
	}
	sel, err := labels.ValidatedSelectorFromSet(set)
	if err != nil {
		return records{}, fmt.Errorf("cannot select release records by %v: %w", match, err)
	}
	out := records{decoded: map[string][]*release.Release{}, undecoded: map[string][]undecoded{}}
	add := func(kind, object string, l map[string]string, data string) {
		rel, err := decodeRecord(data)
		if err != nil {
			rev, _ := strconv.Atoi(l["version"])
			out.undecoded[l["name"]] = append(out.undecoded[l["name"]], undecoded{kind: kind, object: object, revision: rev, labels: l, cause: err})
			return
		}
		rel.Labels = l
		out.decoded[rel.Name] = append(out.decoded[rel.Name], rel)
	}
	opts := metav1.ListOptions{LabelSelector: sel.String()}
	if m.opts.StorageDriver == DriverConfigMap {
		list, err := m.clientset.CoreV1().ConfigMaps(namespace).List(ctx, opts)
		if err != nil {
			return records{}, fmt.Errorf("cannot read release records: %w", err)
		}
		for _, item := range list.Items {
			add("ConfigMap", item.Name, item.Labels, item.Data["release"])
		}
		return out, nil
	}
	list, err := m.clientset.CoreV1().Secrets(namespace).List(ctx, opts)
	if err != nil {
		return records{}, fmt.Errorf("cannot read release records: %w", err)
	}
	for _, item := range list.Items {
		add("Secret", item.Name, item.Labels, string(item.Data["release"]))
	}
	return out, nil
}

// gzipMagic starts every record Helm has compressed; older ones are not.
var gzipMagic = []byte{0x1f, 0x8b, 0x08}

// decodeRecord is Helm's decoding of a record's release data: base64, gzip
// when it starts with gzip's magic bytes, JSON. Its errors say which layer
// failed and nothing of the content (a JSON syntax error quotes it).
func decodeRecord(data string) (*release.Release, error) {
	b, err := base64.StdEncoding.DecodeString(data)
	if err != nil {
		return nil, errors.New("its data is not base64")
	}
	if len(b) > 3 && bytes.Equal(b[:3], gzipMagic) {
		r, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			return nil, errors.New("its data is not gzip")
		}
		if b, err = io.ReadAll(r); err != nil {
			return nil, errors.New("its gzip data is corrupt")
		}
	}
	var rel release.Release
	if err := json.Unmarshal(b, &rel); err != nil {
		return nil, errors.New("its data is not a Helm release in JSON")
	}
	return &rel, nil
}

// newestOf is how one release reads, from every revision a LIST saw of it
// (all) and the records of a read of its (possibly label-selected)
// revisions: decoded and undecoded.
type newestOf int

const (
	// releaseGone: no record is left.
	releaseGone newestOf = iota
	// releaseNotInGroup: the newest revision is not among the records read
	// (someone wrote it without the selected labels).
	releaseNotInGroup
	// releaseUndecodable: the newest revision was read and did not decode.
	releaseUndecodable
	// releaseComplete: the newest revision decoded, and every revision was read.
	releaseComplete
	// releasePartial: the newest revision decoded, but older revisions were
	// not among the records read: the release must be read whole.
	releasePartial
)

// judgeNewest compares the revisions the metadata LIST saw with those read,
// and returns the undecoded record of the newest revision when that is it.
// Pure: the one place that decides that a newest revision that did not
// decode is an error, never a fall-back to the one before.
func judgeNewest(all []int, decoded []*release.Release, undecodedRecs []undecoded) (newestOf, *undecoded) {
	if len(all) == 0 {
		return releaseGone, nil
	}
	newest := all[0]
	for _, v := range all {
		newest = max(newest, v)
	}
	read := map[int]bool{}
	for _, r := range decoded {
		read[r.Version] = true
	}
	for i, u := range undecodedRecs {
		if u.revision == newest {
			return releaseUndecodable, &undecodedRecs[i]
		}
		read[u.revision] = true
	}
	if !read[newest] {
		return releaseNotInGroup, nil
	}
	for _, v := range all {
		if !read[v] {
			return releasePartial, nil
		}
	}
	return releaseComplete, nil
}

// newestDecodes is the storage driver of Helm's actions, whose Query (the
// release history of an upgrade, a rollback, an uninstall) fails with the
// *UndecodableError of a release whose newest record matched does not
// decode, where Helm's drivers skip that record and go on from the revision
// before: between autox's read and the action, a record may be broken too.
// The record is read by one LIST, as Helm's Query reads it.
type newestDecodes struct {
	driver.Driver
	m         *Manager
	namespace string
}

func (d *newestDecodes) Query(match map[string]string) ([]helmrelease.Releaser, error) {
	recs, err := d.m.listRecords(context.Background(), d.namespace, match)
	if err != nil {
		return nil, fmt.Errorf("query: %w", err)
	}
	var out []*release.Release
	for _, name := range recs.names() {
		if verdict, u := judgeNewest(recs.revisions(name), recs.decoded[name], recs.undecoded[name]); verdict == releaseUndecodable {
			return nil, u.error(d.namespace, name)
		}
		out = append(out, recs.decoded[name]...)
	}
	if len(out) == 0 && len(recs.names()) == 0 {
		return nil, driver.ErrReleaseNotFound
	}
	return releasers(out), nil
}
