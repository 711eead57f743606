// Package helmops makes every Helm SDK call autox needs: install, upgrade,
// uninstall, reinstall (validated by a dry run before anything is removed),
// rollback and adoption (a rename hands a release to a new owner) of one
// release, and the reads of the releases one autox instance manages, into
// the vocabulary of internal/format (format.Release, format.Record). One
// file per verb: install.go, upgrade.go, uninstall.go, reinstall.go,
// rollback.go, adopt.go, replace.go (the dry run of a moved release's
// replacement); reads.go and inventory.go read; actionconfig.go sets Helm up
// for one operation. It decides nothing: callers (package triggers) say what
// to do; this package does it with the real Helm storage drivers, writes the
// release labels of internal/format, and passes Helm's errors and debug lines
// through the caller's redact.Redactor so that values never leak through them.
package helmops

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"

	"github.com/autox-dev/autox/internal/format"
)

// Storage drivers autox supports for release records.
const (
	DriverSecret    = "secret"
	DriverConfigMap = "configmap"
)

// recordResource is the resource that holds a driver's release records.
func recordResource(storageDriver string) schema.GroupVersionResource {
	if storageDriver == DriverConfigMap {
		return schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	}
	return schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
}

// Options configure a Manager.
type Options struct {
	// RESTConfig is the cluster's config; Helm's actions (their kube client
	// and discovery) are built from it.
	RESTConfig *rest.Config
	// Clientset and Metadata are the clients of RESTConfig the Manager reads
	// and writes release records with: the caller builds them once and shares
	// them with the rest of the process. When nil, New builds them from
	// RESTConfig.
	Clientset kubernetes.Interface
	Metadata  metadata.Interface
	// StorageDriver is DriverSecret (default) or DriverConfigMap.
	StorageDriver string
	// Instance is written on every release as format.LabelInstance; the readers
	// return only this instance's releases. Default format.DefaultInstance.
	Instance string
	// Timeout bounds each Helm operation (--helm-timeout).
	Timeout time.Duration
	// MaxHistory bounds the revisions kept per release (--max-history).
	MaxHistory int
	// ListPageSize is the page size of the LISTs of every record of a
	// namespace (the Inventory's, the record index's); 0: one response
	// (--record-list-page-size).
	ListPageSize int64
	Log          zerolog.Logger
}

// Manager runs Helm operations and reads release records.
type Manager struct {
	opts      Options
	clientset kubernetes.Interface
	meta      metadata.Interface
	discovery *sharedDiscovery
	// index, when set (NewRecordIndex), answers which records exist; nil
	// or a namespace it cannot vouch for means live LISTs.
	index atomic.Pointer[RecordIndex]

	// background counts the goroutines of untilDone still running,
	// including those it stopped waiting for.
	background sync.WaitGroup

	// as is the service account the operations run as (zero: autox's own
	// identity); identities are the Managers As made of this one.
	as         ServiceAccount
	identities identities
	// parent is the Manager As made this one of (nil for autox's own): its
	// record index learns of this one's writes (see writes).
	parent *Manager

	// conflicts answers installs' conflict reads from lists, made once.
	conflictsOnce sync.Once
	conflicts     *conflictLists
}

// writes are the expectations of the record index that must learn of m's
// record writes: the index of m, or of the Manager m acts for (a service
// account's writes are this process's own writes, which a pass right after
// must find: read-your-writes). nil without an index.
func (m *Manager) writes() *expectations {
	owner := m
	if m.parent != nil {
		owner = m.parent
	}
	return owner.index.Load().expectations()
}

// New returns a Manager for the cluster of opts.RESTConfig, using
// opts.Clientset and opts.Metadata.
func New(opts Options) (*Manager, error) {
	switch opts.StorageDriver {
	case "":
		opts.StorageDriver = DriverSecret
	case DriverSecret, DriverConfigMap:
	default:
		return nil, fmt.Errorf("unknown storage driver %q: use %q or %q", opts.StorageDriver, DriverSecret, DriverConfigMap)
	}
	if opts.Instance == "" {
		opts.Instance = format.DefaultInstance
	}
	// The instance is a label value on every release: refuse one the API
	// server would reject on the first install rather than fail there.
	if errs := validation.IsValidLabelValue(opts.Instance); len(errs) > 0 {
		return nil, fmt.Errorf("invalid instance %q: %s", opts.Instance, strings.Join(errs, "; "))
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 5 * time.Minute
	}
	if opts.Clientset == nil {
		cs, err := kubernetes.NewForConfig(opts.RESTConfig)
		if err != nil {
			return nil, fmt.Errorf("cannot create Kubernetes client: %w", err)
		}
		opts.Clientset = cs
	}
	if opts.Metadata == nil {
		mc, err := metadata.NewForConfig(opts.RESTConfig)
		if err != nil {
			return nil, fmt.Errorf("cannot create metadata client: %w", err)
		}
		opts.Metadata = mc
	}
	return &Manager{opts: opts, clientset: opts.Clientset, meta: opts.Metadata, discovery: &sharedDiscovery{config: opts.RESTConfig}}, nil
}

// Timeout is the bound of one Helm operation.
func (m *Manager) Timeout() time.Duration { return m.opts.Timeout }

// Instance is the instance whose releases this Manager writes and reads.
func (m *Manager) Instance() string { return m.opts.Instance }
