package triggers

import (
	"sync"

	"github.com/autox-dev/autox/internal/format"
	"github.com/autox-dev/autox/triggers/plan"
)

// Queue keys are plan.ObjectKey's: a spec's name, or spec/namespace/name for
// one object of a selector spec. Every key is reconciled by one worker at a
// time, so two reconciles of one object never overlap.

// ObjectKey is the queue key of one object of a selector spec.
func ObjectKey(spec string, o format.Object) string { return plan.ObjectKey(spec, o) }

// parseKey splits a queue key into its spec and, for an object key, the object.
func parseKey(key string) (string, format.Object) { return plan.ParseKey(key) }

// specOf is the spec name of a queue key.
func specOf(key string) string {
	spec, _ := parseKey(key)
	return spec
}

// specLocks keep the keys of one spec apart: the reconciles of its objects
// may run together (each object's key is reconciled by one worker at a
// time), but not beside one of the spec's own key (a named or removed
// spec's reconcile, a sweep), which may act on any of the spec's releases.
type specLocks struct{ m sync.Map } // spec name -> *sync.RWMutex

func (l *specLocks) of(spec string) *sync.RWMutex {
	v, _ := l.m.LoadOrStore(spec, &sync.RWMutex{})
	return v.(*sync.RWMutex)
}
