package main

import (
	"context"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/autox-dev/autox/internal/format"
	"github.com/autox-dev/autox/internal/leader"
)

// leaseNamespace is where the replicas of the bench keep their Leases.
const leaseNamespace = "default"

// readHolders reads the holder identity of each of n shard Leases ("" for
// a Lease not there or not held).
func readHolders(ctx context.Context, cs kubernetes.Interface, n int) ([]string, error) {
	list, err := cs.CoordinationV1().Leases(leaseNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list the shard Leases: %w", err)
	}
	byName := map[string]string{}
	for _, l := range list.Items {
		if l.Spec.HolderIdentity != nil {
			byName[l.Name] = *l.Spec.HolderIdentity
		}
	}
	out := make([]string, n)
	for i := range out {
		out[i] = byName[leader.ShardLeaseName(format.DefaultInstance, i)]
	}
	return out, nil
}

// spread is how shards lie over live replicas: Held[j] shards held by
// live[j]; Unheld the shards no live replica holds (not held at all, or
// still named by a replica that died).
type spread struct {
	Held   []int
	Unheld int
}

// spreadOf counts holders (by shard) over the live replicas' identities.
func spreadOf(holders, live []string) spread {
	s := spread{Held: make([]int, len(live))}
	for _, h := range holders {
		j := indexOf(live, h)
		if h == "" || j < 0 {
			s.Unheld++
			continue
		}
		s.Held[j]++
	}
	return s
}

func indexOf(ids []string, id string) int {
	for j, x := range ids {
		if x == id {
			return j
		}
	}
	return -1
}

// fairShare is ⌈shards / replicas⌉, as autox's replicas count it.
func fairShare(shards, replicas int) int {
	if replicas <= 0 {
		return shards
	}
	return (shards + replicas - 1) / replicas
}

// settled says every shard is held by a live replica and none holds more
// than its fair share: the replicas have nothing left to hand over.
func (s spread) settled() bool {
	if s.Unheld > 0 {
		return false
	}
	total := 0
	for _, n := range s.Held {
		total += n
	}
	for _, n := range s.Held {
		if n > fairShare(total, len(s.Held)) {
			return false
		}
	}
	return true
}

// String is "4/4/4" (shards per replica), with the unheld ones if any.
func (s spread) String() string {
	parts := make([]string, len(s.Held))
	for j, n := range s.Held {
		parts[j] = fmt.Sprint(n)
	}
	out := strings.Join(parts, "/")
	if s.Unheld > 0 {
		out += fmt.Sprintf(" (%d unheld)", s.Unheld)
	}
	return out
}
