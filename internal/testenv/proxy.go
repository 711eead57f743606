package testenv

import (
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Proxy stands between clients and the API server, and can make the API
// server unreachable or failing, or hold some requests.
//
// Normally it forwards TCP connections; TLS passes through untouched.
// Pausing it closes the listener and every open connection, so that clients
// see the API server as unreachable (connection refused) until Resume
// listens again on the same address. FailWith makes it answer every request
// itself with an HTTP error, as an API server that is up but failing (etcd
// gone, overloaded) does: it then ends TLS itself, with a certificate of its
// own CA, which ProxyKubeconfig trusts besides the API server's.
type Proxy struct {
	target string
	Addr   string

	ca         *CA
	failStatus atomic.Int32 // 0: forward
	failed     atomic.Int64
	// failOnly, when set, limits the failures to the requests it matches;
	// the others are forwarded by forward, with the cluster's credentials.
	failOnly atomic.Pointer[func(*http.Request) bool]
	// plain, when set, is the text/plain body failures get instead of a
	// Status: what a gateway or ingress in front of the API server sends.
	plain atomic.Pointer[string]
	// hold, when set, holds the requests it matches (HoldMatching).
	hold atomic.Pointer[Hold]
	// detach, when set, forwards the requests it matches without their
	// client's cancellation (DetachMatching).
	detach     atomic.Pointer[Detached]
	forward    http.Handler
	failing    *connListener
	failServer *http.Server
	failDone   chan struct{}

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]bool
	// cuts counts closeConns calls: a connection accepted before a cut is
	// closed when it is tracked after it (see track).
	cuts   int
	wg     sync.WaitGroup
	closed bool
}

// NewProxy starts a proxy to the cluster's API server.
func (c *Cluster) NewProxy() (*Proxy, error) {
	u, err := url.Parse(c.Config.Host)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(c.dir, "proxy-")
	if err != nil {
		return nil, err
	}
	transport, err := rest.TransportFor(c.Config)
	if err != nil {
		return nil, err
	}
	// FlushInterval -1: watches stream through as the API server writes them.
	forward := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(u) }, Transport: transport, FlushInterval: -1,
		ErrorLog: log.New(io.Discard, "", 0)}
	return newProxy(u.Host, dir, forward)
}

// newProxy starts a proxy to target (host:port), keeping its CA in dir;
// forward sends on the requests it ends TLS for but does not fail or hold.
func newProxy(target, dir string, forward http.Handler) (*Proxy, error) {
	ca, err := NewCA(dir)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{target: target, Addr: ln.Addr().String(), ca: ca, conns: map[net.Conn]bool{}, failDone: make(chan struct{}), forward: forward}
	p.failing = &connListener{conns: make(chan net.Conn), closed: make(chan struct{}), addr: ln.Addr()}
	p.failServer = &http.Server{
		Handler:   http.HandlerFunc(p.fail),
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{ca.ServerCert}, MinVersion: tls.VersionTLS12},
		// Cut connections make TLS handshake errors; they are expected.
		ErrorLog: log.New(io.Discard, "", 0),
	}
	go func() {
		defer close(p.failDone)
		_ = p.failServer.ServeTLS(p.failing, "", "")
	}()
	p.serve(ln)
	return p, nil
}

// ProxyKubeconfig writes a copy of the cluster's kubeconfig that goes
// through the proxy, trusting the proxy's CA too, and returns its path.
func (c *Cluster) ProxyKubeconfig(p *Proxy) (string, error) {
	cfg, err := clientcmd.LoadFromFile(c.Kubeconfig)
	if err != nil {
		return "", err
	}
	proxyCA, err := os.ReadFile(p.ca.File)
	if err != nil {
		return "", err
	}
	for _, cl := range cfg.Clusters {
		u, err := url.Parse(cl.Server)
		if err != nil {
			return "", err
		}
		u.Host = p.Addr
		cl.Server = u.String()
		if cl.CertificateAuthority != "" {
			if cl.CertificateAuthorityData, err = os.ReadFile(cl.CertificateAuthority); err != nil {
				return "", err
			}
			cl.CertificateAuthority = ""
		}
		cl.CertificateAuthorityData = append(append(cl.CertificateAuthorityData, '\n'), proxyCA...)
	}
	path := filepath.Join(c.dir, "kubeconfig-proxy-"+strings.ReplaceAll(p.Addr, ":", "-"))
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return "", err
	}
	return path, os.Chmod(path, 0o600)
}

func (p *Proxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			cuts := p.cutsSoFar() // before the behaviour is read: a change cuts after it is stored
			if p.intercepting() {
				if p.track(ln, cuts, in) {
					p.failing.hand(in)
				}
				continue
			}
			out, err := net.Dial("tcp", p.target)
			if err != nil {
				in.Close()
				continue
			}
			if !p.track(ln, cuts, in, out) {
				continue
			}
			p.wg.Add(2)
			pipe := func(dst, src net.Conn) {
				defer p.wg.Done()
				_, _ = io.Copy(dst, src)
				dst.Close()
				src.Close()
				p.forget(dst, src)
			}
			go pipe(in, out)
			go pipe(out, in)
		}
	}()
}

func (p *Proxy) cutsSoFar() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cuts
}

// track records the connections accepted on ln, when the proxy had cut
// connections cuts times, so that a pause or a change of behaviour can cut
// them. If ln has been paused or connections cut since, it closes them
// instead and returns false: a client that redials the moment its
// connection is cut can be accepted while Pause or FailWith runs, and that
// connection must not outlive the change (it would reach the API server
// throughout the "outage", or never see the failures).
func (p *Proxy) track(ln net.Listener, cuts int, conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != ln || p.cuts != cuts {
		for _, c := range conns {
			c.Close()
		}
		return false
	}
	for _, c := range conns {
		p.conns[c] = true
	}
	return true
}

func (p *Proxy) forget(conns ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range conns {
		delete(p.conns, c)
	}
}

// closeConns cuts every open connection, forwarded or failing.
func (p *Proxy) closeConns() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cuts++
	for c := range p.conns {
		c.Close()
		delete(p.conns, c)
	}
}

// intercepting reports whether the proxy ends TLS itself, to fail or hold
// requests, rather than passing connections through.
func (p *Proxy) intercepting() bool {
	return p.failStatus.Load() != 0 || p.hold.Load() != nil || p.detach.Load() != nil
}

// FailWith makes the proxy answer every request with HTTP status (503, 500)
// and a Status body, as the API server does when it fails; 0 forwards
// requests again. Either way open connections are cut, so that clients
// reconnect and meet the new behaviour at once. It ends HoldMatching and
// DetachMatching too.
func (p *Proxy) FailWith(status int) {
	p.hold.Store(nil)
	p.detach.Store(nil)
	p.failOnly.Store(nil)
	p.plain.Store(nil)
	p.failStatus.Store(int32(status))
	p.closeConns()
}

// FailMatching is FailWith for the requests match selects only: the
// others go on to the API server, sent by the proxy with the cluster's own
// (admin) credentials, since it ends TLS itself. FailWith(0) ends it.
func (p *Proxy) FailMatching(status int, match func(*http.Request) bool) {
	p.failOnly.Store(&match)
	p.plain.Store(nil)
	p.failStatus.Store(int32(status))
	p.closeConns()
}

// AnswerPlain is FailMatching with a text/plain body instead of a Status,
// as a proxy, gateway or ingress answers ("404 page not found"): no
// Kubernetes Status, only an HTTP status and a line of text. FailWith(0)
// ends it.
func (p *Proxy) AnswerPlain(status int, body string, match func(*http.Request) bool) {
	p.failOnly.Store(&match)
	p.plain.Store(&body)
	p.failStatus.Store(int32(status))
	p.closeConns()
}

// Failed returns how many requests the proxy has answered with an error.
func (p *Proxy) Failed() int64 { return p.failed.Load() }

func (p *Proxy) fail(w http.ResponseWriter, r *http.Request) {
	if d := p.detach.Load(); d != nil && d.match(r) {
		d.serve(w, r, p.forward)
		return
	}
	if h := p.hold.Load(); h != nil && h.match(r) {
		h.serve(w, r, p.forward)
		return
	}
	if p.failStatus.Load() == 0 && (p.hold.Load() != nil || p.detach.Load() != nil) { // holding or detaching only
		p.forward.ServeHTTP(w, r)
		return
	}
	if only := p.failOnly.Load(); only != nil && !(*only)(r) {
		p.forward.ServeHTTP(w, r)
		return
	}
	p.failed.Add(1)
	code := int(p.failStatus.Load())
	if code == 0 {
		code = http.StatusServiceUnavailable // the proxy forwards again: this client reconnects next time
	}
	if plain := p.plain.Load(); plain != nil {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(code)
		_, _ = io.WriteString(w, *plain)
		return
	}
	reason := metav1.StatusReasonInternalError
	if code == http.StatusServiceUnavailable {
		reason = metav1.StatusReasonServiceUnavailable
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure, Code: int32(code), Reason: reason,
		Message: "the test proxy fails every request",
	})
}

// Pause makes the API server unreachable through the proxy: once it
// returns, no connection through the proxy is open and none can be made.
// The listener goes first, so that clients redialing as their connections
// are cut are refused; a connection it accepted just before is closed by
// closeConns or, not yet tracked, by track.
func (p *Proxy) Pause() {
	p.mu.Lock()
	ln := p.ln
	p.ln = nil
	p.mu.Unlock()
	if ln != nil {
		ln.Close()
	}
	p.closeConns()
}

// Resume listens again on the same address.
func (p *Proxy) Resume() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return errors.New("proxy closed")
	}
	p.mu.Unlock()
	ln, err := net.Listen("tcp", p.Addr)
	if err != nil {
		return err
	}
	p.serve(ln)
	return nil
}

// Close stops the proxy and waits for its goroutines.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.Pause()
	p.wg.Wait()
	_ = p.failServer.Close()
	<-p.failDone
}

// connListener hands the proxy's accepted connections to the server that
// fails them.
type connListener struct {
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
	addr   net.Addr
}

func (l *connListener) hand(c net.Conn) {
	select {
	case l.conns <- c:
	case <-l.closed:
		c.Close()
	}
}

func (l *connListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *connListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

func (l *connListener) Addr() net.Addr { return l.addr }
