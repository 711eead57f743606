package config

import (
	"fmt"
	"sort"
	"strings"
)

// dependsOn (DESIGN §2, §3) orders a spec's release specs: an install or
// upgrade comes after those it depends on, an uninstall after those that
// depend on it. These are the order and its validation.

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
