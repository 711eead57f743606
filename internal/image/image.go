// Package image assembles autox's container image without a container
// engine: a static base layer made here (the users and groups of a
// distroless "nonroot" image, a CA bundle, /tmp), one layer with the binary,
// and an OCI image config that runs it as uid 65532, for each platform, in
// one OCI index. Everything is derived from its inputs and the given time, so
// the same binaries give the same digest. scripts/image.sh builds the
// binaries and pushes what this package makes.
package image

import (
	"archive/tar"
	"bytes"
	"encoding/pem"
	"fmt"
	"io"
	"os"
	"sort"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// The user the image runs as: distroless's "nonroot", which the manifests'
// runAsUser names too.
const (
	UID        = 65532
	User       = "65532:65532"
	Entrypoint = "/autox"
	// CABundle is where Go's crypto/x509 looks first on Linux.
	CABundle = "/etc/ssl/certs/ca-certificates.crt"
)

// The OCI annotation keys the image config's labels and the index carry.
const (
	LabelSource   = "org.opencontainers.image.source"
	LabelVersion  = "org.opencontainers.image.version"
	LabelRevision = "org.opencontainers.image.revision"
	LabelCreated  = "org.opencontainers.image.created"
	LabelTitle    = "org.opencontainers.image.title"
)

// Platform is one os/arch of the image and the binary built for it.
type Platform struct {
	OS, Architecture, Variant string
	// Binary is the path of autox built for this platform (static, CGO off).
	Binary string
}

// Options describe the image.
type Options struct {
	Platforms []Platform
	// Version is what `autox version` prints (main.version) and the
	// version label; Revision the commit; Source the repository's URL.
	Version, Revision, Source string
	// Created is the time written in the config, labels and every file's
	// mtime: the commit's time, for an image that is the same at every build.
	Created time.Time
}

// Build returns the multi-platform index of the image.
func Build(opts Options) (v1.ImageIndex, error) {
	if len(opts.Platforms) == 0 {
		return nil, fmt.Errorf("no platform to build the image for")
	}
	if opts.Version == "" || opts.Revision == "" || opts.Source == "" {
		return nil, fmt.Errorf("the image needs a version, a revision and a source (got %q, %q, %q)", opts.Version, opts.Revision, opts.Source)
	}
	created := opts.Created.UTC()
	base, err := BaseLayer(created)
	if err != nil {
		return nil, err
	}
	labels := map[string]string{
		LabelSource:   opts.Source,
		LabelVersion:  opts.Version,
		LabelRevision: opts.Revision,
		LabelCreated:  created.Format(time.RFC3339),
		LabelTitle:    "autox",
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, p := range opts.Platforms {
		img, err := platformImage(p, base, labels, created)
		if err != nil {
			return nil, fmt.Errorf("image for %s/%s: %w", p.OS, p.Architecture, err)
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{
			Platform: &v1.Platform{OS: p.OS, Architecture: p.Architecture, Variant: p.Variant},
		}})
	}
	return mutate.Annotations(idx, labels).(v1.ImageIndex), nil
}

func platformImage(p Platform, base v1.Layer, labels map[string]string, created time.Time) (v1.Image, error) {
	bin, err := os.ReadFile(p.Binary)
	if err != nil {
		return nil, fmt.Errorf("cannot read the binary: %w", err)
	}
	app, err := layer(created, []file{{name: "autox", mode: 0o755, data: bin}})
	if err != nil {
		return nil, err
	}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err = mutate.Append(img,
		mutate.Addendum{Layer: base, History: v1.History{Created: v1.Time{Time: created}, CreatedBy: "autox base: passwd, group, nsswitch.conf, CA bundle, /tmp, /home/nonroot", Comment: "built by scripts/image.sh"}},
		mutate.Addendum{Layer: app, History: v1.History{Created: v1.Time{Time: created}, CreatedBy: "autox binary " + labels[LabelVersion], Comment: "built by scripts/image.sh"}},
	)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Variant = p.OS, p.Architecture, p.Variant
	cf.Created = v1.Time{Time: created}
	cf.Author = labels[LabelSource]
	cf.Config.User = User
	cf.Config.Entrypoint = []string{Entrypoint}
	cf.Config.Cmd = nil
	cf.Config.WorkingDir = "/"
	cf.Config.Env = []string{"PATH=/", "SSL_CERT_FILE=" + CABundle}
	cf.Config.Labels = labels
	return mutate.ConfigFile(img, cf)
}

// BaseLayer is the static base every platform shares: what a distroless
// static "nonroot" image gives a Go binary, made here because no base image
// can be pulled on a machine without the internet. The CA bundle is the
// Mozilla (NSS) trust store that golang.org/x/crypto/x509roots/fallback
// ships, pinned by go.sum, so the layer is the same on every machine; roots
// that NSS constrains (distrust after a date) are left out, since a PEM
// bundle cannot say so.
func BaseLayer(created time.Time) (v1.Layer, error) {
	var cas bytes.Buffer
	for r := range bundle.Roots() {
		if r.Constraint != nil {
			continue
		}
		if err := pem.Encode(&cas, &pem.Block{Type: "CERTIFICATE", Bytes: r.Certificate}); err != nil {
			return nil, err
		}
	}
	return layer(created, []file{
		{name: "etc/", mode: 0o755, dir: true},
		{name: "etc/passwd", mode: 0o644, data: []byte("root:x:0:0:root:/root:/sbin/nologin\n" +
			"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n" +
			"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
		{name: "etc/group", mode: 0o644, data: []byte("root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n")},
		// Go's resolver reads it: files first, then DNS, as glibc does.
		{name: "etc/nsswitch.conf", mode: 0o644, data: []byte("hosts: files dns\n")},
		{name: "etc/ssl/", mode: 0o755, dir: true},
		{name: "etc/ssl/certs/", mode: 0o755, dir: true},
		{name: CABundle[1:], mode: 0o644, data: cas.Bytes()},
		{name: "home/", mode: 0o755, dir: true},
		{name: "home/nonroot/", mode: 0o700, dir: true, owner: UID},
		{name: "root/", mode: 0o700, dir: true},
		{name: "tmp/", mode: 0o1777, dir: true},
	})
}

type file struct {
	name  string
	mode  int64
	dir   bool
	owner int
	data  []byte
}

// layer makes a gzipped tar layer of files, in name order, every entry
// with the same time and numeric owners only, so that it is reproducible.
func layer(created time.Time, files []file) (v1.Layer, error) {
	sort.Slice(files, func(i, j int) bool { return files[i].name < files[j].name })
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		h := &tar.Header{Name: f.name, Mode: f.mode, Uid: f.owner, Gid: f.owner, ModTime: created}
		if f.dir {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(f.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("tar %s: %w", f.name, err)
		}
		if _, err := io.Copy(tw, bytes.NewReader(f.data)); err != nil {
			return nil, fmt.Errorf("tar %s: %w", f.name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil },
		tarball.WithMediaType(types.OCILayer))
}
