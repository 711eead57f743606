package format_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/internal/format"
	"github.com/autox-dev/autox/triggers/plan"
)

// writeGolden writes the golden files of a format version that has none
// yet. It never overwrites one: those change only with a new format version.
var writeGolden = flag.Bool("write-golden", false, "write missing golden files of the release format (never overwrites)")

// goldenCase is one input of testdata/format/<version>/cases.yaml.
type goldenCase struct {
	Name          string            `json:"name"`
	Instance      string            `json:"instance"`
	Spec          string            `json:"spec"`
	ReleaseSpec   string            `json:"releaseSpec"`
	Object        *format.Object    `json:"object"`
	TriggerLabels map[string]string `json:"triggerLabels"`
	Sources       []struct {
		Found bool              `json:"found"`
		Data  map[string]string `json:"data"`
	} `json:"sources"`
}

// goldenRelease is what a golden file holds: the release autox makes.
type goldenRelease struct {
	Release   string                 `json:"release"`
	Namespace string                 `json:"namespace"`
	Labels    map[string]string      `json:"labels"`
	Digest    string                 `json:"digest"`
	Values    map[string]interface{} `json:"values"`
	// UpgradeLabels are the labels of an upgrade to revision 5.
	UpgradeLabels map[string]string `json:"upgradeLabels"`
}

// TestFormatV1 pins the release format v1: for fixed inputs, the release
// name, labels, digest and values that autox computes — through the same
// plan that `autox run` uses — equal the committed golden files byte for
// byte. A failure here means a new autox would relabel, upgrade or not
// recognise releases that an earlier one made.
func TestFormatV1(t *testing.T) {
	dir := filepath.Join("..", "..", "testdata", "format", format.Version)
	cfg, err := config.Load(filepath.Join(dir, "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cases []goldenCase
	readYAML(t, filepath.Join(dir, "cases.yaml"), &cases)
	if len(cases) == 0 {
		t.Fatal("no cases")
	}
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			got, err := json.MarshalIndent(release(t, cfg, tc), "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			path := filepath.Join(dir, tc.Name+".json")
			want, err := os.ReadFile(path)
			if os.IsNotExist(err) && *writeGolden {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
				t.Logf("wrote %s", path)
				return
			}
			if err != nil {
				t.Fatalf("%v (a new case? run go test ./internal/format -write-golden once)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("release format %s changed for case %q (%s).\n"+
					"What autox writes on releases (labels, digest, injected `autox` values) is a contract with every "+
					"earlier and later version (docs/design.md §5 and §8): a change is breaking. It needs a new format "+
					"version and a migration that makes no Helm write — never an edit of these golden files.\n got: %s\nwant: %s",
					format.Version, tc.Name, path, got, want)
			}
		})
	}
}

// TestFormatV1IgnoresPolicies: the release policies are not part of the
// release format. The golden config with every policy set on every spec
// and release spec (suspend, timeout, wait, waitForJobs, disableHooks,
// crds, maxHistory, remediation, dependsOn, serverSideApply, drift) gives, for every case, the
// release of the unchanged golden file: the same name, labels, digest and
// injected values, so a policy change makes no Helm write by itself, and
// an autox that knows the policies writes nothing on releases an earlier
// one made.
func TestFormatV1IgnoresPolicies(t *testing.T) {
	dir := filepath.Join("..", "..", "testdata", "format", format.Version)
	var doc map[string]interface{}
	readYAML(t, filepath.Join(dir, "config.yaml"), &doc)
	specs, _ := doc["specs"].(map[string]interface{})
	set := 0
	for _, s := range specs {
		spec := s.(map[string]interface{})
		spec["suspend"], spec["serverSideApply"] = true, false
		spec["drift"] = map[string]interface{}{"mode": "warn", "ignore": []interface{}{map[string]interface{}{"paths": []string{"/spec/replicas"}}}}
		rss := spec["releaseSpecs"].(map[string]interface{})
		ids := make([]string, 0, len(rss))
		for id := range rss {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		for i, id := range ids {
			rs := rss[id].(map[string]interface{})
			rs["suspend"], rs["timeout"], rs["wait"], rs["waitForJobs"], rs["disableHooks"] = true, "7m", true, true, true
			rs["crds"], rs["maxHistory"], rs["serverSideApply"] = "CreateReplace", 3, i%2 == 0
			rs["remediation"] = map[string]interface{}{"retries": 2, "onFailure": "rollback"}
			if i%2 == 1 {
				rs["drift"] = map[string]interface{}{"mode": "correct", "ignore": []interface{}{map[string]interface{}{"managers": []string{"kube-controller-manager"},
					"target": map[string]interface{}{"group": "apps", "kind": "Deployment", "labelSelector": "app=web"}}}}
			}
			if i > 0 {
				rs["dependsOn"] = []string{ids[0]}
			}
			set++
		}
	}
	if set == 0 {
		t.Fatal("no release spec in the golden config")
	}
	data, err := yaml.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatalf("the golden config with every policy: %v", err)
	}
	var cases []goldenCase
	readYAML(t, filepath.Join(dir, "cases.yaml"), &cases)
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			got, err := json.MarshalIndent(releaseOf(t, cfg, tc, true), "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			want, err := os.ReadFile(filepath.Join(dir, tc.Name+".json"))
			if err != nil {
				t.Fatal(err)
			}
			if got = append(got, '\n'); !bytes.Equal(got, want) {
				t.Errorf("case %q: the release policies changed what autox writes on releases; they must stay out of the "+
					"digest, the labels and the injected values (docs/design.md §5).\n got: %s\nwant: %s", tc.Name, got, want)
			}
		})
	}
}

// release is what the plan decides to install for one case, with the
// labels helmops writes for it.
func release(t *testing.T, cfg *config.Config, tc goldenCase) goldenRelease {
	return releaseOf(t, cfg, tc, false)
}

// releaseOf is release; with held, the install may be held by the
// policies (suspended, waiting for a release spec the case leaves out),
// and the release is the one the held install would make.
func releaseOf(t *testing.T, cfg *config.Config, tc goldenCase, held bool) goldenRelease {
	t.Helper()
	spec := cfg.Specs[tc.Spec]
	if spec == nil {
		t.Fatalf("no spec %q", tc.Spec)
	}
	var obj format.Object
	if tc.Object != nil {
		obj = *tc.Object
		var err error
		if spec, err = spec.ForObject(tc.Spec, obj.Namespace, obj.Name); err != nil {
			t.Fatal(err)
		}
	}
	rs := spec.ReleaseSpecs[tc.ReleaseSpec]
	if rs == nil {
		t.Fatalf("no release spec %q", tc.ReleaseSpec)
	}
	if len(tc.Sources) != len(rs.ValuesFrom) {
		t.Fatalf("%d sources for %d valuesFrom entries", len(tc.Sources), len(rs.ValuesFrom))
	}
	ro := plan.ReleaseSpecObservation{Chart: plan.ChartID{Name: rs.Chart.Name, Version: rs.Chart.Version}}
	for i, s := range tc.Sources {
		ro.Sources = append(ro.Sources, plan.SourceValue{Ref: rs.ValuesFrom[i], Namespace: rs.Namespace, Found: s.Found, Data: s.Data})
	}
	instance := tc.Instance
	if instance == "" {
		instance = format.DefaultInstance
	}
	// One release spec observed: the others are left out of the plan.
	only := *spec
	only.ReleaseSpecs = map[string]*config.ReleaseSpec{tc.ReleaseSpec: rs}
	res := plan.Decide(plan.Observation{Spec: tc.Spec, Config: &only, Instance: instance, Object: obj,
		Trigger:      plan.TriggerRead{Found: true, Labels: tc.TriggerLabels},
		ReleaseSpecs: map[string]plan.ReleaseSpecObservation{tc.ReleaseSpec: ro},
		Now:          time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), Defaults: config.PolicyDefaults{Timeout: time.Minute - config.StaleGrace}})
	if len(res.Failed) > 0 {
		t.Fatalf("not decided: %v", res.Failed[0].Err)
	}
	if len(res.Steps) != 1 || res.Steps[0].Desired == nil ||
		(res.Steps[0].Action != plan.ActionInstall && !(held && res.Steps[0].Pending == plan.ActionInstall)) {
		t.Fatalf("want one install, got %+v", res.Steps)
	}
	s := res.Steps[0]
	owner := format.Owner{Spec: tc.Spec, ReleaseSpec: tc.ReleaseSpec, Instance: instance, Object: obj}
	return goldenRelease{Release: s.Release, Namespace: s.Namespace,
		Labels: format.ReleaseLabels(owner, s.Desired.Digest, s.Desired.Revision), Digest: s.Desired.Digest,
		Values: s.Desired.Values, UpgradeLabels: format.ReleaseLabels(owner, s.Desired.Digest, 5)}
}

func readYAML(t *testing.T, path string, into interface{}) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(data, into); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
