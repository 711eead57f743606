package helmops

import (
	"context"
	"fmt"
	"sort"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
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
	Revision    int
	Status      string
	// Digest and AutoxRevision are the LabelDigest and LabelRevision labels
	// ("" and 0 when absent).
	Digest        string
	AutoxRevision int
}

// Inventory lists release records by their labels.
type Inventory struct {
	meta   metadata.Interface
	driver string
}

// NewInventory returns an Inventory reading records of the Manager's driver.
func (m *Manager) NewInventory() (*Inventory, error) {
	mc, err := metadata.NewForConfig(m.opts.RESTConfig)
	if err != nil {
		return nil, fmt.Errorf("cannot create metadata client: %w", err)
	}
	return &Inventory{meta: mc, driver: m.opts.StorageDriver}, nil
}

func (inv *Inventory) resource() schema.GroupVersionResource {
	if inv.driver == DriverConfigMap {
		return schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	}
	return schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
}

// Managed returns one Record per autox release (its newest revision) in the
// given namespaces, sorted by namespace and name. Any error aborts the whole
// listing: a partial inventory must never be mistaken for "nothing exists".
func (inv *Inventory) Managed(ctx context.Context, namespaces []string) ([]Record, error) {
	var out []Record
	for _, ns := range namespaces {
		list, err := inv.meta.Resource(inv.resource()).Namespace(ns).List(ctx, metav1.ListOptions{
			LabelSelector: "owner=helm," + LabelSpec + "," + LabelReleaseSpec,
		})
		if err != nil {
			return nil, fmt.Errorf("cannot list autox release records in namespace %s: %w", ns, err)
		}
		newest := map[string]Record{}
		for _, item := range list.Items {
			l := item.Labels
			rev, err := strconv.Atoi(l["version"])
			if err != nil || l["name"] == "" {
				continue // not a Helm release record after all
			}
			if cur, ok := newest[l["name"]]; ok && cur.Revision > rev {
				continue
			}
			autoxRev, _ := strconv.Atoi(l[LabelRevision])
			newest[l["name"]] = Record{
				Name: l["name"], Namespace: ns, Spec: l[LabelSpec], ReleaseSpec: l[LabelReleaseSpec],
				Revision: rev, Status: l["status"], Digest: l[LabelDigest], AutoxRevision: autoxRev,
			}
		}
		for _, r := range newest {
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		return out[i].Name < out[j].Name
	})
	return out, nil
}
