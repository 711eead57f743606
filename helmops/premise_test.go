package helmops

import (
	"context"
	"errors"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestPruneRechecksThePremise: an upgrade's pruning to --max-history
// deletes the oldest revisions before it creates the new one. When someone
// wrote the release after the upgrade's checked read of its history, the
// pruning is refused (a *ChangedError) and no revision is deleted, instead
// of deleting them and then failing on the new revision's record.
func TestPruneRechecksThePremise(t *testing.T) {
	ctx := context.Background()
	m := newManager(t, DriverSecret) // --max-history 3
	ns := cluster.Namespace(t)
	d := desired(t, ns, "r", "charts/hello", nil)
	if _, err := m.Install(ctx, d); err != nil {
		t.Fatal(err)
	}
	for rev := 2; rev <= 3; rev++ {
		d.Current, d.Revision = rev-1, rev
		if _, err := m.Upgrade(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := m.actionConfig(ctx, ns, nil)
	if err != nil {
		t.Fatal(err)
	}
	premise(cfg, ns, "r", 3)
	cfg.Releases.MaxHistory = 3
	history, err := cfg.Releases.History("r") // the upgrade's checked read
	if err != nil || len(history) != 3 {
		t.Fatalf("history: %d, %v", len(history), err)
	}
	copyRecord(t, ns, "r", 3, 4, nil) // someone else's write, meanwhile
	next, err := asV1(history[len(history)-1])
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range history {
		if r, _ := asV1(h); r.Version > next.Version {
			next = r
		}
	}
	rel := *next
	rel.Version = 4
	var changed *ChangedError
	if err := cfg.Releases.Create(&rel); !errors.As(err, &changed) || changed.Newest != 4 {
		t.Errorf("Create after someone else's write = %v; want a *ChangedError naming revision 4", err)
	}
	if _, err := cluster.Client.CoreV1().Secrets(ns).Get(ctx, recordKey("r", 1), metav1.GetOptions{}); err != nil {
		t.Errorf("revision 1 was pruned by an upgrade whose premise had changed: %v", err)
	}
}
