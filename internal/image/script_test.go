package image_test

import (
	"bytes"
	"context"
	"debug/elf"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/autox-dev/autox/internal/image"
	"github.com/autox-dev/autox/internal/testenv"
)

// TestImageScript builds the image as a user does, with scripts/image.sh,
// pushes it to a real registry (scripts/registry.sh's) on 127.0.0.1, pulls
// it back, checks each platform's config and files, runs the amd64 binary
// taken out of its layer, and pins the digest in an overlay of the base.
// The binaries may come from image.sh's cache: an amd64 image built with
// --no-cache must be the same, byte for byte.
func TestImageScript(t *testing.T) {
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	addr := startRegistry(t, root)

	const version = "v9.9.9-imagetest"
	ref := imageScript(t, root, addr+"/test", version)
	revision, err := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatal(err)
	}

	idx, err := remote.Index(ref, remote.WithContext(ctx))
	if err != nil {
		t.Fatalf("pull %s: %v", ref, err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	machines := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}
	seen := map[string]bool{}
	for _, desc := range m.Manifests {
		arch := desc.Platform.Architecture
		seen[arch] = true
		img, err := remote.Image(ref.Context().Digest(desc.Digest.String()), remote.WithContext(ctx))
		if err != nil {
			t.Fatalf("pull %s image: %v", arch, err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		c := cf.Config
		if cf.OS != "linux" || cf.Architecture != arch || c.User != image.User || strings.Join(c.Entrypoint, " ") != image.Entrypoint {
			t.Errorf("%s: os %s, architecture %s, user %q, entrypoint %q", arch, cf.OS, cf.Architecture, c.User, c.Entrypoint)
		}
		for k, want := range map[string]string{image.LabelVersion: version, image.LabelRevision: strings.TrimSpace(string(revision)),
			image.LabelSource: "https://github.com/autox-dev/autox"} {
			if c.Labels[k] != want {
				t.Errorf("%s: label %s = %q, want %q", arch, k, c.Labels[k], want)
			}
		}
		bin := files(t, img)[image.Entrypoint]
		if bin.hdr == nil {
			t.Fatalf("%s: no %s in the image", arch, image.Entrypoint)
		}
		f, err := elf.NewFile(bytes.NewReader(bin.data))
		if err != nil || f.Machine != machines[arch] {
			t.Fatalf("%s: %s is not an ELF binary for %s (%v)", arch, image.Entrypoint, machines[arch], err)
		}
		if arch == "amd64" {
			runVersion(t, bin.data, version)
		}
	}
	if !seen["amd64"] || !seen["arm64"] || len(m.Manifests) != 2 {
		t.Errorf("platforms %v, want amd64 and arm64", m.Manifests)
	}
	pinInOverlay(t, root, ref)
	sameWithoutCache(t, root, addr, version, m)
}

// imageScript runs scripts/image.sh with args, pushing to repo (registry
// and path) with version, and returns the reference it printed last.
func imageScript(t *testing.T, root, repo, version string, args ...string) name.Digest {
	t.Helper()
	args = append([]string{filepath.Join(root, "scripts", "image.sh"), "--registry", repo, "--version", version}, args...)
	// As a process of its own group: if the test dies, the builds die too.
	p := testenv.StartProcess(t, "bash", args...)
	// A bound for a broken build; the first build for a platform compiles
	// every dependency for it (minutes), later ones come from Go's cache.
	if code, err := p.Wait(30 * time.Minute); err != nil || code != 0 {
		t.Fatalf("scripts/image.sh: exit code %d, %v\n%s", code, err, p.Output())
	}
	lines := strings.Split(strings.TrimSpace(p.Output()), "\n")
	pushed := lines[len(lines)-1]
	ref, err := name.NewDigest(pushed)
	if err != nil {
		t.Fatalf("scripts/image.sh printed %q, not a reference with a digest: %v", pushed, err)
	}
	if want := repo + "/autox:" + version + "@sha256:"; !strings.HasPrefix(pushed, want) {
		t.Errorf("pushed %s, want %s…", pushed, want)
	}
	return ref
}

// sameWithoutCache builds the amd64 image again with --no-cache and checks
// that it is the amd64 image of index, the image a cached binary went into.
// A cache key that misses something a build depends on fails here.
func sameWithoutCache(t *testing.T, root, addr, version string, index *v1.IndexManifest) {
	t.Helper()
	var cached []v1.Hash
	for _, desc := range index.Manifests {
		if desc.Platform.Architecture == "amd64" {
			cached = append(cached, desc.Digest)
		}
	}
	ref := imageScript(t, root, addr+"/uncached", version, "--no-cache", "--platforms", "linux/amd64")
	idx, err := remote.Index(ref)
	if err != nil {
		t.Fatalf("pull %s: %v", ref, err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Manifests) != 1 || len(cached) != 1 || m.Manifests[0].Digest != cached[0] {
		t.Errorf("the amd64 image built with --no-cache is %v, the one image.sh built first %v: a cached binary is not what a build makes", m.Manifests, cached)
	}
}

// startRegistry runs the registry scripts/registry.sh builds, on a free
// loopback port, until the test ends.
func startRegistry(t *testing.T, root string) string {
	t.Helper()
	out, err := exec.Command("bash", filepath.Join(root, "scripts", "registry.sh"), "build").Output()
	if err != nil {
		t.Fatalf("scripts/registry.sh build: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	testenv.StartProcess(t, strings.TrimSpace(string(out)), "--addr", addr, "--root", t.TempDir())
	testenv.Eventually(t, time.Minute, "the registry answering", func() (bool, error) {
		resp, err := http.Get("http://" + addr + "/v2/")
		if err != nil {
			return false, err
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	return addr
}

// runVersion runs the binary taken out of the image: it must be static
// (nothing of this machine's libc) and print the stamped version.
func runVersion(t *testing.T, bin []byte, version string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "autox")
	if err := os.WriteFile(path, bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if f, err := elf.Open(path); err != nil {
		t.Fatal(err)
	} else {
		if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
			t.Errorf("the binary links %v; it must be static", libs)
		}
		f.Close()
	}
	out, err := exec.Command(path, "version").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "autox "+version {
		t.Errorf("autox version from the image: %q, %v; want %q", out, err, "autox "+version)
	}
}

// pinInOverlay renders an overlay of manifests/base that pins the pushed
// digest, as README "Pinning the image" says, and checks the Deployment runs it.
func pinInOverlay(t *testing.T, root string, ref name.Digest) {
	t.Helper()
	dir := t.TempDir()
	base, err := filepath.Rel(dir, filepath.Join(root, "manifests", "base"))
	if err != nil {
		t.Fatal(err)
	}
	kustomization := "resources: [" + base + "]\nimages:\n  - name: ghcr.io/autox-dev/autox\n    newName: " + ref.Context().Name() + "\n    digest: " + ref.DigestStr() + "\n"
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(kustomization), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build of %s:\n%s\n%v", dir, kustomization, err)
	}
	var images []string
	for _, r := range res.Resources() {
		if r.GetKind() != "Deployment" {
			continue
		}
		m, err := r.Map()
		if err != nil {
			t.Fatal(err)
		}
		spec := m["spec"].(map[string]interface{})["template"].(map[string]interface{})["spec"].(map[string]interface{})
		for _, c := range spec["containers"].([]interface{}) {
			images = append(images, c.(map[string]interface{})["image"].(string))
		}
	}
	if want := ref.Context().Name() + "@" + ref.DigestStr(); len(images) != 1 || images[0] != want {
		t.Errorf("the pinned Deployment runs %v, want [%s]", images, want)
	}
}
