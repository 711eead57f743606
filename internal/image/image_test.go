package image_test

import (
	"archive/tar"
	"crypto/x509"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/autox-dev/autox/internal/image"
)

// entry is one file of an image's flattened filesystem.
type entry struct {
	hdr  *tar.Header
	data []byte
}

// files flattens img the way a container runtime unpacks it.
func files(t *testing.T, img v1.Image) map[string]entry {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	out := map[string]entry{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out["/"+strings.TrimSuffix(h.Name, "/")] = entry{h, data}
	}
}

func fakeBinaries(t *testing.T) []image.Platform {
	dir := t.TempDir()
	var ps []image.Platform
	for _, arch := range []string{"amd64", "arm64"} {
		p := filepath.Join(dir, arch)
		if err := os.WriteFile(p, []byte("binary for "+arch), 0o644); err != nil {
			t.Fatal(err)
		}
		ps = append(ps, image.Platform{OS: "linux", Architecture: arch, Binary: p})
	}
	return ps
}

func digest(t *testing.T, opts image.Options) v1.Hash {
	t.Helper()
	idx, err := image.Build(opts)
	if err != nil {
		t.Fatal(err)
	}
	d, err := idx.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestBuildIsReproducible: the same inputs give the same digest, and the
// time and the binaries are part of it.
func TestBuildIsReproducible(t *testing.T) {
	opts := image.Options{Platforms: fakeBinaries(t), Version: "v1.2.3", Revision: "abc", Source: "https://example.com/autox", Created: time.Unix(1700000000, 0)}
	first := digest(t, opts)
	if again := digest(t, opts); again != first {
		t.Errorf("two builds of the same inputs: %s and %s", first, again)
	}
	later := opts
	later.Created = opts.Created.Add(time.Second)
	if d := digest(t, later); d == first {
		t.Error("the creation time does not change the digest")
	}
	if err := os.WriteFile(opts.Platforms[1].Binary, []byte("another binary"), 0o644); err != nil {
		t.Fatal(err)
	}
	if d := digest(t, opts); d == first {
		t.Error("another binary gives the same digest")
	}
}

// TestBaseLayer: what a Go program running as nonroot needs from its base.
func TestBaseLayer(t *testing.T) {
	opts := image.Options{Platforms: fakeBinaries(t)[:1], Version: "v1", Revision: "r", Source: "s", Created: time.Unix(1700000000, 0)}
	idx, err := image.Build(opts)
	if err != nil {
		t.Fatal(err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	img, err := idx.Image(m.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	fs := files(t, img)
	if !strings.Contains(string(fs["/etc/passwd"].data), "nonroot:x:65532:65532:") || !strings.Contains(string(fs["/etc/group"].data), "nonroot:x:65532:") {
		t.Errorf("no user or group 65532:\n%s%s", fs["/etc/passwd"].data, fs["/etc/group"].data)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(fs[image.CABundle].data) || len(fs[image.CABundle].data) < 100_000 {
		t.Errorf("%s is no CA bundle (%d bytes)", image.CABundle, len(fs[image.CABundle].data))
	}
	if h := fs["/tmp"].hdr; h == nil || h.Typeflag != tar.TypeDir || h.Mode != 0o1777 {
		t.Errorf("/tmp: %+v, want a directory with mode 1777", h)
	}
	if h := fs["/home/nonroot"].hdr; h == nil || h.Uid != image.UID {
		t.Errorf("/home/nonroot: %+v, want owned by %d", h, image.UID)
	}
	if h := fs[image.Entrypoint].hdr; h == nil || h.Mode != 0o755 || string(fs[image.Entrypoint].data) != "binary for amd64" {
		t.Errorf("%s: %+v", image.Entrypoint, h)
	}
	for name, e := range fs {
		if !e.hdr.ModTime.Equal(opts.Created) {
			t.Errorf("%s has mtime %s, want the creation time", name, e.hdr.ModTime)
		}
	}
}
