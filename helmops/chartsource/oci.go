package chartsource

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	"helm.sh/helm/v4/pkg/registry"

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

// registry returns a registry client whose every request is bound to ctx:
// Helm's registry client takes no context, and would wait up to the
// download timeout for a registry that accepts connections and never
// answers, whatever the caller's context. The connections are shared.
// plainHTTP speaks HTTP without TLS to the registry (chart.plainHTTP).
func (c *ChartCache) registry(ctx context.Context, plainHTTP bool) (*registry.Client, error) {
	c.regOnce.Do(func() {
		// The default transport uses the system trust store, SSL_CERT_FILE included.
		c.regTransport = http.DefaultTransport.(*http.Transport).Clone()
	})
	creds := c.opts.RegistryConfig
	if creds == "" {
		// No credentials: a file that does not exist, rather than the
		// current user's docker or Helm login.
		creds = filepath.Join(c.opts.Dir, "no-registry-credentials.json")
	}
	opts := []registry.ClientOption{
		registry.ClientOptWriter(io.Discard),
		registry.ClientOptHTTPClient(&http.Client{Transport: boundTransport{ctx: ctx, next: c.regTransport}, Timeout: c.opts.Timeout}),
		registry.ClientOptCredentialsFile(creds),
	}
	if plainHTTP {
		opts = append(opts, registry.ClientOptPlainHTTP())
	}
	reg, err := registry.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("cannot create the OCI registry client: %w", err)
	}
	return reg, nil
}

// boundTransport cancels each request, and the reading of its answer, when
// ctx ends, besides the request's own context.
type boundTransport struct {
	ctx  context.Context
	next http.RoundTripper
}

func (b boundTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancelCause(req.Context())
	stop := context.AfterFunc(b.ctx, func() { cancel(context.Cause(b.ctx)) })
	release := func() {
		stop()
		cancel(nil)
	}
	resp, err := b.next.RoundTrip(req.WithContext(ctx))
	if err != nil {
		release()
		return nil, err
	}
	resp.Body = &releaseOnClose{ReadCloser: resp.Body, release: release}
	return resp, nil
}

type releaseOnClose struct {
	io.ReadCloser
	release func()
}

func (r *releaseOnClose) Close() error {
	err := r.ReadCloser.Close()
	r.release()
	return err
}

// ociChart pulls an oci:// chart, by the digest its tag resolves to. A
// pinned chart's tag is resolved at every load and must still name the
// pin, and it is pulled by the pin: a re-pushed tag is an error, never
// another chart.
func (c *ChartCache) ociChart(ctx context.Context, ref config.Chart) (archive, error) {
	reg, err := c.registry(ctx, ref.PlainHTTP)
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
			return archive{}, fmt.Errorf("cannot resolve chart %s, pinned to %s: %w", where, ref.Digest, schemeHint(err, ref.PlainHTTP))
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
			return archive{}, fmt.Errorf("cannot resolve chart %s: %w", where, schemeHint(err, ref.PlainHTTP))
		}
	}
	// Helm names an OCI chart's archive so; its provenance file signs that name.
	name := ref.Name + "-" + ref.Version + ".tgz"
	key := "oci-" + strings.ReplaceAll(tag.digest, ":", "-")
	if a, ok := c.cachedArchive(key, ref.Verify); ok {
		a.name, a.where = name, where
		return a, nil
	}
	unlock, err := c.lock(ctx, "oci "+full)
	if err != nil {
		return archive{}, err
	}
	defer unlock()
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
		return archive{}, fmt.Errorf("cannot pull chart %s: %w", where, schemeHint(err, ref.PlainHTTP))
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
	if res.Manifest != nil {
		c.storeManifest(key, res.Manifest.Data)
	}
	c.store(key, res.Chart.Data)
	return a, nil
}

// schemeHint names chart.plainHTTP in the error of a registry that speaks
// another scheme than autox asked it with: plain HTTP answering a TLS
// handshake (Go's "server gave HTTP response to HTTPS client"), or, maybe,
// an HTTPS server answering plain HTTP.
func schemeHint(err error, plainHTTP bool) error {
	msg := err.Error()
	switch {
	case !plainHTTP && strings.Contains(msg, "server gave HTTP response to HTTPS client"):
		return fmt.Errorf("the registry answers plain HTTP, not HTTPS: for a registry without TLS (in the cluster) set chart.plainHTTP: true: %w", err)
	case plainHTTP && strings.Contains(strings.ToLower(msg), "client sent an http request to an https server"):
		return fmt.Errorf("the registry speaks HTTPS, and chart.plainHTTP asks for plain HTTP: remove plainHTTP: %w", err)
	case plainHTTP && strings.Contains(msg, "400"):
		// Go's HTTPS servers answer a plain HTTP request so, and a HEAD
		// carries no body that would say why.
		return fmt.Errorf("%w (with chart.plainHTTP: a registry that speaks HTTPS answers plain HTTP with 400 Bad Request: remove plainHTTP if it has TLS)", err)
	}
	return err
}
