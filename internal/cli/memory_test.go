package cli

import (
	"errors"
	"math"
	"testing"

	memlimit "github.com/KimMachineGun/automemlimit/memlimit"
)

func TestDecideMemoryLimit(t *testing.T) {
	for _, tc := range []struct {
		name      string
		s         memorySetting
		limit     int64
		source    string
		wantError bool
	}{
		{name: "GOMEMLIMIT wins", s: memorySetting{envGOMEMLIMIT: true, container: 1 << 30, flag: "256Mi"}, source: "GOMEMLIMIT"},
		{name: "AUTOMEMLIMIT off", s: memorySetting{autoOff: true, flag: "256Mi"}, source: "AUTOMEMLIMIT=off"},
		{name: "container limit", s: memorySetting{container: 900 << 20, flag: "256Mi"}, limit: 900 << 20, source: "container"},
		{name: "no container limit", s: memorySetting{container: math.MaxInt64, flag: "256Mi"}, limit: 256 << 20, source: "--memory-limit"},
		{name: "no cgroup", s: memorySetting{containerErr: memlimit.ErrNoCgroup, flag: "1Gi"}, limit: 1 << 30, source: "--memory-limit"},
		{name: "unreadable cgroup", s: memorySetting{containerErr: errors.New("permission denied"), flag: "300M"}, limit: 300e6, source: "--memory-limit"},
		{name: "flag zero", s: memorySetting{container: math.MaxInt64, flag: "0"}, source: "--memory-limit 0"},
		{name: "bad flag", s: memorySetting{container: math.MaxInt64, flag: "lots"}, wantError: true},
		{name: "negative flag", s: memorySetting{container: math.MaxInt64, flag: "-1Gi"}, wantError: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.s.flagName = "memory-limit"
			d, err := decideMemoryLimit(tc.s)
			if tc.wantError {
				if err == nil {
					t.Fatalf("decideMemoryLimit(%+v) = %+v, want an error", tc.s, d)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d.limit != tc.limit || d.source != tc.source {
				t.Errorf("decideMemoryLimit(%+v) = %+v, want limit %d from %s", tc.s, d, tc.limit, tc.source)
			}
		})
	}
}
