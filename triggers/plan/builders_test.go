package plan

// The builders of specs, releases and observations that the decision tests
// share: a named spec (planSpec, deployed, observation), a selector config
// (selectorConfig, objectObservation, objectRelease) and values sources
// (secret, configMap, sourcedObservation). A new case is a row of a table
// built from them.

import (
	"testing"
	"time"

	"github.com/autox-dev/autox/config"
	"github.com/autox-dev/autox/internal/format"
	"helm.sh/helm/v4/pkg/release/common"
)

var planNow = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// planSpec is a spec with two release specs, a (in ns) and b (in other).
func planSpec() *config.Spec {
	return &config.Spec{
		Trigger: config.Trigger{Group: "apps", Version: "v1", Resource: "deployments", Name: "web", Namespace: "ns",
			Labels: []string{"app.kubernetes.io/version"}},
		ReleaseSpecs: map[string]*config.ReleaseSpec{
			"a": {Chart: config.Chart{Repo: "https://c", Name: "hello", Version: "1.0.0"}, ReleaseName: "web-a", Namespace: "ns",
				OnChange: config.OnChangeUpgrade, Values: map[string]interface{}{"token": "s3cret-token"}},
			"b": {Chart: config.Chart{Path: "charts/job"}, ReleaseName: "web-b", Namespace: "other",
				OnChange: config.OnChangeReinstall},
		},
	}
}

var labelled = TriggerRead{Found: true, Labels: map[string]string{"app.kubernetes.io/version": "2.0.0"}}

// deployed is the release release spec id of planSpec makes for labelled.
func deployed(id string) *format.Release {
	spec := planSpec()
	rs := spec.ReleaseSpecs[id]
	chart := map[string][2]string{"a": {"hello", "1.0.0"}, "b": {"job", "0.1.0"}}[id]
	return &format.Release{Record: format.Record{Name: rs.ReleaseName, Namespace: rs.Namespace, Spec: "web", ReleaseSpec: id, Instance: "autox", Revision: 2, Status: common.StatusDeployed},
		ChartName: chart[0], ChartVersion: chart[1], Values: DesiredValues(rs, spec.Trigger, labelled.Labels), Modified: planNow.Add(-time.Hour), LastDeployedRevision: 2}
}

func observation(mut func(o *Observation)) Observation {
	o := Observation{Spec: "web", Config: planSpec(), Instance: "autox", Trigger: labelled,
		ReleaseSpecs: map[string]ReleaseSpecObservation{
			"a": {Chart: ChartID{"hello", "1.0.0"}},
			"b": {Chart: ChartID{"job", "0.1.0"}},
		},
		Now: planNow, Defaults: config.PolicyDefaults{Timeout: 5 * time.Minute}}
	if mut != nil {
		mut(&o)
	}
	if o.InForce == nil {
		o.InForce = inForce(map[string]*config.Spec{o.Spec: o.Config})
	}
	return o
}

// inForce is a config of namespaces ns and other with these specs (a nil
// one left out): the whole config an observation's spec is part of.
func inForce(specs map[string]*config.Spec) *config.Config {
	cfg := &config.Config{Namespaces: []string{"ns", "other"}, Specs: map[string]*config.Spec{}}
	for name, s := range specs {
		if s != nil {
			cfg.Specs[name] = s
		}
	}
	return cfg
}

func with(r *format.Release, mut func(r *format.Release)) *format.Release { mut(r); return r }

func withSpec(s *config.Spec, mut func(s *config.Spec)) *config.Spec { mut(s); return s }

// selectorConfig has a selector spec "exp" on deployments in ns and other,
// a named spec "web" on deployment ns/web, and a second selector spec
// "canary" whose selector overlaps exp's when both labels are set.
func selectorConfig(t *testing.T) *config.Config {
	t.Helper()
	cfg, err := config.Parse([]byte(`
namespaces: [ns, other]
specs:
  exp:
    trigger:
      group: apps
      version: v1
      resource: deployments
      selector: {matchLabels: {autox.dev/experiment: enabled}}
      maxObjects: 2
    releaseSpecs:
      job:
        chart: {repo: "https://charts.example", name: hello, version: 1.0.0}
        values: {token: s3cret-token}
  web:
    trigger: {group: apps, version: v1, resource: deployments, name: web, namespace: ns}
    releaseSpecs:
      a: {chart: {repo: "https://charts.example", name: hello, version: 1.0.0}}
  canary:
    trigger:
      group: apps
      version: v1
      resource: deployments
      namespace: ns
      selector: {matchExpressions: [{key: canary, operator: Exists}]}
    releaseSpecs:
      c: {chart: {repo: "https://charts.example", name: hello, version: 1.0.0}}
`), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

var version = map[string]string{"app.kubernetes.io/version": "1"}

func labels(extra ...string) map[string]string {
	l := map[string]string{"app.kubernetes.io/version": "1"}
	for i := 0; i+1 < len(extra); i += 2 {
		l[extra[i]] = extra[i+1]
	}
	return l
}

// objectObservation observes object ns/a of spec exp.
func objectObservation(t *testing.T, cfg *config.Config, obj format.Object, trig TriggerRead, current ...*format.Release) Observation {
	t.Helper()
	spec, err := cfg.Specs["exp"].ForObject("exp", obj.Namespace, obj.Name)
	if err != nil {
		t.Fatal(err)
	}
	o := Observation{Spec: "exp", Config: spec, Object: obj, Instance: "autox", InForce: cfg, Trigger: trig, Current: current,
		ReleaseSpecs: map[string]ReleaseSpecObservation{"job": {Chart: ChartID{"hello", "1.0.0"}}},
		Now:          planNow, Defaults: config.PolicyDefaults{Timeout: 300*time.Second - config.StaleGrace}}
	if trig.Found {
		o.Claimants = NewClaimIndex(cfg).Claimants("apps", "deployments", obj, trig.Labels)
	}
	return o
}

// objectRelease is the release spec exp's job makes for obj, in sync.
func objectRelease(t *testing.T, cfg *config.Config, obj format.Object, trig TriggerRead) *format.Release {
	spec, err := cfg.Specs["exp"].ForObject("exp", obj.Namespace, obj.Name)
	if err != nil {
		t.Fatal(err)
	}
	rs := spec.ReleaseSpecs["job"]
	return &format.Release{Record: format.Record{Name: rs.ReleaseName, Namespace: rs.Namespace, Spec: "exp", ReleaseSpec: "job", Instance: "autox", ObjectNamespace: obj.Namespace, ObjectName: format.ObjectLabel(obj.Name), Revision: 1, Status: common.StatusDeployed},
		ChartName: "hello", ChartVersion: "1.0.0", Values: DesiredValues(rs, spec.Trigger, trig.Labels), Modified: planNow, LastDeployedRevision: 1}
}

var srcTrigger = config.Trigger{Group: "apps", Version: "v1", Resource: "deployments", Name: "web", Namespace: "ns", Labels: []string{"v"}}

func secret(name, key, content string) SourceValue {
	return SourceValue{Ref: config.ValuesFrom{Kind: config.KindSecret, Name: name, Key: key}, Namespace: "ns", Found: true, Data: map[string]string{key: content}}
}

func configMap(name, key, content string) SourceValue {
	s := secret(name, key, content)
	s.Ref.Kind = config.KindConfigMap
	return s
}

func refsOf(sources []SourceValue) []config.ValuesFrom {
	out := make([]config.ValuesFrom, len(sources))
	for i, s := range sources {
		out[i] = s.Ref
	}
	return out
}

func merge(t *testing.T, values map[string]interface{}, sources ...SourceValue) (Merged, error) {
	t.Helper()
	rs := &config.ReleaseSpec{Values: values, ValuesFrom: refsOf(sources)}
	return MergeValues(rs, sources, srcTrigger, map[string]string{"v": "2"})
}

func mustMerge(t *testing.T, values map[string]interface{}, sources ...SourceValue) Merged {
	t.Helper()
	m, err := merge(t, values, sources...)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func sourcedObservation(pw string, mut func(o *Observation)) Observation {
	return observation(func(o *Observation) {
		o.Config.ReleaseSpecs["a"].ValuesFrom = []config.ValuesFrom{{Kind: config.KindSecret, Name: "creds", Key: "values.yaml"}}
		o.ReleaseSpecs["a"] = ReleaseSpecObservation{Chart: ChartID{"hello", "1.0.0"},
			Sources: []SourceValue{secret("creds", "values.yaml", "db:\n  password: "+pw+"\n")}}
		if mut != nil {
			mut(o)
		}
	})
}

// TestPlanValuesFromSecret: the desired values and digest hold the merged
// values; a changed Secret upgrades with a reason that names the path and
// the Secret but not the value; the step's redactor hides it; the same
// content again is in sync.

// changed is an observation changed by mut.
func changed(o Observation, mut func(o *Observation)) Observation { mut(&o); return o }

// namedRelease is the release the named spec web of selectorConfig makes
// with release spec a for trig, in sync.
func namedRelease(t *testing.T, cfg *config.Config, trig TriggerRead) *format.Release {
	t.Helper()
	spec := cfg.Specs["web"]
	rs := spec.ReleaseSpecs["a"]
	return &format.Release{Record: format.Record{Name: rs.ReleaseName, Namespace: rs.Namespace, Spec: "web", ReleaseSpec: "a", Instance: "autox", Revision: 1, Status: common.StatusDeployed},
		ChartName: "hello", ChartVersion: "1.0.0", Values: DesiredValues(rs, spec.Trigger, trig.Labels), Modified: planNow, LastDeployedRevision: 1}
}

// at is source s placed whole at targetPath path.
func at(s SourceValue, path string) SourceValue { s.Ref.TargetPath = path; return s }

// fromSources is the plan observation with release spec a's values taken
// from sources (and its inline token), and a's release current when
// installed is set, with values that differ.
func fromSources(installed bool, sources ...SourceValue) Observation {
	return observation(func(o *Observation) {
		o.Config.ReleaseSpecs["a"].ValuesFrom = refsOf(sources)
		o.ReleaseSpecs["a"] = ReleaseSpecObservation{Chart: ChartID{"hello", "1.0.0"}, Sources: sources}
		if installed {
			o.Current = []*format.Release{with(deployed("a"), func(r *format.Release) { r.Values = map[string]interface{}{"old": "old-value"} })}
		}
	})
}
