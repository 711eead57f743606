package helmops

import (
	"context"
	"fmt"
	"sort"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/metadata"

	"github.com/autox-dev/autox/internal/format"
	"github.com/autox-dev/autox/internal/pages"
)

// Inventory lists release records by their labels.
type Inventory struct {
	meta     metadata.Interface
	driver   string
	instance string
	// manager, when set, lends its record index.
	manager *Manager
	// pageSize is the page size of its LISTs (Options.ListPageSize).
	pageSize int64
}

// NewInventory returns an Inventory reading records of the Manager's driver
// and returning the releases of the Manager's instance.
func (m *Manager) NewInventory() (*Inventory, error) {
	return &Inventory{meta: m.meta, driver: m.opts.StorageDriver, instance: m.opts.Instance, manager: m, pageSize: m.opts.ListPageSize}, nil
}

// Managed returns one format.Record per release of the Inventory's instance in the
// given namespaces, sorted by namespace and name. A release is the
// instance's when its newest revision (the highest of all its records,
// labelled or not) carries both autox labels and the instance; the format.Record
// describes that revision. Every namespace is read; when some cannot be, the
// others' records are returned with a *NamespacesError, and a caller must not
// take the failed namespaces' missing records for "nothing exists".
//
// It reads the metadata of every Helm record of each namespace,
// autox-labelled or not: from the index when it can vouch for the namespace,
// else in one LIST. Only then is a release's newest revision known. A
// selector on autox's labels would find a release whose newest revision
// someone wrote without them (helm upgrade --labels with the spec label set
// to null, an old Helm client) by its older revisions, and autox would act on
// a release it no longer owns.
//
// What the Inventory answers is read-your-writes, as a LIST is (a pass must
// not find a namespace empty of the release a reconcile that just ended
// wrote there, and forget the namespace): a namespace's index is read once
// it shows every write of this process to the namespace that was in flight
// at the call (expectations.caughtUpEach, at most awaitOwnWrites for all
// namespaces together), else the namespace is listed live. During a cold
// convergence some write is always in flight, so waiting for none at all
// sent every pass to a LIST of every record of the namespace.
func (inv *Inventory) Managed(ctx context.Context, namespaces []string) ([]format.Record, error) {
	var fromIndex map[string]bool
	var ix *RecordIndex
	if inv.manager != nil {
		// The writes in flight now, in every namespace the index can
		// serve, are waited for together: a namespace whose index never
		// shows one costs one wait in all, not one each.
		ix = inv.manager.index.Load()
		var served []string
		for _, ns := range namespaces {
			if ix.usable(ns) != nil {
				served = append(served, ns)
			}
		}
		fromIndex = ix.expectations().caughtUpEach(ctx, served)
	}
	out, err := eachNamespace(ctx, namespaces, func(ns string) ([]format.Record, error) {
		if fromIndex[ns] {
			if ri := ix.usable(ns); ri != nil {
				return inv.records(ns, ri.all()), nil
			}
		}
		return inv.list(ctx, ns)
	})
	sort.Slice(out, func(i, j int) bool {
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		return out[i].Name < out[j].Name
	})
	return out, err
}

// list reads the records of ns in one LIST.
func (inv *Inventory) list(ctx context.Context, ns string) ([]format.Record, error) {
	items, err := pages.Metadata(ctx, inv.meta.Resource(recordResource(inv.driver)).Namespace(ns), metav1.ListOptions{
		LabelSelector: "owner=helm",
	}, inv.pageSize)
	if err != nil {
		return nil, fmt.Errorf("cannot list release records: %w", err)
	}
	labels := make([]map[string]string, len(items))
	for i := range items {
		labels[i] = items[i].Labels
	}
	return inv.records(ns, labels), nil
}

// records describes the newest revision of each release among the records
// of ns (their labels), keeping this instance's.
func (inv *Inventory) records(ns string, records []map[string]string) []format.Record {
	type revision struct {
		number int
		labels map[string]string
	}
	newest := map[string]revision{}
	for _, l := range records {
		rev, err := strconv.Atoi(l["version"])
		if err != nil || l["name"] == "" {
			continue // not a Helm release record after all
		}
		if cur, ok := newest[l["name"]]; !ok || rev > cur.number {
			newest[l["name"]] = revision{rev, l}
		}
	}
	out := make([]format.Record, 0, len(newest))
	for name, r := range newest {
		l := r.labels
		if format.InstanceOf(l) != inv.instance {
			continue // not autox's, or another instance's
		}
		out = append(out, format.RecordOf(name, ns, r.number, l))
	}
	return out
}
