package testenv

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// The API server's own view of who wrote what: an audit log of every write
// (create, update, patch, delete), at the Metadata level, which names the
// authenticated user and the user it impersonated. Tests of autox's service
// account impersonation read it; a package opts in with RunMainAudited.

// auditPolicy logs the metadata of writes once they are answered, and the
// request of deletes: a delete says it is a dry run in its body (its
// DeleteOptions), where other writes say so in the URL. Writes of Leases
// keep their body too: who held a Lease, renewed when, for how long.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived, ResponseStarted]
rules:
  - level: Request
    verbs: [delete, deletecollection]
  - level: Request
    verbs: [create, update, patch]
    resources: [{group: coordination.k8s.io, resources: [leases]}]
  - level: Metadata
    verbs: [create, update, patch]
  - level: None
`

// configureAudit writes the policy into a new directory and points the API
// server at it and at a log file there.
func configureAudit(env *envtest.Environment) (dir, log string, err error) {
	dir, err = os.MkdirTemp("", "autox-audit-")
	if err != nil {
		return "", "", err
	}
	policy := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		os.RemoveAll(dir)
		return "", "", err
	}
	log = filepath.Join(dir, "audit.log")
	env.ControlPlane.GetAPIServer().Configure().
		Set("audit-policy-file", policy).
		Set("audit-log-path", log).
		Set("audit-log-mode", "blocking")
	return dir, log, nil
}

// Write is one write the API server answered, as its audit log has it.
type Write struct {
	Verb string
	// User is who authenticated; As is the user it impersonated, "" for none.
	User, As        string
	Group, Resource string
	Namespace, Name string
	Code            int
	DryRun          bool
	// UserAgent is the client's, as it sent it.
	UserAgent string
	// Received and Completed are when the API server received the request
	// and answered it.
	Received, Completed time.Time
	// Body is the request's object where the policy logs it (a delete's
	// options, a Lease), else nil.
	Body json.RawMessage
}

// Writer is the identity the API server authorized the write as: the
// impersonated user when there is one.
func (w Write) Writer() string {
	if w.As != "" {
		return w.As
	}
	return w.User
}

// auditEvent is the part of an audit.k8s.io/v1 Event that Write holds.
type auditEvent struct {
	Verb       string    `json:"verb"`
	RequestURI string    `json:"requestURI"`
	UserAgent  string    `json:"userAgent"`
	Received   time.Time `json:"requestReceivedTimestamp"`
	Completed  time.Time `json:"stageTimestamp"`
	User       struct {
		Username string `json:"username"`
	} `json:"user"`
	ImpersonatedUser *struct {
		Username string `json:"username"`
	} `json:"impersonatedUser"`
	ObjectRef *struct {
		Resource  string `json:"resource"`
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
		APIGroup  string `json:"apiGroup"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	RequestObject json.RawMessage `json:"requestObject"`
}

// dryRun reports whether a request object (DeleteOptions) says dry run.
func dryRun(body json.RawMessage) bool {
	var o struct {
		DryRun []string `json:"dryRun"`
	}
	return len(body) > 0 && json.Unmarshal(body, &o) == nil && len(o.DryRun) > 0
}

// Writes returns the writes in the cluster's audit log that keep accepts.
// The cluster must have been started by RunMainAudited.
func (c *Cluster) Writes(keep func(Write) bool) ([]Write, error) {
	if c.AuditLog == "" {
		return nil, fmt.Errorf("the control plane keeps no audit log: start it with RunMainAudited")
	}
	f, err := os.Open(c.AuditLog)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Write
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var e auditEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil || e.ObjectRef == nil {
			continue // a line being written, or a write of no object
		}
		w := Write{Verb: e.Verb, User: e.User.Username, Group: e.ObjectRef.APIGroup, Resource: e.ObjectRef.Resource,
			Namespace: e.ObjectRef.Namespace, Name: e.ObjectRef.Name,
			DryRun:    strings.Contains(e.RequestURI, "dryRun=") || dryRun(e.RequestObject),
			UserAgent: e.UserAgent, Received: e.Received, Completed: e.Completed, Body: e.RequestObject}
		if e.ImpersonatedUser != nil {
			w.As = e.ImpersonatedUser.Username
		}
		if e.ResponseStatus != nil {
			w.Code = e.ResponseStatus.Code
		}
		if keep(w) {
			out = append(out, w)
		}
	}
	return out, sc.Err()
}

// sentinelPrefix names the ConfigMaps WritesSoFar writes to mark the log.
const sentinelPrefix = "audit-sentinel-"

// WritesSoFar returns the writes in namespace ns the audit log holds, in
// its order, with every one the API server answered before this call: it
// writes a sentinel ConfigMap there and waits until the log shows it, so
// that no earlier write is still on its way to the log. Sentinels are left
// out.
func (c *Cluster) WritesSoFar(t testing.TB, ns string) []Write {
	t.Helper()
	sentinel := fmt.Sprintf("%s%d", sentinelPrefix, time.Now().UnixNano())
	if _, err := c.Client.CoreV1().ConfigMaps(ns).Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: sentinel}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var out []Write
	Eventually(t, time.Minute, "the sentinel write in the audit log", func() (bool, error) {
		seen := false
		ws, err := c.Writes(func(w Write) bool {
			if w.Namespace != ns {
				return false
			}
			if w.Name == sentinel {
				seen = true
			}
			return !strings.HasPrefix(w.Name, sentinelPrefix)
		})
		out = ws
		return seen, err
	})
	return out
}
