// Package eventsink sends the Events autox records off the critical path:
// client-go's broadcaster still correlates and aggregates them (its spam
// filter and aggregator), but where it would write them one after another in
// one goroutine — thousands of POSTs trailing minutes behind a cold
// convergence — this sink queues them for a few writers and answers at once.
// A budget (a token bucket and bounded queues) caps what Events may cost the
// API server; an Event over budget is dropped and counted, never waited
// for. Events of one object keep their order: each object has one writer.
package eventsink

import (
	"context"
	"errors"
	"hash/fnv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/util/flowcontrol"
)

// Options configure a Sink; zero values take the defaults below.
type Options struct {
	// Workers write Events at once (default 4).
	Workers int
	// Queue is each worker's bound of Events waiting (default 256).
	Queue int
	// QPS and Burst are the budget of Warnings: Events per second sent
	// on average, and at once (defaults 50 and 500: a cold start of
	// 10,000 releases that fails records a few thousand over minutes).
	QPS   float32
	Burst int
	// NormalQPS and NormalBurst are the budget of Normal Events (installed,
	// upgraded, …), apart from the Warnings' so a flood of them never
	// crowds a failure out (defaults 10 and 100). An Event per release
	// during a cold convergence would cost the API server one write per
	// release — a third of the floor — for what the release records and
	// the metrics already say; a Warning is what a user must see.
	NormalQPS   float32
	NormalBurst int
	// Budget, if set, is the budget this sink spends, shared with other
	// sinks (QPS, Burst, NormalQPS and NormalBurst are then its, not this
	// sink's): a replica holding several shards runs a sink per shard term,
	// and the budget caps what the process's Events cost, not each term's.
	Budget *Budget
	// Metrics counts what happened to each Event (nil: not counted).
	Metrics *Metrics
	Log     zerolog.Logger
}

// Budget is what Events may cost: a token bucket for Warnings and one for
// every other Event. Over it, an Event is dropped.
type Budget struct {
	warnings, normal flowcontrol.RateLimiter
}

// NewBudget returns the budget opts set (QPS, Burst, NormalQPS and
// NormalBurst, or their defaults), to share between sinks.
func NewBudget(opts Options) *Budget {
	opts.setDefaults()
	return &Budget{warnings: flowcontrol.NewTokenBucketRateLimiter(opts.QPS, opts.Burst),
		normal: flowcontrol.NewTokenBucketRateLimiter(opts.NormalQPS, opts.NormalBurst)}
}

// Sink is a record.EventSink that writes asynchronously. Start it with
// Run; Events given to it after Run returned are dropped.
type Sink struct {
	events  typedcorev1.EventInterface
	opts    Options
	budget  *Budget
	queues  []chan write
	mu      sync.RWMutex // guards stopped against sends on closed queues
	stopped bool
	// dropAfter is set when Run's ctx ends: what is still queued after it
	// is dropped, so a stop waits for the drain at most.
	dropAfter atomic.Pointer[time.Time]
}

type verb int

const (
	create verb = iota
	patch
	update
)

type write struct {
	verb  verb
	event *corev1.Event
	patch []byte
}

// New returns a Sink writing through events (the term's fenced client:
// nothing queued in a term reaches the API server after it).
func New(events typedcorev1.EventInterface, opts Options) *Sink {
	opts.setDefaults()
	budget := opts.Budget
	if budget == nil {
		budget = NewBudget(opts)
	}
	s := &Sink{events: events, opts: opts, budget: budget}
	for i := 0; i < opts.Workers; i++ {
		s.queues = append(s.queues, make(chan write, opts.Queue))
	}
	return s
}

func (o *Options) setDefaults() {
	if o.Workers <= 0 {
		o.Workers = 4
	}
	if o.Queue <= 0 {
		o.Queue = 256
	}
	if o.QPS <= 0 {
		o.QPS = 50
	}
	if o.Burst <= 0 {
		o.Burst = 500
	}
	if o.NormalQPS <= 0 {
		o.NormalQPS = 10
	}
	if o.NormalBurst <= 0 {
		o.NormalBurst = 100
	}
}

// Run writes queued Events until ctx ends, then writes what is queued for
// at most drain more and drops the rest. It returns when every worker has.
func (s *Sink) Run(ctx context.Context, drain time.Duration) {
	var wg sync.WaitGroup
	for _, q := range s.queues {
		wg.Add(1)
		go func(q chan write) {
			defer wg.Done()
			s.work(q)
		}(q)
	}
	<-ctx.Done()
	deadline := time.Now().Add(drain)
	s.dropAfter.Store(&deadline)
	s.mu.Lock()
	s.stopped = true
	for _, q := range s.queues {
		close(q)
	}
	s.mu.Unlock()
	wg.Wait()
}

// Create queues event and answers as if it were written: the broadcaster's
// correlator keeps it to aggregate later Events of the object into it.
func (s *Sink) Create(event *corev1.Event) (*corev1.Event, error) {
	return s.enqueue(write{verb: create, event: event.DeepCopy()})
}

// Patch queues the aggregator's patch (a higher count, the last message).
func (s *Sink) Patch(old *corev1.Event, data []byte) (*corev1.Event, error) {
	return s.enqueue(write{verb: patch, event: old.DeepCopy(), patch: data})
}

// Update queues a whole update (client-go's broadcaster does not use it
// today; it is part of the interface).
func (s *Sink) Update(event *corev1.Event) (*corev1.Event, error) {
	return s.enqueue(write{verb: update, event: event.DeepCopy()})
}

func (s *Sink) enqueue(w write) (*corev1.Event, error) {
	answer := w.event.DeepCopy()
	s.mu.RLock()
	defer s.mu.RUnlock()
	budget := s.budget.normal
	if w.event.Type == corev1.EventTypeWarning {
		budget = s.budget.warnings
	}
	if s.stopped || !budget.TryAccept() {
		s.opts.Metrics.count(resultDropped)
		return answer, nil
	}
	select {
	case s.queues[s.worker(w.event)] <- w:
	default:
		s.opts.Metrics.count(resultDropped)
	}
	// Never an error: the broadcaster would retry, in its one goroutine.
	return answer, nil
}

// worker picks the writer of the Event's object, so its Events stay in order.
func (s *Sink) worker(e *corev1.Event) int {
	h := fnv.New32a()
	o := e.InvolvedObject
	_, _ = h.Write([]byte(o.Namespace + "/" + o.Kind + "/" + o.Name + "/" + string(o.UID)))
	return int(h.Sum32() % uint32(len(s.queues)))
}

func (s *Sink) work(q chan write) {
	for w := range q {
		if d := s.dropAfter.Load(); d != nil && time.Now().After(*d) {
			s.opts.Metrics.count(resultDropped)
			continue
		}
		s.write(w)
	}
}

// write sends one Event, once more after a second when the API server could
// not be reached, and counts the outcome. A patch of an Event that is gone
// (expired, or its create was dropped) creates it, as client-go does.
func (s *Sink) write(w write) {
	var err error
	for try := 0; try < 2; try++ {
		err = s.send(w)
		var status apierrors.APIStatus
		if err == nil || errors.As(err, &status) {
			break // written, or refused for good: a second try gets the same answer
		}
		time.Sleep(time.Second)
	}
	if err != nil {
		s.opts.Metrics.count(resultFailed)
		s.opts.Log.Debug().Err(err).Str("reason", w.event.Reason).Str("kind", w.event.InvolvedObject.Kind).
			Str("namespace", w.event.InvolvedObject.Namespace).Str("name", w.event.InvolvedObject.Name).Msg("cannot record an Event")
		return
	}
	s.opts.Metrics.count(resultSent)
}

func (s *Sink) send(w write) error {
	// Background: the fenced client ends what a finished term sends; a
	// context here would only cut the drain short.
	ctx := context.Background()
	e := w.event
	switch w.verb {
	case patch:
		_, err := s.events.PatchWithEventNamespaceWithContext(ctx, e, w.patch)
		if !apierrors.IsNotFound(err) {
			return err
		}
		fallthrough
	case create:
		e.ResourceVersion = ""
		_, err := s.events.CreateWithEventNamespaceWithContext(ctx, e)
		if apierrors.IsAlreadyExists(err) {
			return nil // a retry of a create that landed
		}
		return err
	default:
		_, err := s.events.UpdateWithEventNamespaceWithContext(ctx, e)
		return err
	}
}

const (
	resultSent    = "sent"
	resultDropped = "dropped"
	resultFailed  = "failed"
)

// Metrics count Events by what became of them.
type Metrics struct {
	events *prometheus.CounterVec
}

// NewMetrics registers autox_events_total on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{events: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "autox_events_total",
		Help: "Kubernetes Events autox recorded, by result: sent, dropped (over the Event budget or queue), failed (refused or unreachable API server).",
	}, []string{"result"})}
	for _, r := range []string{resultSent, resultDropped, resultFailed} {
		m.events.WithLabelValues(r)
	}
	if err := reg.Register(m.events); err != nil {
		return nil, err
	}
	return m, nil
}

func (m *Metrics) count(result string) {
	if m != nil {
		m.events.WithLabelValues(result).Inc()
	}
}
