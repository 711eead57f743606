package helmops

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestCaughtUpWaitsForTheWritesInFlightAtTheCall: the inventory's wait for
// its own writes ends once the index has shown those in flight when it
// began, whatever was written since; a write in flight that the index never
// shows sends it to a live read.
func TestCaughtUpWaitsForTheWritesInFlightAtTheCall(t *testing.T) {
	ctx := context.Background()
	record := func(key, status string) *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: key, Labels: map[string]string{"status": status}}}
	}
	e := newExpectations()
	if !e.caughtUp(ctx, "ns") {
		t.Fatal("not caught up without a write")
	}
	e.expect("ns", "sh.helm.release.v1.a.v1", expectation{release: "a", status: "pending-install"})
	inFlight, _ := e.pendingKeys("ns", nil)

	// Written after the call began: b, and a's next write.
	e.expect("ns", "sh.helm.release.v1.b.v1", expectation{release: "b", status: "pending-install"})
	done := make(chan bool, 1)
	go func() { done <- e.caughtUpWith(ctx, "ns", inFlight) }()
	select {
	case got := <-done:
		t.Fatalf("caught up (%v) before the index showed the write in flight", got)
	case <-time.After(100 * time.Millisecond):
	}
	e.seen("ns", record("sh.helm.release.v1.a.v1", "deployed"), false) // not what was written: still pending
	select {
	case got := <-done:
		t.Fatalf("caught up (%v) on a record showing another write than the one in flight", got)
	case <-time.After(100 * time.Millisecond):
	}
	e.seen("ns", record("sh.helm.release.v1.a.v1", "pending-install"), false)
	select {
	case got := <-done:
		if !got {
			t.Fatal("not caught up once the write in flight was shown")
		}
	case <-time.After(awaitOwnWrites / 2):
		t.Fatal("still waiting once the write in flight was shown, for a write made after the call")
	}

	// b's write is never shown: the wait ends in a live read.
	start := time.Now()
	if e.caughtUp(ctx, "ns") {
		t.Fatal("caught up while a write in flight was never shown")
	}
	if took := time.Since(start); took < awaitOwnWrites {
		t.Errorf("gave up after %s, before awaitOwnWrites", took)
	}
	// A write that failed (withdrawn) is not waited for.
	withdraw := e.expect("ns", "sh.helm.release.v1.c.v1", expectation{release: "c", status: "pending-install"})
	e.seen("ns", record("sh.helm.release.v1.b.v1", "pending-install"), false)
	withdraw()
	if !e.caughtUp(ctx, "ns") {
		t.Fatal("not caught up once every write was shown or withdrawn")
	}
}
