package config

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// Release policies (DESIGN §2): per release spec, how autox runs its Helm
// operations, and per spec or release spec whether it runs them at all.
// What Helm users set with `--wait`, `--timeout`, `--no-hooks`,
// `--skip-crds`, `--history-max` or in a Flux HelmRelease. Each default is
// what autox did before the policy existed, and none of them is part of the
// release format: an autox that knows them computes the same digest and
// injected values, so a config that sets none behaves exactly as before.

// Values of ReleaseSpec.CRDs: what happens to the CustomResourceDefinitions
// of a chart's crds/ directory. "" is Helm's own behaviour: created on
// install (an existing one is left as it is), left alone on upgrade.
const (
	// CRDsSkip: never created nor changed.
	CRDsSkip = "Skip"
	// CRDsCreate: created on install and on upgrade when missing; an
	// existing one is left as it is.
	CRDsCreate = "Create"
	// CRDsCreateReplace: created when missing, replaced by the chart's when
	// present, on install and upgrade. Never deleted.
	CRDsCreateReplace = "CreateReplace"
)

// Values of Remediation.OnFailure: what happens once a release spec's
// retries are used up.
const (
	// OnFailureKeep leaves the failed release as it is and reports it.
	OnFailureKeep = "keep"
	// OnFailureRollback rolls a failed upgrade back to the last deployed
	// revision.
	OnFailureRollback = "rollback"
	// OnFailureUninstall uninstalls a failed install that was never
	// deployed; a release that was once deployed is kept instead.
	OnFailureUninstall = "uninstall"
)

// Remediation bounds the attempts autox makes for a release spec whose
// Helm operations fail.
type Remediation struct {
	// Retries are the attempts after the first failed one; nil means no
	// bound (each failure is retried with backoff). 0 gives up after the
	// first failure.
	Retries *int `json:"retries,omitempty"`
	// OnFailure is what happens once the retries are used up; defaulted to
	// OnFailureKeep when Retries is set.
	OnFailure string `json:"onFailure,omitempty"`
}

// Limited reports whether the release spec's attempts are bounded, and by
// how many retries.
func (rs *ReleaseSpec) Limited() (retries int, limited bool) {
	if rs == nil || rs.Remediation == nil || rs.Remediation.Retries == nil {
		return 0, false
	}
	return *rs.Remediation.Retries, true
}

// TimeoutOr is the release spec's timeout, or def when it sets none.
func (rs *ReleaseSpec) TimeoutOr(def time.Duration) time.Duration {
	if rs == nil || rs.Timeout == "" {
		return def
	}
	d, err := time.ParseDuration(rs.Timeout)
	if err != nil || d <= 0 {
		return def // validation refuses it; a hand-built spec gets the default
	}
	return d
}

// MaxHistoryOr is the release spec's maxHistory, or def when it sets none.
func (rs *ReleaseSpec) MaxHistoryOr(def int) int {
	if rs == nil || rs.MaxHistory <= 0 {
		return def
	}
	return rs.MaxHistory
}

// Suspended says what suspends release spec id of s: "spec" when the spec
// is suspended, "releaseSpec" when only the release spec is, "" when
// neither is.
func (s *Spec) Suspended(id string) string {
	switch {
	case s == nil:
		return ""
	case s.Suspend:
		return SuspendedBySpec
	case s.ReleaseSpecs[id] != nil && s.ReleaseSpecs[id].Suspend:
		return SuspendedByReleaseSpec
	}
	return ""
}

// What Spec.Suspended names.
const (
	SuspendedBySpec        = "spec"
	SuspendedByReleaseSpec = "releaseSpec"
)

// DependencyOrder returns the release spec ids of s so that each comes
// after every id it depends on, ties broken by id: the order installs and
// upgrades go in (uninstalls go the other way). A valid config has no
// cycle; ids in one are put last, in id order.
func (s *Spec) DependencyOrder() []string {
	ids := s.ReleaseSpecIDs()
	placed := make(map[string]bool, len(ids))
	out := make([]string, 0, len(ids))
	for len(out) < len(ids) {
		progress := false
		for _, id := range ids {
			if placed[id] {
				continue
			}
			ready := true
			for _, dep := range s.dependsOn(id) {
				if !placed[dep] && s.ReleaseSpecs[dep] != nil {
					ready = false
				}
			}
			if ready {
				placed[id], progress = true, true
				out = append(out, id)
			}
		}
		if !progress {
			for _, id := range ids {
				if !placed[id] {
					out = append(out, id)
				}
			}
			break
		}
	}
	return out
}

// Dependents returns, sorted, the release specs of s that depend on id.
func (s *Spec) Dependents(id string) []string {
	var out []string
	for _, other := range s.ReleaseSpecIDs() {
		for _, dep := range s.dependsOn(other) {
			if dep == id {
				out = append(out, other)
				break
			}
		}
	}
	return out
}

func (s *Spec) dependsOn(id string) []string {
	if rs := s.ReleaseSpecs[id]; rs != nil {
		return rs.DependsOn
	}
	return nil
}

// defaultPolicies fills in what a release spec's policies may omit; spec's
// serverSideApply is the default of its release specs'.
func defaultPolicies(spec *Spec, rs *ReleaseSpec) {
	if rs.ServerSideApply == nil && spec.ServerSideApply != nil {
		v := *spec.ServerSideApply
		rs.ServerSideApply = &v
	}
	if rs.Remediation != nil && rs.Remediation.Retries != nil && rs.Remediation.OnFailure == "" {
		rs.Remediation.OnFailure = OnFailureKeep
	}
}

// validatePolicies checks the policies of one release spec at path p.
func validatePolicies(c *checker, p string, rs *ReleaseSpec) {
	if rs.Timeout != "" {
		if d, err := time.ParseDuration(rs.Timeout); err != nil || d <= 0 {
			c.add(p+".timeout", "%q is not a duration: write a number with a unit, such as 30s, 5m or 1h30m", rs.Timeout)
		}
	}
	if rs.WaitForJobs && !rs.Wait {
		c.add(p+".waitForJobs", "needs `wait: true`: Helm waits for Jobs only while it waits for the release's objects")
	}
	switch rs.CRDs {
	case "", CRDsSkip, CRDsCreate, CRDsCreateReplace:
	default:
		c.add(p+".crds", "must be %s, %s or %s (or omitted: Helm's way, create on install and leave on upgrade), got %q",
			CRDsSkip, CRDsCreate, CRDsCreateReplace, rs.CRDs)
	}
	if r := rs.Remediation; r != nil {
		rp := p + ".remediation"
		if r.Retries != nil && *r.Retries < 0 {
			c.add(rp+".retries", "must be 0 or more, got %d; omit it to retry without a bound", *r.Retries)
		}
		switch r.OnFailure {
		case "", OnFailureKeep, OnFailureRollback, OnFailureUninstall:
		default:
			c.add(rp+".onFailure", "must be %s, %s or %s, got %q", OnFailureKeep, OnFailureRollback, OnFailureUninstall, r.OnFailure)
		}
		if r.Retries == nil && r.OnFailure != "" {
			c.add(rp+".onFailure", "applies once the retries are used up: set `retries` too (e.g. `retries: 2`); without it autox retries without a bound")
		}
	}
}

// validateDependsOn checks the dependsOn lists of spec's release specs:
// every entry names another release spec of the same spec, once, and no
// release specs depend on each other in a cycle.
func validateDependsOn(c *checker, sp string, spec *Spec) {
	ids := spec.ReleaseSpecIDs()
	known := strings.Join(ids, ", ")
	for _, id := range ids {
		rs := spec.ReleaseSpecs[id]
		if rs == nil {
			continue
		}
		seen := map[string]bool{}
		for i, dep := range rs.DependsOn {
			p := fmt.Sprintf("%s.releaseSpecs.%s.dependsOn[%d]", sp, id, i)
			switch {
			case dep == id:
				c.add(p, "release spec %q cannot depend on itself; remove the entry", id)
			case spec.ReleaseSpecs[dep] == nil:
				c.add(p, "release spec %q is not in this spec (dependsOn names release specs of the same spec: %s)", dep, known)
			case seen[dep]:
				c.add(p, "release spec %q is listed twice", dep)
			}
			seen[dep] = true
		}
	}
	for _, cycle := range dependencyCycles(spec) {
		c.add(fmt.Sprintf("%s.releaseSpecs.%s.dependsOn", sp, cycle[0]),
			"release specs depend on each other in a cycle (%s), so none could go first; remove one of these dependsOn entries",
			strings.Join(append(cycle, cycle[0]), " -> "))
	}
}

// dependencyCycles returns each cycle of spec's dependsOn once, starting at
// its smallest id, self references left out (reported on their own).
func dependencyCycles(spec *Spec) [][]string {
	const (
		unvisited = iota
		onPath
		done
	)
	state := map[string]int{}
	seen := map[string]bool{}
	var cycles [][]string
	var path []string
	var visit func(id string)
	visit = func(id string) {
		state[id] = onPath
		path = append(path, id)
		deps := append([]string(nil), spec.dependsOn(id)...)
		sort.Strings(deps)
		for _, dep := range deps {
			if dep == id || spec.ReleaseSpecs[dep] == nil {
				continue
			}
			switch state[dep] {
			case unvisited:
				visit(dep)
			case onPath:
				start := 0
				for path[start] != dep {
					start++
				}
				cycles = appendCycle(cycles, seen, path[start:])
			}
		}
		path = path[:len(path)-1]
		state[id] = done
	}
	for _, id := range spec.ReleaseSpecIDs() {
		if state[id] == unvisited {
			visit(id)
		}
	}
	return cycles
}

// appendCycle adds cycle, rotated to start at its smallest id, unless it
// was found before.
func appendCycle(cycles [][]string, seen map[string]bool, cycle []string) [][]string {
	min := 0
	for i, id := range cycle {
		if id < cycle[min] {
			min = i
		}
	}
	rotated := append(append([]string(nil), cycle[min:]...), cycle[:min]...)
	key := strings.Join(rotated, "/")
	if seen[key] {
		return cycles
	}
	seen[key] = true
	return append(cycles, rotated)
}
