package helmops

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	helmrelease "helm.sh/helm/v4/pkg/release"
	release "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
)

// secretRecords is Helm's secret storage driver, reads and deletes
// included, except that it encodes the records it creates and updates with
// a gzip writer reused from a pool. Helm's driver allocates a new
// best-compression writer (about a megabyte of tables) for each record, two
// per install: during a convergence that allocation, and the garbage
// collection it causes, were a third of autox's CPU time. The records are the
// ones Helm's driver writes, byte for byte: the same labels (the release's,
// then createdAt or modifiedAt, name, owner, status, version), the same type,
// and the release as base64 of gzip (best compression) of its JSON.
type secretRecords struct {
	*driver.Secrets
	client typedcorev1.SecretInterface
}

// newSecretRecords logs through log: Helm's driver would log through
// slog.Default otherwise (see helmLog).
func newSecretRecords(client typedcorev1.SecretInterface, log slog.Handler) *secretRecords {
	d := driver.NewSecrets(client)
	d.SetLogger(log)
	return &secretRecords{Secrets: d, client: client}
}

// Create stores a new record, as Helm's driver does: ErrReleaseExists when
// the record exists.
func (s *secretRecords) Create(key string, r helmrelease.Releaser) error {
	rls, err := asV1(r)
	if err != nil {
		return fmt.Errorf("create: %w", err)
	}
	obj, err := recordSecret(key, rls, "createdAt")
	if err != nil {
		return fmt.Errorf("create: failed to encode release %q: %w", rls.Name, err)
	}
	if _, err := s.client.Create(context.Background(), obj, metav1.CreateOptions{}); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return driver.ErrReleaseExists
		}
		return fmt.Errorf("create: failed to create: %w", err)
	}
	return nil
}

// Update replaces a record, as Helm's driver does.
func (s *secretRecords) Update(key string, r helmrelease.Releaser) error {
	rls, err := asV1(r)
	if err != nil {
		return fmt.Errorf("update: %w", err)
	}
	obj, err := recordSecret(key, rls, "modifiedAt")
	if err != nil {
		return fmt.Errorf("update: failed to encode release %q: %w", rls.Name, err)
	}
	if _, err := s.client.Update(context.Background(), obj, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("update: failed to update: %w", err)
	}
	return nil
}

// recordSecret is the Secret Helm's driver makes of rls, timeLabel
// (createdAt or modifiedAt) set to now.
func recordSecret(key string, rls *release.Release, timeLabel string) (*corev1.Secret, error) {
	data, err := encodeRecord(rls)
	if err != nil {
		return nil, err
	}
	labels := make(map[string]string, len(rls.Labels)+5)
	for k, v := range rls.Labels {
		labels[k] = v
	}
	labels[timeLabel] = strconv.FormatInt(time.Now().Unix(), 10)
	labels["name"] = rls.Name
	labels["owner"] = "helm"
	labels["status"] = rls.Info.Status.String()
	labels["version"] = strconv.Itoa(rls.Version)
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: key, Labels: labels},
		Type:       "helm.sh/release.v1",
		Data:       map[string][]byte{"release": data},
	}, nil
}

var gzipWriters = sync.Pool{New: func() any {
	w, _ := gzip.NewWriterLevel(nil, gzip.BestCompression) // a valid level: no error
	return w
}}

// encodeRecord is Helm's encoding of a release record.
func encodeRecord(rls *release.Release) ([]byte, error) {
	js, err := json.Marshal(rls)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	w := gzipWriters.Get().(*gzip.Writer)
	defer gzipWriters.Put(w)
	w.Reset(&buf)
	if _, err := w.Write(js); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	out := make([]byte, base64.StdEncoding.EncodedLen(buf.Len()))
	base64.StdEncoding.Encode(out, buf.Bytes())
	return out, nil
}
