package cli

import (
	"errors"
	"fmt"
	"math"
	"os"
	"runtime/debug"

	memlimit "github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/rs/zerolog"
	"k8s.io/apimachinery/pkg/api/resource"
)

// defaultMemoryLimit is the soft memory limit autox gives the Go runtime
// when nothing else sets one (no container memory limit, no GOMEMLIMIT).
// Without any limit the garbage collector lets the heap grow to twice the
// live data (GOGC=100): a cold convergence of 10,000 triggers, whose live
// heap stays near 100 MB while 32 installs render and encode at once, then
// peaks near 500 MiB of RSS. With the limit the collector works harder
// only while the heap nears it: 200Mi keeps that convergence under 300 MiB
// of RSS (the binary's pages and the runtime's spans come on top);
// BENCHMARKS.md has the figures.
const defaultMemoryLimit = "200Mi"

// memorySetting is what decides the soft memory limit: the environment's
// own settings, the container's limit as the library read it, and the
// --memory-limit flag.
type memorySetting struct {
	envGOMEMLIMIT  bool  // GOMEMLIMIT is set: it wins, as Go documents
	autoOff        bool  // AUTOMEMLIMIT=off: the user wants no automatic limit
	container      int64 // 90 % of the container's limit, or math.MaxInt64 for none
	containerErr   error // why the container's limit could not be read
	flag, flagName string
}

// memoryDecision is the limit to set (0: leave the runtime as it is) and
// where it comes from, for the log.
type memoryDecision struct {
	limit  int64
	source string
}

// decideMemoryLimit picks the soft memory limit: GOMEMLIMIT or
// AUTOMEMLIMIT=off in the environment leave it alone; a container limit
// gives 90 % of it; otherwise --memory-limit (0 for none).
func decideMemoryLimit(s memorySetting) (memoryDecision, error) {
	if s.envGOMEMLIMIT {
		return memoryDecision{source: "GOMEMLIMIT"}, nil
	}
	if s.autoOff {
		return memoryDecision{source: "AUTOMEMLIMIT=off"}, nil
	}
	if s.containerErr == nil && s.container > 0 && s.container < math.MaxInt64 {
		return memoryDecision{limit: s.container, source: "container"}, nil
	}
	q, err := resource.ParseQuantity(s.flag)
	if err != nil {
		return memoryDecision{}, fmt.Errorf("--%s %q is not a quantity such as 256Mi or 1Gi (0 for none): %w", s.flagName, s.flag, err)
	}
	v := q.Value()
	if v < 0 {
		return memoryDecision{}, fmt.Errorf("--%s %q is negative: give a quantity such as 256Mi, or 0 for none", s.flagName, s.flag)
	}
	if v == 0 {
		return memoryDecision{source: "--" + s.flagName + " 0"}, nil
	}
	return memoryDecision{limit: v, source: "--" + s.flagName}, nil
}

// setMemoryLimit gives the Go runtime a soft memory limit, so that the
// garbage collector works harder as the process nears it instead of
// letting a cold convergence's short-lived garbage grow the heap to twice
// the live data (and the kubelet kill the pod): 90 % of the container's
// memory limit when it has one, else --memory-limit. GOMEMLIMIT, or
// AUTOMEMLIMIT (a ratio, or "off"), set in the environment win.
func setMemoryLimit(log zerolog.Logger, flag string) error {
	s := memorySetting{
		envGOMEMLIMIT: os.Getenv("GOMEMLIMIT") != "",
		autoOff:       os.Getenv("AUTOMEMLIMIT") == "off",
		flag:          flag, flagName: "memory-limit",
	}
	if !s.envGOMEMLIMIT && !s.autoOff {
		s.container, s.containerErr = memlimit.Set(memlimit.WithRatio(0.9), memlimit.WithProvider(memlimit.FromCgroup))
	}
	d, err := decideMemoryLimit(s)
	if err != nil {
		return err
	}
	if s.containerErr != nil && !errors.Is(s.containerErr, memlimit.ErrNoCgroup) && !errors.Is(s.containerErr, memlimit.ErrCgroupsNotSupported) {
		log.Warn().Err(s.containerErr).Msg("cannot read the container's memory limit; using --memory-limit (or set GOMEMLIMIT)")
	}
	if d.limit > 0 {
		debug.SetMemoryLimit(d.limit)
		log.Info().Int64("bytes", d.limit).Str("from", d.source).Msg("soft memory limit (GOMEMLIMIT)")
	}
	return nil
}
