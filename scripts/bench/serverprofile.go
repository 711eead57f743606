package main

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

// serverProfile takes a CPU profile of kube-apiserver (its /debug/pprof,
// served to the bench's admin user) for the first seconds of a phase, so
// that the API server's CPU of the floor and of autox's convergence can be
// compared by where it goes, not only by how much. It starts when called
// and returns a wait that blocks until the profile is written to
// DIR/apiserver-PHASE.pprof; with no directory it does nothing.
func (b *run) serverProfile(ctx context.Context, phase string) (wait func()) {
	if b.o.serverProfile == "" {
		return func() {}
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		// A second in, the phase's workers are all busy.
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
		data, err := b.cluster.Client.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/profile").
			Param("seconds", strconv.Itoa(b.o.serverProfileSeconds)).DoRaw(ctx)
		if err != nil {
			note("kube-apiserver profile of %s: %v", phase, err)
			return
		}
		path := filepath.Join(b.o.serverProfile, "apiserver-"+phase+".pprof")
		if err := os.MkdirAll(b.o.serverProfile, 0o755); err != nil {
			note("kube-apiserver profile of %s: %v", phase, err)
			return
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			note("kube-apiserver profile of %s: %v", phase, err)
			return
		}
		note("kube-apiserver profile of %s (%d s from 1 s in): %s", phase, b.o.serverProfileSeconds, path)
	}()
	return wg.Wait
}
