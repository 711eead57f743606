package cli

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"
)

// probes are the checks behind /readyz and /healthz; nil error means pass.
type probes struct {
	ready, healthy func() error
}

// serveHTTP serves metrics and probes. Binding happens before returning so an
// address in use is a start-up error, not a silent log line.
func serveHTTP(addr string, metrics prometheus.Gatherer, p probes, log zerolog.Logger) (*http.Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("cannot listen on --http-addr %s: %w", addr, err)
	}
	log.Info().Str("addr", ln.Addr().String()).Msg("serving /metrics, /healthz and /readyz")
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(metrics, promhttp.HandlerOpts{}))
	probe := func(check func() error) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) {
			if err := check(); err != nil {
				http.Error(w, err.Error(), http.StatusServiceUnavailable)
				return
			}
			_, _ = io.WriteString(w, "ok\n")
		}
	}
	mux.HandleFunc("/healthz", probe(p.healthy))
	mux.HandleFunc("/readyz", probe(p.ready))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error().Err(err).Msg("http server stopped")
		}
	}()
	return srv, nil
}

// servePprof serves Go's runtime profiles (net/http/pprof) on addr, apart
// from --http-addr so that a profile endpoint is never exposed where metrics
// are scraped: it is off unless asked for, and meant for a loopback address
// reached with kubectl port-forward. Binding happens before returning.
func servePprof(addr string, log zerolog.Logger) (*http.Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("cannot listen on --pprof-addr %s: %w", addr, err)
	}
	log.Info().Str("addr", ln.Addr().String()).Msg("serving Go profiles under /debug/pprof/")
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	// No write timeout: a CPU profile or trace streams for its ?seconds=.
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error().Err(err).Msg("profile server stopped")
		}
	}()
	return srv, nil
}

// newRegistry returns the registry /metrics serves, with the process's own
// metrics: the API requests made (Helm's included) and the Go and process
// collectors. The components register theirs on it.
func newRegistry() (*prometheus.Registry, error) {
	reg := prometheus.NewRegistry()
	for _, c := range processCollectors() {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("cannot register metrics: %w", err)
		}
	}
	return reg, nil
}

// processCollectors are the metrics of the process as a whole, which
// newRegistry starts with.
func processCollectors() []prometheus.Collector {
	return []prometheus.Collector{apiRequestsByKind, apiWarnings, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})}
}
