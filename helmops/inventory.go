package helmops

import (
	"context"
	"fmt"
	"sort"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/metadata"
)

// Record is an autox release as its storage records' labels describe it,
// without decoding the release itself: enough to find and remove releases of
// specs that are gone, at the cost of one metadata LIST per namespace.
type Record struct {
	Name        string
	Namespace   string
	Spec        string
	ReleaseSpec string
	// Instance is the LabelInstance label, DefaultInstance when absent.
	Instance string
	Revision int
	Status   string
	// Digest and AutoxRevision are the LabelDigest and LabelRevision labels
	// ("" and 0 when absent).
	Digest        string
	AutoxRevision int
}

// Inventory lists release records by their labels.
type Inventory struct {
	meta     metadata.Interface
	driver   string
	instance string
}

// NewInventory returns an Inventory reading records of the Manager's driver
// and returning the releases of the Manager's instance.
func (m *Manager) NewInventory() (*Inventory, error) {
	return &Inventory{meta: m.meta, driver: m.opts.StorageDriver, instance: m.opts.Instance}, nil
}

// Managed returns one Record per release of the Inventory's instance (its
// newest autox-labelled revision) in the given namespaces, sorted by
// namespace and name. Every namespace is read; when some cannot be, the
// others' records are returned with a *NamespacesError, and a caller must not
// take the failed namespaces' missing records for "nothing exists".
func (inv *Inventory) Managed(ctx context.Context, namespaces []string) ([]Record, error) {
	out, err := eachNamespace(ctx, namespaces, func(ns string) ([]Record, error) {
		return inv.namespace(ctx, ns)
	})
	sort.Slice(out, func(i, j int) bool {
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		return out[i].Name < out[j].Name
	})
	return out, err
}

func (inv *Inventory) namespace(ctx context.Context, ns string) ([]Record, error) {
	list, err := inv.meta.Resource(recordResource(inv.driver)).Namespace(ns).List(ctx, metav1.ListOptions{
		LabelSelector: "owner=helm," + LabelSpec + "," + LabelReleaseSpec,
	})
	if err != nil {
		return nil, fmt.Errorf("cannot list autox release records: %w", err)
	}
	newest := map[string]Record{}
	for _, item := range list.Items {
		l := item.Labels
		rev, err := strconv.Atoi(l["version"])
		if err != nil || l["name"] == "" || instanceOf(l) == "" {
			continue // not a Helm release record of autox's after all
		}
		if cur, ok := newest[l["name"]]; ok && cur.Revision > rev {
			continue
		}
		autoxRev, _ := strconv.Atoi(l[LabelRevision])
		newest[l["name"]] = Record{
			Name: l["name"], Namespace: ns, Spec: l[LabelSpec], ReleaseSpec: l[LabelReleaseSpec], Instance: instanceOf(l),
			Revision: rev, Status: l["status"], Digest: l[LabelDigest], AutoxRevision: autoxRev,
		}
	}
	out := make([]Record, 0, len(newest))
	for _, r := range newest {
		// The newest revision decides whose release it is.
		if r.Instance == inv.instance {
			out = append(out, r)
		}
	}
	return out, nil
}
