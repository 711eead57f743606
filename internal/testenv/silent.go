package testenv

import (
	"context"
	"crypto/tls"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// SilentServer accepts connections and never answers, as a chart repository
// or an OCI registry does whose process hangs or whose network drops the
// return path: with a CA it completes the TLS handshake (clients then wait
// for an HTTP answer, not a handshake, which has its own timeout), then reads
// whatever it is sent and writes nothing. Close cuts every connection.
type SilentServer struct {
	// Addr is host:port; URL is https://Addr (http:// without a CA).
	Addr, URL string

	ln       net.Listener
	requests atomic.Int64
	wg       sync.WaitGroup

	mu     sync.Mutex
	conns  map[net.Conn]bool
	closed bool
}

// NewSilentServer listens on 127.0.0.1 with ca's server certificate, or
// plain TCP when ca is nil.
func NewSilentServer(ca *CA) (*SilentServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &SilentServer{Addr: ln.Addr().String(), URL: "http://" + ln.Addr().String(), ln: ln, conns: map[net.Conn]bool{}}
	if ca != nil {
		s.ln = tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{ca.ServerCert}, MinVersion: tls.VersionTLS12})
		s.URL = "https://" + s.Addr
	}
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

// Requests returns how many connections have sent something (a request)
// after the handshake.
func (s *SilentServer) Requests() int64 { return s.requests.Load() }

func (s *SilentServer) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			c.Close()
			return
		}
		s.conns[c] = true
		s.mu.Unlock()
		s.wg.Add(1)
		go s.hold(c)
	}
}

// hold reads from c (for TLS, the first read completes the handshake) and
// never writes, until the client or Close ends the connection.
func (s *SilentServer) hold(c net.Conn) {
	defer s.wg.Done()
	defer c.Close()
	buf := make([]byte, 4096)
	counted := false
	for {
		n, err := c.Read(buf)
		if n > 0 && !counted {
			counted = true
			s.requests.Add(1)
		}
		if err != nil { // the client gave up, or Close cut the connection
			s.mu.Lock()
			delete(s.conns, c)
			s.mu.Unlock()
			return
		}
	}
}

// Close stops listening, cuts every connection and waits for its goroutines.
func (s *SilentServer) Close() {
	s.mu.Lock()
	s.closed = true
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.ln.Close()
	s.wg.Wait()
}

// SilentServerFor is a SilentServer for one test, closed when it ends.
func SilentServerFor(t testing.TB, ca *CA) *SilentServer {
	t.Helper()
	s, err := NewSilentServer(ca)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// CancelOnceSent runs call with a context it cancels once s has got a request
// (after those it had already), and returns call's error. It fails t when
// call returns before its request reached s.
func (s *SilentServer) CancelOnceSent(t testing.TB, call func(context.Context) error) error {
	t.Helper()
	before := s.Requests()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- call(ctx) }()
	Eventually(t, 2*time.Minute, "the request reached the silent server", func() (bool, error) {
		select {
		case err := <-done:
			t.Fatalf("the call returned before its request reached the server: %v", err)
		default:
		}
		return s.Requests() > before, nil
	})
	cancel()
	return Receive(t, "the call returned after its context was cancelled", done)
}

// Receive waits for the error a call sends on done.
func Receive(t testing.TB, what string, done <-chan error) error {
	t.Helper()
	var err error
	Eventually(t, 2*time.Minute, what, func() (bool, error) {
		select {
		case err = <-done:
			return true, nil
		default:
			return false, nil
		}
	})
	return err
}
