package drift

import (
	"sync"
	"time"
)

// Contested paths: a field that something keeps writing back is not
// corrected for ever. Memory counts the corrections of each field of each
// release's objects within a window; once a field was corrected Limit
// times within it, it is contested: reported with who owns it now, never
// corrected again until the window has passed.

// Defaults of a Memory: more than 3 corrections of a field within an hour.
const (
	DefaultLimit  = 3
	DefaultWindow = time.Hour
)

// Memory remembers corrections; safe for concurrent use. The time is
// always passed in.
type Memory struct {
	Limit  int
	Window time.Duration

	mu  sync.Mutex
	hit map[memoryKey][]time.Time
}

type memoryKey struct {
	release Release
	object  ObjectRef
	path    string
}

// NewMemory is a Memory with the default limit and window.
func NewMemory() *Memory { return &Memory{Limit: DefaultLimit, Window: DefaultWindow} }

// Corrected records that paths of obj of release r were corrected at now;
// a re-created object is its path "".
func (m *Memory) Corrected(r Release, obj ObjectRef, paths []string, now time.Time) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.hit == nil {
		m.hit = map[memoryKey][]time.Time{}
	}
	for _, p := range paths {
		k := memoryKey{r, obj, p}
		m.hit[k] = append(m.recent(k, now), now)
	}
}

// contested reports whether path of obj was corrected Limit times within
// the window before now.
func (m *Memory) contested(r Release, obj ObjectRef, path string, now time.Time) bool {
	if m == nil {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	limit := m.Limit
	if limit <= 0 {
		limit = DefaultLimit
	}
	return len(m.recent(memoryKey{r, obj, path}, now)) >= limit
}

// recent are the corrections of k within the window; older ones are
// dropped. m.mu is held.
func (m *Memory) recent(k memoryKey, now time.Time) []time.Time {
	w := m.Window
	if w <= 0 {
		w = DefaultWindow
	}
	ts := m.hit[k]
	keep := ts[:0]
	for _, t := range ts {
		if now.Sub(t) < w {
			keep = append(keep, t)
		}
	}
	if len(keep) == 0 {
		delete(m.hit, k)
		return nil
	}
	m.hit[k] = keep
	return keep
}

// Forget drops what is remembered of release r (gone, or its drift
// policy turned off).
func (m *Memory) Forget(r Release) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for k := range m.hit {
		if k.release == r {
			delete(m.hit, k)
		}
	}
}

// Sweep drops every correction older than the window, so that the memory
// holds only fields corrected within the last window.
func (m *Memory) Sweep(now time.Time) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for k := range m.hit {
		m.recent(k, now)
	}
}
