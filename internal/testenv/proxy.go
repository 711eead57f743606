package testenv

import (
	"errors"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"k8s.io/client-go/tools/clientcmd"
)

// Proxy forwards TCP connections to the API server. Pausing it closes the
// listener and every open connection, so that clients see the API server as
// unreachable (connection refused) until Resume listens again on the same
// address. TLS passes through untouched.
type Proxy struct {
	target string
	Addr   string

	mu     sync.Mutex
	ln     net.Listener
	conns  map[net.Conn]bool
	wg     sync.WaitGroup
	closed bool
}

// NewProxy starts a proxy to the cluster's API server.
func (c *Cluster) NewProxy() (*Proxy, error) {
	u, err := url.Parse(c.Config.Host)
	if err != nil {
		return nil, err
	}
	p := &Proxy{target: u.Host, conns: map[net.Conn]bool{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p.Addr = ln.Addr().String()
	p.serve(ln)
	return p, nil
}

// Kubeconfig writes a copy of the cluster's kubeconfig that goes through the
// proxy and returns its path.
func (c *Cluster) ProxyKubeconfig(p *Proxy) (string, error) {
	cfg, err := clientcmd.LoadFromFile(c.Kubeconfig)
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
			out, err := net.Dial("tcp", p.target)
			if err != nil {
				in.Close()
				continue
			}
			p.mu.Lock()
			p.conns[in], p.conns[out] = true, true
			p.mu.Unlock()
			p.wg.Add(2)
			pipe := func(dst, src net.Conn) {
				defer p.wg.Done()
				_, _ = io.Copy(dst, src)
				dst.Close()
				src.Close()
				p.mu.Lock()
				delete(p.conns, dst)
				delete(p.conns, src)
				p.mu.Unlock()
			}
			go pipe(in, out)
			go pipe(out, in)
		}
	}()
}

// Pause makes the API server unreachable through the proxy.
func (p *Proxy) Pause() {
	p.mu.Lock()
	ln := p.ln
	p.ln = nil
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	if ln != nil {
		ln.Close()
	}
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
}
