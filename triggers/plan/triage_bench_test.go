package plan

import (
	"fmt"
	"testing"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/internal/format"
)

// fleetLabels are the labels of every trigger of syncedFleet.
var fleetLabels = map[string]string{"app": "bench", "app.kubernetes.io/version": "1.0.0"}

// syncedFleet is the bench's fleet (scripts/bench: named specs t0000… × 2
// release specs r0 and r1 of a local chart, values {index: N}, the version
// label injected) as a pass finds it converged: every release deployed and
// in sync.
func syncedFleet(tb testing.TB, n int) Survey {
	tb.Helper()
	cfg := &config.Config{Specs: map[string]*config.Spec{}}
	s := Survey{Config: cfg, Listed: map[string]Listing{}, Charts: map[string]map[string]ChartID{}}
	read := TriggerRead{Found: true, Labels: fleetLabels}
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("t%04d", i)
		spec := &config.Spec{
			Trigger: config.Trigger{Group: "apps", Version: "v1", Resource: "deployments", Name: name, Namespace: "bench",
				Labels: []string{"app.kubernetes.io/version"}},
			ReleaseSpecs: map[string]*config.ReleaseSpec{},
		}
		s.Charts[name] = map[string]ChartID{}
		for j := 0; j < 2; j++ {
			id := fmt.Sprintf("r%d", j)
			rs := &config.ReleaseSpec{Chart: config.Chart{Path: "/charts/one"}, ReleaseName: name + "-" + id, Namespace: "bench",
				OnChange: config.OnChangeUpgrade, Values: map[string]interface{}{"index": float64(j)}}
			spec.ReleaseSpecs[id] = rs
			s.Charts[name][id] = ChartID{"one", "0.1.0"}
			s.Records = append(s.Records, format.Record{Name: rs.ReleaseName, Namespace: "bench", Spec: name, ReleaseSpec: id, Instance: "autox",
				Revision: 1, Status: "deployed", Digest: digestOf(tb, rs, spec.Trigger, read.Labels), AutoxRevision: 1})
		}
		cfg.Specs[name] = spec
		s.Listed[name] = Listing{OK: true, Objects: map[format.Object]TriggerRead{{Namespace: "bench", Name: name}: read}}
	}
	s.Claims = NewClaimIndex(cfg)
	if v := Triage(s); len(v.Keys) != 0 {
		tb.Fatalf("the fleet is not in sync: %d keys queued, e.g. %v", len(v.Keys), v.Keys[:1])
	}
	return s
}

// digestOf is the digest autox labels rs's release with, chart one 0.1.0.
func digestOf(tb testing.TB, rs *config.ReleaseSpec, t config.Trigger, labels map[string]string) string {
	tb.Helper()
	d, err := format.Digest("one", "0.1.0", DesiredValues(rs, t, labels))
	if err != nil {
		tb.Fatal(err)
	}
	return d
}

// BenchmarkTriage10000 is a periodic pass's decision over 10,000 specs
// (20,000 releases), every release in sync: what a quiet pass costs besides
// its reads. computed: every digest of desired values made again (the
// first pass after a start or a config change); remembered: by the passes
// of a controller (Digests), which made them at the pass before.
func BenchmarkTriage10000(b *testing.B) {
	s := syncedFleet(b, 10000)
	b.Run("computed", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			Triage(s)
		}
	})
	b.Run("remembered", func(b *testing.B) {
		s := s
		s.Digests = NewDigests()
		Triage(s)
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			Triage(s)
		}
	})
}
