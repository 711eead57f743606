package triggers

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/autox-dev/autox/internal/format"
	"github.com/autox-dev/autox/triggers/plan"
)

// The namespaces an instance has managed are recorded in one ConfigMap,
// ManagedSetName(instance), in the leader election namespace: its key
// managedKey holds one namespace per line, sorted. Start-up cleanup and the
// passes look in these besides the config's, so releases left in a namespace
// that was dropped with its specs while autox was down are found (DESIGN §4).
const (
	managedPrefix = "autox-namespaces-"
	managedKey    = "namespaces"
	// termKey holds a token of the leadership term that last claimed the
	// record (see ManagedSet.claimed).
	termKey = "term"
)

// ManagedSetName is the name of the ConfigMap recording the namespaces
// instance has managed: one per instance, so that instances never share it.
func ManagedSetName(instance string) string { return managedPrefix + instance }

// parseManaged reads the recorded set out of cm. A ConfigMap of that name
// that instance did not write, or a line that is no namespace name, is an
// error: it is neither trusted nor overwritten.
func parseManaged(cm *corev1.ConfigMap, instance string) ([]string, error) {
	if got := cm.Labels[format.LabelInstance]; got != instance {
		return nil, fmt.Errorf("ConfigMap %s/%s is not the record of autox instance %q (its label %s is %q): autox neither reads nor overwrites it; delete or rename it",
			cm.Namespace, cm.Name, instance, format.LabelInstance, got)
	}
	var out []string
	for i, line := range strings.Split(cm.Data[managedKey], "\n") {
		if line = strings.TrimSpace(line); line == "" {
			continue
		}
		if errs := validation.IsDNS1123Label(line); len(errs) > 0 {
			return nil, fmt.Errorf("ConfigMap %s/%s, key %s, line %d: %q is not a namespace name (%s); fix or delete the line",
				cm.Namespace, cm.Name, managedKey, i+1, line, strings.Join(errs, "; "))
		}
		out = append(out, line)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// managedConfigMap is base (nil: a new object) holding set.
func managedConfigMap(base *corev1.ConfigMap, namespace, instance, term string, set []string) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: ManagedSetName(instance)}}
	if base != nil {
		cm = base.DeepCopy()
	}
	if cm.Labels == nil {
		cm.Labels = map[string]string{}
	}
	cm.Labels[format.LabelInstance] = instance
	cm.Labels["app.kubernetes.io/managed-by"] = "autox"
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
	text := strings.Join(set, "\n")
	if text != "" {
		text += "\n"
	}
	cm.Data[managedKey] = text
	cm.Data[termKey] = term
	return cm
}

// getManaged reads the record; a record that does not exist is the empty
// set with a nil object, any other failure an error.
func getManaged(ctx context.Context, client typedcorev1.ConfigMapsGetter, namespace, instance string) (*corev1.ConfigMap, []string, error) {
	cm, err := client.ConfigMaps(namespace).Get(ctx, ManagedSetName(instance), metav1.GetOptions{})
	if notFoundNamesIt(err, ManagedSetName(instance)) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("cannot read the namespaces autox instance %s has managed (ConfigMap %s/%s): %w",
			instance, namespace, ManagedSetName(instance), err)
	}
	set, err := parseManaged(cm, instance)
	return cm, set, err
}

// notFoundNamesIt reports whether err is the API server's own word that
// name does not exist: a NotFound Status naming it. client-go makes one of
// those from any bare 404 too (a proxy's, a gateway's), marked as an
// unexpected server response; that says nothing about the record.
func notFoundNamesIt(err error, name string) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return false
	}
	s := status.Status()
	if s.Reason != metav1.StatusReasonNotFound || s.Details == nil || s.Details.Name != name {
		return false
	}
	for _, c := range s.Details.Causes {
		if c.Type == metav1.CauseTypeUnexpectedServerResponse {
			return false
		}
	}
	return true
}

// ReadManagedSet returns the namespaces instance has recorded, without
// writing anything (plan and list): none when it has recorded none yet.
// found says whether the record exists at all; when it does not, the
// namespace asked may not be the one the running instance writes to.
func ReadManagedSet(ctx context.Context, client typedcorev1.ConfigMapsGetter, namespace, instance string) (set []string, found bool, err error) {
	cm, set, err := getManaged(ctx, client, namespace, instance)
	return set, cm != nil, err
}

// ManagedSetOptions configure a ManagedSet.
type ManagedSetOptions struct {
	// Client writes through the leadership term's fence.
	Client    typedcorev1.ConfigMapsGetter
	Namespace string
	Instance  string
	State     *ConfigState
	Log       zerolog.Logger
}

// ManagedSet keeps the recorded set in line with a ConfigState for one
// leadership term: every namespace garbage collection looks in is in it, and
// a namespace leaves it only after a listing has found it empty
// (ConfigState.Collected). Writes are conditional on the resourceVersion
// last read or written, so nothing another writer recorded is lost; they
// happen only when the set changes.
type ManagedSet struct {
	opts ManagedSetOptions

	mu sync.Mutex // one read or write at a time
	// loaded says base and stored are the object as last read or written;
	// base is nil when it does not exist.
	loaded bool
	once   bool // the first load of the term is done
	// term is this term's token, written with every write; claimed says a
	// write of this term has succeeded. Until then the term writes even an
	// unchanged set once: the new resourceVersion makes a write of an
	// earlier term still in flight (sent on the resourceVersion both read)
	// fail with a Conflict instead of undoing what this term relies on.
	term    string
	claimed bool
	base    *corev1.ConfigMap
	stored  []string
	// recorded is stored for readers that must not wait for a write;
	// failed is the error of the last Sync (nil: none).
	recorded atomic.Pointer[[]string]
	failed   atomic.Pointer[error]
}

// NewManagedSet returns the record of opts.Instance for one term.
func NewManagedSet(opts ManagedSetOptions) *ManagedSet {
	return &ManagedSet{opts: opts, term: rand.Text()}
}

// Sync reads the record (once per term, and again after a conflict), takes
// its namespaces into the state, and writes it when the state asks for a
// change. A record that cannot be read is an error and is not written: the
// state then covers the config's namespaces and those it knows of.
func (m *ManagedSet) Sync(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	err := m.sync(ctx)
	if err != nil {
		m.failed.Store(&err)
	} else {
		m.failed.Store(nil)
	}
	return err
}

func (m *ManagedSet) sync(ctx context.Context) error {
	const attempts = 3
	for i := 0; i < attempts; i++ {
		if !m.loaded {
			if err := m.load(ctx); err != nil {
				return err
			}
		}
		want := m.opts.State.Record(m.stored)
		if slices.Equal(want, m.stored) && (m.base != nil || len(want) == 0) && (m.claimed || m.base == nil) {
			m.opts.State.Recorded(m.stored)
			return nil
		}
		existed := m.base != nil
		err := m.write(ctx, want)
		if apierrors.IsConflict(err) || (existed && apierrors.IsNotFound(err)) || (!existed && apierrors.IsAlreadyExists(err)) {
			m.loaded = false // changed, deleted or created behind us: read again and merge
			continue
		}
		if err != nil {
			return fmt.Errorf("cannot record the namespaces autox instance %s manages in ConfigMap %s/%s: %w",
				m.opts.Instance, m.opts.Namespace, ManagedSetName(m.opts.Instance), err)
		}
	}
	return fmt.Errorf("cannot record the namespaces autox instance %s manages in ConfigMap %s/%s: it changed under every one of %d writes",
		m.opts.Instance, m.opts.Namespace, ManagedSetName(m.opts.Instance), attempts)
}

func (m *ManagedSet) load(ctx context.Context) error {
	cm, set, err := getManaged(ctx, m.opts.Client, m.opts.Namespace, m.opts.Instance)
	if err != nil {
		return err
	}
	if !m.once {
		// A new term trusts no listing of an earlier one: what the record
		// holds is looked in again until a listing of this term finds it empty.
		m.opts.State.startTerm()
		m.once = true
	}
	m.opts.State.Remember(set)
	m.base, m.stored, m.loaded = cm, set, true
	m.recorded.Store(&set)
	return nil
}

func (m *ManagedSet) write(ctx context.Context, want []string) error {
	cms := m.opts.Client.ConfigMaps(m.opts.Namespace)
	obj := managedConfigMap(m.base, m.opts.Namespace, m.opts.Instance, m.term, want)
	var (
		out *corev1.ConfigMap
		err error
	)
	if m.base == nil {
		out, err = cms.Create(ctx, obj, metav1.CreateOptions{FieldManager: "autox"})
	} else {
		out, err = cms.Update(ctx, obj, metav1.UpdateOptions{FieldManager: "autox"})
	}
	if err != nil {
		return err
	}
	added, removed := setDiff(m.stored, want)
	m.opts.Log.Info().Strs("added", added).Strs("removed", removed).Str("configMap", m.opts.Namespace+"/"+out.Name).
		Msg("recorded the namespaces this instance manages")
	m.base, m.stored, m.claimed = out, want, true
	m.recorded.Store(&want)
	m.opts.State.Recorded(want)
	return nil
}

// Recorded is the record as last read or written, as an observation
// carries it (plan.ManagedNamespaces): its namespaces (none before the
// first read) and why the last Sync failed, if it did. An install into a
// namespace it does not hold waits (plan.Decide) until a Sync records it.
func (m *ManagedSet) Recorded() *plan.ManagedNamespaces {
	out := &plan.ManagedNamespaces{ConfigMap: m.opts.Namespace + "/" + ManagedSetName(m.opts.Instance)}
	if p := m.recorded.Load(); p != nil {
		out.Namespaces = *p
	}
	if p := m.failed.Load(); p != nil {
		out.Err = *p
	}
	return out
}

// setDiff returns what want adds to and removes from had (both sorted).
func setDiff(had, want []string) (added, removed []string) {
	for _, ns := range want {
		if !slices.Contains(had, ns) {
			added = append(added, ns)
		}
	}
	for _, ns := range had {
		if !slices.Contains(want, ns) {
			removed = append(removed, ns)
		}
	}
	return added, removed
}
