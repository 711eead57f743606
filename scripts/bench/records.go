package main

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Helm writes are counted on the release records themselves, not only on
// autox's log: a new revision is a new record Secret, a status change an
// update of one. records is a namespace's record Secrets by name, each
// with its resourceVersion.
type records map[string]string

// readRecords lists the Helm release records of namespace ns.
func readRecords(ctx context.Context, cs kubernetes.Interface, ns string) (records, error) {
	list, err := cs.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{LabelSelector: "owner=helm"})
	if err != nil {
		return nil, fmt.Errorf("list the release records of %s: %w", ns, err)
	}
	out := make(records, len(list.Items))
	for _, s := range list.Items {
		out[s.Name] = s.ResourceVersion
	}
	return out, nil
}

// recordChanges are the record writes between two readings.
type recordChanges struct{ Created, Updated, Deleted int }

func (c recordChanges) total() int { return c.Created + c.Updated + c.Deleted }

func (c recordChanges) String() string {
	return fmt.Sprintf("%d (%d created, %d updated, %d deleted)", c.total(), c.Created, c.Updated, c.Deleted)
}

// changedRecords compares two readings of the same namespace's records.
func changedRecords(before, after records) recordChanges {
	var c recordChanges
	for name, rv := range after {
		old, ok := before[name]
		switch {
		case !ok:
			c.Created++
		case old != rv:
			c.Updated++
		}
	}
	for name := range before {
		if _, ok := after[name]; !ok {
			c.Deleted++
		}
	}
	return c
}
