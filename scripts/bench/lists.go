package main

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata"

	"github.com/autox-dev/autox/internal/pages"
)

// listResult is one page size of the lists phase: the pass's two large
// LISTs (every release record of the namespace, every trigger Deployment)
// made as autox makes them, and the API server's memory meanwhile.
type listResult struct {
	PageSize          int64
	Records, Triggers int
	// RecordsTook and TriggersTook are the medians of listRepeats LISTs.
	RecordsTook, TriggersTook time.Duration
	// ServerPeak is kube-apiserver's peak RSS during these LISTs,
	// ServerBefore its RSS just before them.
	ServerPeak, ServerBefore int64
}

const listRepeats = 5

// lists times the pass's large LISTs at each page size (0: one response),
// through client-go's pager as autox's --list-page-size does.
func (b *run) lists(ctx context.Context) error {
	mc, err := metadata.NewForConfig(b.cluster.Config)
	if err != nil {
		return err
	}
	records := mc.Resource(schema.GroupVersionResource{Version: "v1", Resource: "secrets"}).Namespace("bench")
	triggers := mc.Resource(schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}).Namespace("bench")
	for _, size := range b.o.listPages {
		note("lists: page size %d", size)
		resetServerPeak()
		res := listResult{PageSize: size, ServerBefore: serverRSS()}
		var recTimes, trigTimes []time.Duration
		for i := 0; i < listRepeats; i++ {
			t0 := time.Now()
			items, err := pages.Metadata(ctx, records, metav1.ListOptions{LabelSelector: "owner=helm"}, size)
			if err != nil {
				return fmt.Errorf("list records, page size %d: %w", size, err)
			}
			recTimes = append(recTimes, time.Since(t0))
			res.Records = len(items)
			t0 = time.Now()
			if items, err = pages.Metadata(ctx, triggers, metav1.ListOptions{}, size); err != nil {
				return fmt.Errorf("list triggers, page size %d: %w", size, err)
			}
			trigTimes = append(trigTimes, time.Since(t0))
			res.Triggers = len(items)
		}
		res.RecordsTook, res.TriggersTook = percentile(recTimes, 0.5), percentile(trigTimes, 0.5)
		res.ServerPeak = serverPeak()
		b.r.Lists = append(b.r.Lists, res)
	}
	b.r.Load["lists"] = loadAvg()
	return nil
}

// parsePages reads --list-pages: "0,500,5000".
func parsePages(s string) ([]int64, error) {
	var out []int64
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("invalid page size %q in --list-pages", f)
		}
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out, nil
}

// apiServerPID is the kube-apiserver this process started, or 0.
func apiServerPID() int {
	for _, pid := range children("kube-apiserver") {
		return pid
	}
	return 0
}

// children are the pids of this process's children named name.
func children(name string) []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		s := string(data)
		comm := s[strings.Index(s, "(")+1 : strings.LastIndex(s, ")")]
		f := strings.Fields(s[strings.LastIndex(s, ")")+2:])
		if len(f) > 1 && f[1] == strconv.Itoa(os.Getpid()) && comm == name {
			out = append(out, pid)
		}
	}
	return out
}

// statusKB reads one "Vm…:" line of /proc/PID/status, in bytes.
func statusKB(pid int, key string) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(data), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == key+":" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb * 1024
		}
	}
	return 0
}

// serverPeak is kube-apiserver's peak RSS since start or resetServerPeak.
func serverPeak() int64 { return statusKB(apiServerPID(), "VmHWM") }

// serverRSS is kube-apiserver's RSS now.
func serverRSS() int64 { return statusKB(apiServerPID(), "VmRSS") }

// resetServerPeak starts a new peak measurement of kube-apiserver.
func resetServerPeak() {
	if pid := apiServerPID(); pid > 0 {
		_ = os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0o200)
	}
}

// loadAvg is the machine's 1-minute load average now (as uptime shows it).
func loadAvg() float64 {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(data))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}
