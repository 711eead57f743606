package helmops

import (
	"context"
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func recordShown(key, status string) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: key, Labels: map[string]string{"status": status}}}
}

// TestCaughtUpWaitsForTheWritesInFlightAtTheCall: the inventory's wait for
// its own writes ends once the index has shown those in flight when it
// began, whatever was written since to other records; a write in flight
// that the index never shows sends it to a live read.
func TestCaughtUpWaitsForTheWritesInFlightAtTheCall(t *testing.T) {
	ctx := context.Background()
	const a, b, c = "sh.helm.release.v1.a.v1", "sh.helm.release.v1.b.v1", "sh.helm.release.v1.c.v1"
	e := newExpectations()
	if !e.caughtUpEach(ctx, []string{"ns"})["ns"] {
		t.Fatal("not caught up without a write")
	}
	e.expect("ns", a, expectation{release: "a", status: "pending-install"})
	inFlight := e.pendingEach([]string{"ns"})

	// b is written after the call began.
	e.expect("ns", b, expectation{release: "b", status: "pending-install"})
	done := make(chan bool, 1)
	go func() { done <- e.awaitEach(ctx, inFlight)["ns"] }()
	select {
	case got := <-done:
		t.Fatalf("caught up (%v) before the index showed the write in flight", got)
	case <-time.After(100 * time.Millisecond):
	}
	e.seen("ns", recordShown(a, "deployed"), false) // not what was written: still pending
	select {
	case got := <-done:
		t.Fatalf("caught up (%v) on a record showing another write than the one in flight", got)
	case <-time.After(100 * time.Millisecond):
	}
	e.seen("ns", recordShown(a, "pending-install"), false)
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
	if e.caughtUpEach(ctx, []string{"ns"})["ns"] {
		t.Fatal("caught up while a write in flight was never shown")
	}
	if took := time.Since(start); took < awaitOwnWrites {
		t.Errorf("gave up after %s, before awaitOwnWrites", took)
	}
	// A write that failed is not waited for.
	w := e.expect("ns", c, expectation{release: "c", status: "pending-install"})
	e.seen("ns", recordShown(b, "pending-install"), false)
	w.done(errors.New("refused"))
	if !e.caughtUpEach(ctx, []string{"ns"})["ns"] {
		t.Fatal("not caught up once every write was shown or failed")
	}
}

// TestFailedWriteLeavesTheOneItReplacedExpected: a record's next write
// (deployed after pending-install) that fails before the index showed the
// first leaves the first expected: the inventory must not read an index
// that does not show a record whose write succeeded. Once the index shows
// the first, a failure of the second leaves nothing expected.
func TestFailedWriteLeavesTheOneItReplacedExpected(t *testing.T) {
	const key = "sh.helm.release.v1.r.v1"
	pending := func(e *expectations) bool {
		keys, _ := e.pendingKeys("ns", nil)
		return keys[key]
	}
	e := newExpectations()
	e.expect("ns", key, expectation{release: "r", status: "pending-install"}).done(nil)
	e.expect("ns", key, expectation{release: "r", status: "uninstalling"}).done(errors.New("refused"))
	if !pending(e) {
		t.Fatal("the succeeded write was forgotten when the one replacing it failed")
	}
	e.seen("ns", recordShown(key, "pending-install"), false)
	if pending(e) {
		t.Fatal("still expected once the index showed it")
	}

	e.expect("ns", key, expectation{release: "r", status: "deployed"}).done(nil)
	second := e.expect("ns", key, expectation{release: "r", status: "uninstalling"})
	e.seen("ns", recordShown(key, "deployed"), false) // the first is shown; the second still in flight
	if !pending(e) {
		t.Fatal("the write in flight stopped being expected when an earlier one was shown")
	}
	second.done(errors.New("refused"))
	if pending(e) {
		t.Fatal("a write the index showed is expected again after the next one failed")
	}
}

// TestExpectationTTLCountsFromTheWritesEnd: a write that took long (held in
// the API server's queues) is still expected after it ends.
func TestExpectationTTLCountsFromTheWritesEnd(t *testing.T) {
	const key = "sh.helm.release.v1.r.v1"
	now := time.Now()
	e := newExpectations()
	e.now = func() time.Time { return now }
	w := e.expect("ns", key, expectation{release: "r", status: "pending-install"})
	now = now.Add(expectationTTL + time.Second)
	w.done(nil)
	if keys, _ := e.pendingKeys("ns", nil); !keys[key] {
		t.Fatal("a write that just ended is no longer expected: its TTL ran from its start")
	}
}

// TestCaughtUpEachWaitsForEveryNamespaceAtOnce: the inventory waits for the
// writes in flight at its call in all namespaces together, and sends to a
// live read only the namespaces whose writes the index has not shown.
func TestCaughtUpEachWaitsForEveryNamespaceAtOnce(t *testing.T) {
	ctx := context.Background()
	const a, b, c = "sh.helm.release.v1.a.v1", "sh.helm.release.v1.b.v1", "sh.helm.release.v1.c.v1"
	e := newExpectations()
	e.expect("one", a, expectation{release: "a", status: "pending-install"})
	e.expect("two", b, expectation{release: "b", status: "pending-install"})
	inFlight := e.pendingEach([]string{"one", "two", "three"})
	done := make(chan map[string]bool, 1)
	go func() { done <- e.awaitEach(ctx, inFlight) }()
	// Written after the call: not waited for.
	e.expect("two", c, expectation{release: "c", status: "pending-install"})
	e.seen("one", recordShown(a, "pending-install"), false)
	select {
	case got := <-done:
		t.Fatalf("caught up (%v) before namespace two's write in flight was shown", got)
	case <-time.After(100 * time.Millisecond):
	}
	e.seen("two", recordShown(b, "pending-install"), false)
	select {
	case got := <-done:
		if !got["one"] || !got["two"] || !got["three"] {
			t.Fatalf("caught up: %v, want every namespace", got)
		}
	case <-time.After(awaitOwnWrites / 2):
		t.Fatal("still waiting once the writes in flight at the call were shown")
	}

	// c is never shown: namespace two alone is read live.
	got := e.caughtUpEach(ctx, []string{"one", "two", "three"})
	if !got["one"] || got["two"] || !got["three"] {
		t.Errorf("caught up: %v, want one and three, not two", got)
	}
	var none *expectations
	if got := none.caughtUpEach(ctx, []string{"x"}); !got["x"] {
		t.Errorf("without expectations: %v", got)
	}
}
