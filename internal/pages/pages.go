// Package pages makes the large metadata LISTs of autox (a pass's triggers,
// the release records of a namespace) in one response or in pages of a
// chosen size, through client-go's pager (--list-page-size, --record-list-page-size; BENCHMARKS.md
// has the measurements that chose the default).
package pages

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/pager"
)

// Metadata lists the objects of client that opts select, size per page
// (0: one response). A list whose continuation expired between pages
// fails (the pager's EachListItem has no fallback to a whole list), so a
// result is always one consistent list and a failure decides nothing.
func Metadata(ctx context.Context, client metadata.ResourceInterface, opts metav1.ListOptions, size int64) ([]metav1.PartialObjectMetadata, error) {
	var out []metav1.PartialObjectMetadata
	err := Each(ctx, client, opts, size, func(m *metav1.PartialObjectMetadata) {
		out = append(out, *m)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Each is Metadata for a caller that keeps only part of each object: it
// hands every object to fn in turn, so that no whole page outlives fn. A
// list that failed part way has been handed out in part: the caller must
// drop what fn kept when Each returns an error.
func Each(ctx context.Context, client metadata.ResourceInterface, opts metav1.ListOptions, size int64, fn func(*metav1.PartialObjectMetadata)) error {
	if size <= 0 {
		list, err := client.List(ctx, opts)
		if err != nil {
			return err
		}
		for i := range list.Items {
			fn(&list.Items[i])
		}
		return nil
	}
	p := pager.New(func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		return client.List(ctx, o)
	})
	p.PageSize = size
	return p.EachListItem(ctx, opts, func(obj runtime.Object) error {
		m, ok := obj.(*metav1.PartialObjectMetadata)
		if !ok {
			return fmt.Errorf("listing returned a %T, not object metadata", obj)
		}
		fn(m)
		return nil
	})
}
