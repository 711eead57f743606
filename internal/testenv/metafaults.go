package testenv

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/metadata"
)

// MetadataFaults make a metadata client's informers see the API server
// behind, or not at all, while everything else goes to the real server: for
// tests of what an informer-fed index does when its watch falls behind, is
// lost, or its LIST fails. Each switch is off when nil.
type MetadataFaults struct {
	// Frozen, while true, drops every watch event (bookmarks too): an
	// informer that looks healthy and falls behind.
	Frozen *atomic.Bool
	// ListFails, while true, fails the LISTs of informers (those that ask
	// for a resourceVersion); a client's own LISTs (none) go through.
	ListFails *atomic.Bool
	// WatchFails, while true, refuses new watches.
	WatchFails *atomic.Bool

	mu      sync.Mutex
	watches []*heldWatch
}

// Wrap returns mc with the faults.
func (f *MetadataFaults) Wrap(mc metadata.Interface) metadata.Interface {
	return &faultyMeta{Interface: mc, f: f}
}

// EndWatches ends every watch handed out, as an API server closing them.
func (f *MetadataFaults) EndWatches() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, w := range f.watches {
		w.Stop()
	}
	f.watches = nil
}

type faultyMeta struct {
	metadata.Interface
	f *MetadataFaults
}

func (m *faultyMeta) Resource(gvr schema.GroupVersionResource) metadata.Getter {
	return &faultyGetter{Getter: m.Interface.Resource(gvr), f: m.f}
}

type faultyGetter struct {
	metadata.Getter
	f *MetadataFaults
}

func (g *faultyGetter) Namespace(ns string) metadata.ResourceInterface {
	return &faultyResource{ResourceInterface: g.Getter.Namespace(ns), f: g.f}
}

type faultyResource struct {
	metadata.ResourceInterface
	f *MetadataFaults
}

func on(b *atomic.Bool) bool { return b != nil && b.Load() }

func (r *faultyResource) List(ctx context.Context, opts metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
	if on(r.f.ListFails) && opts.ResourceVersion != "" {
		return nil, fmt.Errorf("listing refused by the test")
	}
	return r.ResourceInterface.List(ctx, opts)
}

func (r *faultyResource) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	if on(r.f.WatchFails) {
		return nil, fmt.Errorf("watch refused by the test")
	}
	w, err := r.ResourceInterface.Watch(ctx, opts)
	if err != nil {
		return nil, err
	}
	held := holdWatch(w, r.f.Frozen)
	r.f.mu.Lock()
	r.f.watches = append(r.f.watches, held)
	r.f.mu.Unlock()
	return held, nil
}

// holdWatch passes the events of w on only while frozen is not true; the
// others are dropped, as a watch that has fallen behind never delivers them
// in time.
func holdWatch(w watch.Interface, frozen *atomic.Bool) *heldWatch {
	out := make(chan watch.Event)
	stop := make(chan struct{})
	held := &heldWatch{ch: out}
	held.stop = func() { held.once.Do(func() { close(stop); w.Stop() }) }
	go func() {
		defer close(out)
		for {
			select {
			case ev, ok := <-w.ResultChan():
				if !ok {
					return
				}
				if on(frozen) {
					continue
				}
				select {
				case out <- ev:
				case <-stop:
					return
				}
			case <-stop:
				return
			}
		}
	}()
	return held
}

type heldWatch struct {
	ch   chan watch.Event
	stop func()
	once sync.Once
}

func (w *heldWatch) ResultChan() <-chan watch.Event { return w.ch }
func (w *heldWatch) Stop()                          { w.stop() }
