package main

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
)

type requestKind struct{ verb, resource string }

// requestCounts are the values of autox_kube_api_requests_total.
type requestCounts map[requestKind]int64

func (c requestCounts) total() int64 {
	var n int64
	for _, v := range c {
		n += v
	}
	return n
}

func (c requestCounts) writes() int64 {
	var n int64
	for k, v := range c {
		switch k.verb {
		case "get", "list", "watch":
		default:
			n += v
		}
	}
	return n
}

func (c requestCounts) minus(o requestCounts) requestCounts {
	out := requestCounts{}
	for k, v := range c {
		if d := v - o[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

// sorted returns the kinds, most requests first.
func (c requestCounts) sorted() []requestKind {
	ks := make([]requestKind, 0, len(c))
	for k := range c {
		ks = append(ks, k)
	}
	sort.Slice(ks, func(i, j int) bool {
		if c[ks[i]] != c[ks[j]] {
			return c[ks[i]] > c[ks[j]]
		}
		return ks[i].verb+ks[i].resource < ks[j].verb+ks[j].resource
	})
	return ks
}

func (c requestCounts) String() string {
	var parts []string
	for _, k := range c.sorted() {
		parts = append(parts, fmt.Sprintf("%s %s %d", k.verb, k.resource, c[k]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// scrapeRequests reads autox_kube_api_requests_total from autox's /metrics.
func scrapeRequests(addr string) (requestCounts, error) {
	out := requestCounts{}
	err := readMetrics(addr, func(series string, value float64) {
		labels, ok := strings.CutPrefix(series, "autox_kube_api_requests_total{")
		if !ok {
			return
		}
		var k requestKind
		for _, kv := range strings.Split(strings.TrimSuffix(labels, "}"), ",") {
			name, v, _ := strings.Cut(kv, "=")
			v = strings.Trim(v, `"`)
			switch name {
			case "verb":
				k.verb = v
			case "resource":
				k.resource = v
			}
		}
		out[k] = int64(value)
	})
	return out, err
}

// scrapeMetric reads one series of autox's /metrics, written as the
// exposition format writes it (`name{label="value"}`); 0 when absent.
func scrapeMetric(addr, series string) (float64, error) {
	var v float64
	err := readMetrics(addr, func(s string, value float64) {
		if s == series {
			v = value
		}
	})
	return v, err
}

// readMetrics calls each with every sample of autox's /metrics.
func readMetrics(addr string, each func(series string, value float64)) error {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return fmt.Errorf("cannot read autox's metrics: %w", err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if strings.HasPrefix(l, "#") {
			continue
		}
		i := strings.LastIndexByte(l, ' ')
		if i < 0 {
			continue
		}
		f, err := strconv.ParseFloat(l[i+1:], 64)
		if err != nil {
			continue
		}
		each(l[:i], f)
	}
	return sc.Err()
}

// freeAddr returns a local address nothing listens on, for autox's --http-addr.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}
