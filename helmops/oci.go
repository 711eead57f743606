package helmops

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	"helm.sh/helm/v3/pkg/registry"

	"github.com/autox-dev/autox/config"
)

// The ChartCache's oci:// registries: the registry client and its
// credentials, tags resolved to manifest digests (trusted for Refresh), and
// the pull.

// resolvedTag is the manifest digest a tag named when it was resolved.
type resolvedTag struct {
	digest   string
	resolved time.Time
}

func (c *ChartCache) registry() (*registry.Client, error) {
	c.regOnce.Do(func() {
		opts := []registry.ClientOption{
			registry.ClientOptWriter(io.Discard),
			// The default transport uses the system trust store, SSL_CERT_FILE included.
			registry.ClientOptHTTPClient(&http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone(), Timeout: c.opts.Timeout}),
		}
		creds := c.opts.RegistryConfig
		if creds == "" {
			// No credentials: a file that does not exist, rather than the
			// current user's docker or Helm login.
			creds = filepath.Join(c.opts.Dir, "no-registry-credentials.json")
		}
		opts = append(opts, registry.ClientOptCredentialsFile(creds))
		c.reg, c.regErr = registry.NewClient(opts...)
		if c.regErr != nil {
			c.regErr = fmt.Errorf("cannot create the OCI registry client: %w", c.regErr)
		}
	})
	return c.reg, c.regErr
}

// ociChart pulls an oci:// chart, by the digest its tag resolves to. A
// pinned chart's tag is resolved at every load and must still name the
// pin, and it is pulled by the pin: a re-pushed tag is an error, never
// another chart.
func (c *ChartCache) ociChart(_ context.Context, ref config.Chart) (archive, error) {
	reg, err := c.registry()
	if err != nil {
		return archive{}, err
	}
	repository := strings.TrimSuffix(strings.TrimPrefix(ref.Repo, "oci://"), "/") + "/" + ref.Name
	full := repository + ":" + strings.ReplaceAll(ref.Version, "+", "_")
	where := "oci://" + full
	now := c.opts.Now()

	c.mu.Lock()
	tag, known := c.tags[full]
	c.mu.Unlock()
	if ref.Pinned() {
		desc, err := reg.Resolve(full)
		if err != nil {
			return archive{}, fmt.Errorf("cannot resolve chart %s, pinned to %s: %w", where, ref.Digest, err)
		}
		if got := desc.Digest.String(); got != ref.Digest {
			return archive{}, fmt.Errorf("chart %s now names %s, but chart.digest pins %s: the tag was re-pushed with other content; nothing was changed (push a new version, or pin the new digest once you trust it)",
				where, got, ref.Digest)
		}
		tag = resolvedTag{digest: ref.Digest, resolved: now}
	} else if !known || now.Sub(tag.resolved) >= c.opts.Refresh {
		desc, err := reg.Resolve(full)
		switch {
		case err == nil:
			tag = resolvedTag{digest: desc.Digest.String(), resolved: now}
			c.mu.Lock()
			c.tags[full] = tag
			c.mu.Unlock()
		case known:
			c.opts.Log.Warn().Err(err).Str("chart", where).Msg("cannot resolve the chart tag again; using the digest resolved before")
		default:
			return archive{}, fmt.Errorf("cannot resolve chart %s: %w", where, err)
		}
	}
	// Helm names an OCI chart's archive so; its provenance file signs that name.
	name := ref.Name + "-" + ref.Version + ".tgz"
	key := "oci-" + strings.ReplaceAll(tag.digest, ":", "-")
	if a, ok := c.cachedArchive(key, ref.Verify); ok {
		a.name, a.where = name, where
		return a, nil
	}
	defer c.lock("oci " + full)()
	if a, ok := c.cachedArchive(key, ref.Verify); ok {
		a.name, a.where = name, where
		return a, nil
	}
	pull := full
	if ref.Pinned() {
		pull = repository + "@" + ref.Digest
	}
	res, err := reg.Pull(pull, registry.PullOptWithChart(true), registry.PullOptWithProv(ref.Verify), registry.PullOptIgnoreMissingProv(true))
	if err != nil {
		return archive{}, fmt.Errorf("cannot pull chart %s: %w", where, err)
	}
	if res.Manifest != nil && res.Manifest.Digest != tag.digest {
		if ref.Pinned() {
			return archive{}, fmt.Errorf("chart %s pulled by %s came as %s; nothing was changed", where, ref.Digest, res.Manifest.Digest)
		}
		// The tag moved between resolve and pull: keep what was pulled.
		key = "oci-" + strings.ReplaceAll(res.Manifest.Digest, ":", "-")
		c.mu.Lock()
		c.tags[full] = resolvedTag{digest: res.Manifest.Digest, resolved: now}
		c.mu.Unlock()
	}
	a := archive{name: name, data: res.Chart.Data, where: where}
	if res.Prov != nil && len(res.Prov.Data) > 0 {
		a.prov = res.Prov.Data
		c.storeProv(key, a.prov)
	}
	c.store(key, res.Chart.Data)
	return a, nil
}
