package plan

import (
	"testing"

	"github.com/autox-dev/autox/internal/format"
)

// TestStepsRunAs: each step names the account its Helm operation runs as
// and whether its chart is pinned or verified. A release spec's account
// wins over its spec's, which wins over --default-service-account; a
// release whose release spec left the config is removed as its spec's
// account, one whose spec left the config as the default account, else
// autox's own identity ("").
func TestStepsRunAs(t *testing.T) {
	gone := func(id string) *format.Release { return deployed(id) }
	cases := []struct {
		name string
		mut  func(o *Observation)
		// want maps a step's release to its account.
		want map[string]string
	}{
		{"nothing set: autox", nil, map[string]string{"web-a": "", "web-b": ""}},
		{"the default", func(o *Observation) { o.DefaultServiceAccount = "lockdown" },
			map[string]string{"web-a": "lockdown", "web-b": "lockdown"}},
		{"the spec's over the default", func(o *Observation) {
			o.DefaultServiceAccount, o.Config.ServiceAccountName = "lockdown", "team"
		}, map[string]string{"web-a": "team", "web-b": "team"}},
		{"the release spec's over the spec's", func(o *Observation) {
			o.Config.ServiceAccountName = "team"
			o.Config.ReleaseSpecs["a"].ServiceAccountName = "runner"
		}, map[string]string{"web-a": "runner", "web-b": "team"}},
		{"a removed release spec goes as the spec's account", func(o *Observation) {
			o.DefaultServiceAccount, o.Config.ServiceAccountName = "lockdown", "team"
			o.Current = []*format.Release{gone("b")}
			delete(o.Config.ReleaseSpecs, "b")
			delete(o.ReleaseSpecs, "b")
		}, map[string]string{"web-a": "team", "web-b": "team"}},
		{"a removed spec goes as the default account", func(o *Observation) {
			o.DefaultServiceAccount = "lockdown"
			o.Current = []*format.Release{gone("a"), gone("b")}
			o.Config = nil
		}, map[string]string{"web-a": "lockdown", "web-b": "lockdown"}},
		{"a removed spec without a default goes as autox", func(o *Observation) {
			o.Current = []*format.Release{gone("a")}
			o.Config = nil
		}, map[string]string{"web-a": ""}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := Decide(observation(tc.mut))
			if len(p.Failed) > 0 {
				t.Fatalf("failed: %+v", p.Failed)
			}
			got := map[string]string{}
			for _, s := range p.Steps {
				got[s.Release] = s.ServiceAccount
			}
			if len(got) != len(tc.want) {
				t.Fatalf("steps %+v, want releases %v", p.Steps, tc.want)
			}
			for rel, sa := range tc.want {
				if got[rel] != sa {
					t.Errorf("%s runs as %q, want %q", rel, got[rel], sa)
				}
			}
		})
	}

	p := Decide(observation(func(o *Observation) {
		o.Config.ReleaseSpecs["a"].Chart.Digest = "sha256:0123"
		o.Config.ReleaseSpecs["b"].Chart.Verify = true
		o.Config.ReleaseSpecs["b"].Chart.PlainHTTP = true
	}))
	for _, s := range p.Steps {
		if pinned, verified := s.ChartPinned, s.ChartVerified; pinned != (s.Release == "web-a") || verified != (s.Release == "web-b") {
			t.Errorf("%s: pinned %v, verified %v", s.Release, pinned, verified)
		}
		if s.ChartPlainHTTP != (s.Release == "web-b") {
			t.Errorf("%s: plainHTTP %v", s.Release, s.ChartPlainHTTP)
		}
	}
}
