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

func (c *ChartCache) ociChart(_ context.Context, ref config.Chart) ([]byte, error) {
	reg, err := c.registry()
	if err != nil {
		return nil, err
	}
	full := strings.TrimSuffix(strings.TrimPrefix(ref.Repo, "oci://"), "/") + "/" + ref.Name + ":" + strings.ReplaceAll(ref.Version, "+", "_")
	now := c.opts.Now()

	c.mu.Lock()
	tag, known := c.tags[full]
	c.mu.Unlock()
	if !known || now.Sub(tag.resolved) >= c.opts.Refresh {
		desc, err := reg.Resolve(full)
		switch {
		case err == nil:
			tag = resolvedTag{digest: desc.Digest.String(), resolved: now}
			c.mu.Lock()
			c.tags[full] = tag
			c.mu.Unlock()
		case known:
			c.opts.Log.Warn().Err(err).Str("chart", "oci://"+full).Msg("cannot resolve the chart tag again; using the digest resolved before")
		default:
			return nil, fmt.Errorf("cannot resolve chart oci://%s: %w", full, err)
		}
	}
	key := "oci-" + strings.ReplaceAll(tag.digest, ":", "-")
	if data, ok := c.cached(key); ok {
		return data, nil
	}
	defer c.lock("oci " + full)()
	if data, ok := c.cached(key); ok {
		return data, nil
	}
	res, err := reg.Pull(full, registry.PullOptWithChart(true), registry.PullOptIgnoreMissingProv(true))
	if err != nil {
		return nil, fmt.Errorf("cannot pull chart oci://%s: %w", full, err)
	}
	if res.Manifest != nil && res.Manifest.Digest != tag.digest {
		// The tag moved between resolve and pull: keep what was pulled.
		key = "oci-" + strings.ReplaceAll(res.Manifest.Digest, ":", "-")
		c.mu.Lock()
		c.tags[full] = resolvedTag{digest: res.Manifest.Digest, resolved: now}
		c.mu.Unlock()
	}
	c.store(key, res.Chart.Data)
	return res.Chart.Data, nil
}
