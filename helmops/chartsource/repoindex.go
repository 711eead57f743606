package chartsource

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/autox-dev/autox/config"
	repo "helm.sh/helm/v4/pkg/repo/v1"
)

// The ChartCache's http(s) Helm repositories: the index (fetched, parsed,
// cached on disk, refreshed after Refresh, kept when a refresh fails), the
// credentials and TLS settings of repositories.yaml, and the chart download
// checked against the index's digest.

// cachedIndex is a repository's index and when it was fetched.
type cachedIndex struct {
	index   *repo.IndexFile
	fetched time.Time
}

func (c *ChartCache) repoChart(ctx context.Context, ref config.Chart) (archive, error) {
	repoURL := strings.TrimSuffix(ref.Repo, "/")
	entry, err := c.repoEntry(repoURL)
	if err != nil {
		return archive{}, err
	}
	cv, err := c.chartVersion(ctx, repoURL, entry, ref)
	if err != nil {
		return archive{}, err
	}
	where := fmt.Sprintf("%s %s from %s", ref.Name, ref.Version, withoutUserinfo(repoURL))
	// want is the archive's sha256: the pin, which the index (when it
	// gives one) must agree with, else the index's. The cache is read by
	// it, so a pinned chart is never served from another archive.
	want := strings.ToLower(cv.Digest)
	if ref.Pinned() {
		pin := strings.TrimPrefix(ref.Digest, "sha256:")
		if want != "" && want != pin {
			return archive{}, fmt.Errorf("chart %s: the repository index gives sha256:%s, but chart.digest pins %s: the version was re-published with other content; nothing was changed (publish a new version, or pin the new digest once you trust it)",
				where, want, ref.Digest)
		}
		want = pin
	}
	if len(cv.URLs) == 0 {
		return archive{}, fmt.Errorf("chart %s %s in repository %s has no download URL", ref.Name, ref.Version, withoutUserinfo(repoURL))
	}
	chartURL, err := resolveURL(repoURL, cv.URLs[0])
	if err != nil {
		return archive{}, fmt.Errorf("chart %s %s in repository %s has a bad URL %q: %w", ref.Name, ref.Version, withoutUserinfo(repoURL), cv.URLs[0], err)
	}
	name := path.Base(strings.SplitN(chartURL, "?", 2)[0])
	if a, ok := c.cachedArchive("sha256-"+want, ref.Verify); want != "" && ok {
		a.name, a.where = name, where
		return a, nil
	}
	unlock, err := c.lock(ctx, "chart "+repoURL+" "+ref.Name+" "+ref.Version)
	if err != nil {
		return archive{}, err
	}
	defer unlock()
	if a, ok := c.cachedArchive("sha256-"+want, ref.Verify); want != "" && ok {
		a.name, a.where = name, where // another worker fetched it meanwhile
		return a, nil
	}
	// Credentials go to the repository's own host only, unless the entry
	// says otherwise (Helm's pass_credentials_all).
	sendAuth := entry.PassCredentialsAll || sameHost(repoURL, chartURL)
	data, err := c.get(ctx, chartURL, entry, sendAuth)
	if err != nil {
		return archive{}, fmt.Errorf("cannot download chart %s %s: %w", ref.Name, ref.Version, err)
	}
	a := archive{name: name, data: data, where: where}
	if ref.Pinned() {
		if err := checkPin(ref, a); err != nil {
			return archive{}, err
		}
	} else if got := strings.TrimPrefix(sha256Digest(data), "sha256:"); want != "" && want != got {
		return archive{}, fmt.Errorf("chart %s %s from %s: digest mismatch: the index says sha256:%s, the download is sha256:%s; the repository is inconsistent or the download was tampered with",
			ref.Name, ref.Version, withoutUserinfo(chartURL), want, got)
	}
	key := "sha256-" + strings.TrimPrefix(sha256Digest(data), "sha256:")
	if ref.Verify {
		// The provenance file is fetched as Helm's --verify does: the
		// chart's URL and ".prov"; a missing one fails verify.
		prov, err := c.get(ctx, chartURL+".prov", entry, sendAuth)
		if err != nil && !errors.Is(err, errNotFound) {
			return archive{}, fmt.Errorf("cannot download the provenance file of chart %s %s: %w", ref.Name, ref.Version, err)
		}
		if prov != nil {
			a.prov = prov
			c.storeProv(key, prov)
		}
	}
	c.store(key, data)
	return a, nil
}

// chartVersion finds the exact version in the repository index, fetching the
// index when the cached one is older than Refresh. A failed refresh falls back
// to the older index: versions are immutable, and a repository outage must not
// stop releases whose chart is already known.
func (c *ChartCache) chartVersion(ctx context.Context, repoURL string, entry *repo.Entry, ref config.Chart) (*repo.ChartVersion, error) {
	idx, err := c.index(ctx, repoURL, entry)
	if err != nil {
		return nil, err
	}
	for _, cv := range idx.Entries[ref.Name] {
		if cv.Version == ref.Version {
			return cv, nil
		}
	}
	if _, ok := idx.Entries[ref.Name]; !ok {
		return nil, fmt.Errorf("chart %s not found in repository %s", ref.Name, withoutUserinfo(repoURL))
	}
	return nil, fmt.Errorf("chart %s has no version %s in repository %s", ref.Name, ref.Version, withoutUserinfo(repoURL))
}

func (c *ChartCache) index(ctx context.Context, repoURL string, entry *repo.Entry) (*repo.IndexFile, error) {
	now := c.opts.Now()
	c.mu.Lock()
	ci := c.indexes[repoURL]
	c.mu.Unlock()
	if ci != nil && now.Sub(ci.fetched) < c.opts.Refresh {
		return ci.index, nil
	}
	unlock, err := c.lock(ctx, "index "+repoURL)
	if err != nil {
		return nil, err
	}
	defer unlock()
	c.mu.Lock()
	ci = c.indexes[repoURL]
	c.mu.Unlock()
	if ci != nil && now.Sub(ci.fetched) < c.opts.Refresh {
		return ci.index, nil
	}

	// An index on disk from an earlier run counts as fetched at its mtime,
	// so a restart does not refetch every repository at once.
	path := filepath.Join(c.opts.Dir, "indexes", cacheName(repoURL)+".yaml")
	if ci == nil {
		if st, err := os.Stat(path); err == nil && now.Sub(st.ModTime()) < c.opts.Refresh {
			if idx, err := repo.LoadIndexFile(path); err == nil {
				c.remember(repoURL, idx, st.ModTime())
				return idx, nil
			}
		}
	}
	idx, err := c.fetchIndex(ctx, repoURL, entry, path)
	if err != nil {
		if ci != nil {
			c.opts.Log.Warn().Err(err).Str("repo", withoutUserinfo(repoURL)).Msg("cannot refresh the repository index; using the one fetched before")
			return ci.index, nil
		}
		if idx, lerr := repo.LoadIndexFile(path); lerr == nil {
			c.opts.Log.Warn().Err(err).Str("repo", withoutUserinfo(repoURL)).Msg("cannot fetch the repository index; using the one cached on disk")
			c.remember(repoURL, idx, now.Add(-c.opts.Refresh+time.Minute))
			return idx, nil
		}
		return nil, err
	}
	c.remember(repoURL, idx, now)
	return idx, nil
}

func (c *ChartCache) remember(repoURL string, idx *repo.IndexFile, at time.Time) {
	c.mu.Lock()
	c.indexes[repoURL] = &cachedIndex{index: idx, fetched: at}
	c.mu.Unlock()
}

func (c *ChartCache) fetchIndex(ctx context.Context, repoURL string, entry *repo.Entry, path string) (*repo.IndexFile, error) {
	data, err := c.get(ctx, repoURL+"/index.yaml", entry, true)
	if err != nil {
		return nil, fmt.Errorf("cannot fetch the index of repository %s: %w", withoutUserinfo(repoURL), err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return nil, fmt.Errorf("cannot cache the index of %s: %w", withoutUserinfo(repoURL), err)
	}
	idx, err := repo.LoadIndexFile(tmp)
	if err != nil {
		_ = os.Remove(tmp)
		return nil, fmt.Errorf("the index of repository %s is not valid: %w", withoutUserinfo(repoURL), err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return nil, fmt.Errorf("cannot cache the index of %s: %w", withoutUserinfo(repoURL), err)
	}
	c.opts.Log.Debug().Str("repo", withoutUserinfo(repoURL)).Msg("repository index fetched")
	return idx, nil
}

// repoEntry returns the repositories.yaml entry for repoURL, or an empty one.
func (c *ChartCache) repoEntry(repoURL string) (*repo.Entry, error) {
	if c.opts.RepositoryConfig == "" {
		return &repo.Entry{URL: repoURL}, nil
	}
	f, err := repo.LoadFile(c.opts.RepositoryConfig)
	if err != nil {
		return nil, fmt.Errorf("cannot read --repository-config %s: %w", c.opts.RepositoryConfig, err)
	}
	for _, e := range f.Repositories {
		if strings.TrimSuffix(e.URL, "/") == repoURL {
			return e, nil
		}
	}
	return &repo.Entry{URL: repoURL}, nil
}

// get fetches u with the entry's TLS settings and, if sendAuth, its credentials.
// errNotFound is a GET answered 404 (a provenance file the repository does not have).
var errNotFound = errors.New("not found")

func (c *ChartCache) get(ctx context.Context, u string, entry *repo.Entry, sendAuth bool) ([]byte, error) {
	client, err := httpClient(entry)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	if sendAuth && entry.Username != "" {
		req.SetBasicAuth(entry.Username, entry.Password)
	}
	req.Header.Set("User-Agent", "autox")
	resp, err := client.Do(req)
	if err != nil {
		// url.Error repeats the URL; make sure it carries no credentials.
		var ue *url.Error
		if errors.As(err, &ue) {
			ue.URL = withoutUserinfo(ue.URL)
		}
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		reason := resp.Status
		if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
			reason += " (check the credentials for this URL in --repository-config)"
		}
		err := fmt.Errorf("GET %s: %s", withoutUserinfo(u), reason)
		if resp.StatusCode == http.StatusNotFound {
			err = fmt.Errorf("%w: %w", errNotFound, err)
		}
		return nil, err
	}
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", withoutUserinfo(u), err)
	}
	return data, nil
}

// httpClient builds a client for one repository entry. TLS verification is on
// unless the entry turns it off; the system trust store (which honours
// SSL_CERT_FILE) is extended by the entry's caFile.
func httpClient(entry *repo.Entry) (*http.Client, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tlsCfg := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: entry.InsecureSkipTLSVerify} //nolint:gosec // the user's explicit choice
	if entry.CAFile != "" {
		pool, err := x509.SystemCertPool()
		if err != nil || pool == nil {
			pool = x509.NewCertPool()
		}
		pem, err := os.ReadFile(entry.CAFile)
		if err != nil {
			return nil, fmt.Errorf("cannot read caFile of repository %s: %w", withoutUserinfo(entry.URL), err)
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("caFile %s of repository %s holds no PEM certificate", entry.CAFile, withoutUserinfo(entry.URL))
		}
		tlsCfg.RootCAs = pool
	}
	if entry.CertFile != "" || entry.KeyFile != "" {
		cert, err := tls.LoadX509KeyPair(entry.CertFile, entry.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("cannot load certFile/keyFile of repository %s: %w", withoutUserinfo(entry.URL), err)
		}
		tlsCfg.Certificates = []tls.Certificate{cert}
	}
	tr.TLSClientConfig = tlsCfg
	return &http.Client{Transport: tr}, nil
}

func cacheName(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:12])
}

func resolveURL(base, ref string) (string, error) {
	b, err := url.Parse(base + "/")
	if err != nil {
		return "", err
	}
	r, err := url.Parse(ref)
	if err != nil {
		return "", err
	}
	return b.ResolveReference(r).String(), nil
}

func sameHost(a, b string) bool {
	ua, err1 := url.Parse(a)
	ub, err2 := url.Parse(b)
	return err1 == nil && err2 == nil && ua.Host == ub.Host
}

// withoutUserinfo removes user and password from a URL for errors and logs.
func withoutUserinfo(u string) string {
	p, err := url.Parse(u)
	if err != nil || p.User == nil {
		return u
	}
	p.User = nil
	return p.String()
}
