package testenv

import (
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// echoServer echoes every connection's bytes back until the test ends.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	conns := map[net.Conn]bool{}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns[c] = true
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _ = io.Copy(c, c)
				c.Close()
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

// TestPauseAndFailWithCutEveryConnection pauses the proxy, or makes it fail
// requests, while clients redial the moment their connection is cut, as an
// HTTP/2 client with requests in flight does: once Pause or FailWith has
// returned, no round trip may reach the server behind the proxy until Resume
// or FailWith(0). A connection accepted while Pause ran used to survive it,
// and autox reached the API server through the whole "outage" of
// TestAPIServerOutage, which waited in vain for the lost Lease.
func TestPauseAndFailWithCutEveryConnection(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t) }) // runs last: after the servers have stopped
	p, err := newProxy(echoServer(t), t.TempDir(), http.NotFoundHandler())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()

	const clients, rounds = 16, 20
	var (
		// window is odd from the return of Pause or FailWith until the
		// test checks and undoes it.
		window    atomic.Int64
		violation atomic.Int64 // round trips made within one odd window that reached the echo server
		echoed    atomic.Int64
		stop      = make(chan struct{})
		wg        sync.WaitGroup
	)
	for i := 0; i < clients; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 1)
			for {
				select {
				case <-stop:
					return
				default:
				}
				c, err := net.Dial("tcp", p.Addr)
				if err != nil {
					time.Sleep(time.Millisecond) // refused: paused
					continue
				}
				for {
					w := window.Load()
					// Failing, the proxy ends TLS itself: a byte that is
					// no handshake gets no answer.
					_ = c.SetDeadline(time.Now().Add(time.Second))
					if _, err := c.Write([]byte{'x'}); err != nil {
						break
					}
					if _, err := io.ReadFull(c, buf); err != nil {
						break
					}
					echoed.Add(1)
					if w%2 == 1 && window.Load() == w {
						violation.Add(1)
					}
					select {
					case <-stop:
						c.Close()
						return
					default:
					}
				}
				c.Close() // at once: redial as the connection is cut
			}
		}()
	}
	for r := 0; r < rounds; r++ {
		before := echoed.Load()
		Eventually(t, patience, "round trips through the proxy", func() (bool, error) {
			return echoed.Load() > before+clients, nil
		})
		what := "Pause"
		if r%2 == 0 {
			p.Pause()
		} else {
			what = "FailWith(503)"
			p.FailWith(http.StatusServiceUnavailable)
		}
		window.Add(1)
		time.Sleep(20 * time.Millisecond) // the clients redial and try meanwhile
		if n := violation.Load(); n > 0 {
			close(stop)
			wg.Wait()
			t.Fatalf("round %d: %d round trips reached the server after %s returned", r, n, what)
		}
		window.Add(1)
		if r%2 == 0 {
			if err := p.Resume(); err != nil {
				t.Fatal(err)
			}
		} else {
			p.FailWith(0)
		}
	}
	close(stop)
	wg.Wait()
}
