package main

import (
	"context"
	"time"
)

// eventCreates is the request kind of an Event autox sends.
var eventCreates = requestKind{verb: "create", resource: "events"}

// trailingEvents follows the Events autox sends after convergence: autox
// sends them in the background within a budget (issue 35: none may trail
// a convergence by more than a few seconds). It reads autox's request
// counter once a second for window, from the count at convergence; done
// returns how many Events were sent after convergence within the window
// and when, after convergence, the last of them was seen (0: none). Once a
// second, because reading /metrics of a fleet of 10,000 costs autox CPU.
func trailingEvents(ctx context.Context, httpAddr string, atConvergence int64, convergedAt time.Time, window time.Duration) (done func() (int64, time.Duration)) {
	var (
		sent int64
		last time.Duration
	)
	finished := make(chan struct{})
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		defer close(finished)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for time.Since(convergedAt) < window {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			counts, err := scrapeRequests(httpAddr)
			if err != nil {
				continue
			}
			if n := counts[eventCreates] - atConvergence; n > sent {
				sent, last = n, time.Since(convergedAt)
			}
		}
	}()
	return func() (int64, time.Duration) {
		<-finished
		cancel()
		return sent, last
	}
}
