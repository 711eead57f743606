package drift

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/autox-dev/autox/config"
)

var rel = Release{Namespace: "default", Name: "web"}

func obj(t *testing.T, y string) *unstructured.Unstructured {
	t.Helper()
	m := map[string]interface{}{}
	if err := yaml.Unmarshal([]byte(y), &m); err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: m}
}

// deployment is a release's Deployment: desired, its dry run and the live
// object, which a test edits.
const desiredDeploy = `
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: default
  labels: {app: web, app.kubernetes.io/managed-by: Helm}
  annotations: {meta.helm.sh/release-name: web, meta.helm.sh/release-namespace: default, note: a}
spec:
  replicas: 1
  template:
    spec:
      containers:
      - name: app
        image: nginx:1
        args: [a, b]
        env:
        - {name: A, value: "1"}
        - {name: B, value: "2"}
`

const applied = `{"f:metadata":{"f:labels":{"f:app":{},"f:app.kubernetes.io/managed-by":{}},"f:annotations":{"f:meta.helm.sh/release-name":{},"f:meta.helm.sh/release-namespace":{},"f:note":{}}},` +
	`"f:spec":{"f:replicas":{},"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"app\"}":{".":{},"f:name":{},"f:image":{},"f:args":{},` +
	`"f:env":{"k:{\"name\":\"A\"}":{".":{},"f:name":{},"f:value":{}},"k:{\"name\":\"B\"}":{".":{},"f:name":{},"f:value":{}}}}}}}}}`

// withFields is y (an object's YAML) with managedFields entries, each
// "manager|operation|fieldsV1 JSON", and a resourceVersion.
func withFields(t *testing.T, y string, entries ...string) *unstructured.Unstructured {
	t.Helper()
	u := obj(t, y)
	var mf []interface{}
	for _, e := range entries {
		parts := strings.SplitN(e, "|", 3)
		var fv interface{}
		if err := json.Unmarshal([]byte(parts[2]), &fv); err != nil {
			t.Fatalf("%s: %v", parts[2], err)
		}
		mf = append(mf, map[string]interface{}{"manager": parts[0], "operation": parts[1], "fieldsType": "FieldsV1", "fieldsV1": fv})
	}
	_ = unstructured.SetNestedSlice(u.Object, mf, "metadata", "managedFields")
	u.SetResourceVersion("42")
	return u
}

// scene is desired, dry run and live of the deployment, live edited by edit.
func scene(t *testing.T, edit func(live *unstructured.Unstructured), liveFields ...string) Input {
	t.Helper()
	dry := withFields(t, desiredDeploy, "autox|Apply|"+applied)
	live := withFields(t, desiredDeploy, liveFields...)
	if len(liveFields) == 0 {
		live = withFields(t, desiredDeploy, "autox|Update|"+applied)
	}
	if edit != nil {
		edit(live)
	}
	return Input{Release: rel, Desired: obj(t, desiredDeploy), DryRun: dry, Live: live, Mode: config.DriftCorrect, Memory: NewMemory(), Now: time.Unix(1e9, 0)}
}

func check(t *testing.T, in Input) Result {
	t.Helper()
	r, err := Check(in)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// patched applies the result's patch to the live object with a real JSON
// patch implementation (the one the API server uses).
func patched(t *testing.T, in Input, r Result) map[string]interface{} {
	t.Helper()
	if r.Correction == nil || r.Correction.Patch == nil {
		t.Fatalf("no patch: %+v", r)
	}
	p, err := jsonpatch.DecodePatch(r.Correction.Patch)
	if err != nil {
		t.Fatal(err)
	}
	js, _ := json.Marshal(in.Live.Object)
	out, err := p.Apply(js)
	if err != nil {
		t.Fatalf("patch %s: %v", r.Correction.Patch, err)
	}
	m := map[string]interface{}{}
	_ = json.Unmarshal(out, &m)
	return m
}

const scaled = `{"f:spec":{"f:replicas":{}}}`

func TestNoDrift(t *testing.T) {
	in := scene(t, func(live *unstructured.Unstructured) {
		// Others' additions are no drift: an annotation, a sidecar, status.
		live.SetAnnotations(map[string]string{"meta.helm.sh/release-name": "web", "meta.helm.sh/release-namespace": "default", "note": "a", "other": "x"})
		cs, _, _ := unstructured.NestedSlice(live.Object, "spec", "template", "spec", "containers")
		cs = append(cs, map[string]interface{}{"name": "sidecar", "image": "envoy"})
		_ = unstructured.SetNestedSlice(live.Object, cs, "spec", "template", "spec", "containers")
		_ = unstructured.SetNestedField(live.Object, int64(7), "status", "replicas")
	})
	r := check(t, in)
	if r.Drifted() || r.Correction != nil {
		t.Errorf("result = %+v, want no drift", r)
	}
}

func TestScaledDeployment(t *testing.T) {
	edit := func(live *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(live.Object, int64(3), "spec", "replicas")
	}
	in := scene(t, edit, "autox|Update|"+applied, "kubectl|Update|"+scaled)
	r := check(t, in)
	want := []Field{{Path: "/spec/replicas", State: Drifted, Managers: []string{"autox", "kubectl"}}}
	// autox's Update entry still lists replicas here (a hand-made scene):
	// only another manager among the owners makes it Drifted, not Unstable.
	if !reflect.DeepEqual(r.Fields, want) {
		t.Errorf("fields = %+v, want %+v", r.Fields, want)
	}
	out := patched(t, in, r)
	if v, _, _ := unstructured.NestedFieldNoCopy(out, "spec", "replicas"); !equal(v, 1) {
		t.Errorf("patched replicas = %d", v)
	}
	if !strings.Contains(string(r.Correction.Patch), `{"op":"replace","path":"/metadata/resourceVersion","value":"42"}`) {
		t.Errorf("no resourceVersion precondition: %s", r.Correction.Patch)
	}
	if !reflect.DeepEqual(r.Correction.Paths, []string{"/spec/replicas"}) {
		t.Errorf("paths = %v", r.Correction.Paths)
	}

	in.Mode = config.DriftWarn
	if r := check(t, in); r.Correction != nil || r.NotCorrected != ReasonWarn || len(r.Fields) != 1 {
		t.Errorf("warn: %+v", r)
	}
	in.Mode, in.Suspended = config.DriftCorrect, true
	if r := check(t, in); r.Correction != nil || r.NotCorrected != ReasonSuspended {
		t.Errorf("suspended: %+v", r)
	}
}

// TestIgnoreAndSibling: an ignored field is neither drift nor written; a
// sibling in the same object is corrected.
func TestIgnoreAndSibling(t *testing.T) {
	edit := func(live *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(live.Object, int64(3), "spec", "replicas")
		_ = unstructured.SetNestedField(live.Object, "b", "metadata", "annotations", "note")
		_ = unstructured.SetNestedField(live.Object, "other", "metadata", "labels", "app")
	}
	in := scene(t, edit, "kubectl|Update|"+applied)
	var err error
	in.Rules, err = Compile(&config.Drift{Ignore: []config.DriftIgnore{
		{Paths: []string{"/spec/replicas", "/metadata/labels/app"}, Target: &config.DriftTarget{Group: "apps", Kind: "Deployment"}},
		{Paths: []string{"/metadata/annotations/note"}, Target: &config.DriftTarget{Kind: "ConfigMap"}}, // another kind
	}})
	if err != nil {
		t.Fatal(err)
	}
	r := check(t, in)
	if len(r.Fields) != 1 || r.Fields[0].Path != "/metadata/annotations/note" || r.Fields[0].State != Drifted {
		t.Fatalf("fields = %+v", r.Fields)
	}
	out := patched(t, in, r)
	if v, _, _ := unstructured.NestedFieldNoCopy(out, "spec", "replicas"); !equal(v, 3) {
		t.Errorf("ignored replicas written: %d", v)
	}
	if v, _, _ := unstructured.NestedString(out, "metadata", "labels", "app"); v != "other" {
		t.Errorf("ignored label written: %q", v)
	}
	if v, _, _ := unstructured.NestedString(out, "metadata", "annotations", "note"); v != "a" {
		t.Errorf("sibling not corrected: %q", v)
	}
}

func TestIgnoreManagers(t *testing.T) {
	edit := func(live *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(live.Object, int64(3), "spec", "replicas")
	}
	in := scene(t, edit, "kube-controller-manager|Update|"+scaled)
	in.Rules, _ = Compile(&config.Drift{Ignore: []config.DriftIgnore{{Managers: []string{"kube-controller-manager"}}}})
	if r := check(t, in); r.Drifted() {
		t.Errorf("a field a listed manager owns is drift: %+v", r)
	}
}

func TestWholeObjectIgnored(t *testing.T) {
	in := scene(t, func(live *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(live.Object, int64(3), "spec", "replicas")
	}, "kubectl|Update|"+scaled)
	in.Rules, _ = Compile(&config.Drift{Ignore: []config.DriftIgnore{{Paths: []string{""}, Target: &config.DriftTarget{Name: "web", Namespace: "default", LabelSelector: "app=web"}}}})
	if r := check(t, in); !r.Ignored || r.Drifted() || r.Correction != nil {
		t.Errorf("result = %+v, want ignored", r)
	}
	in.Rules, _ = Compile(&config.Drift{Ignore: []config.DriftIgnore{{Paths: []string{""}, Target: &config.DriftTarget{LabelSelector: "app=db"}}}})
	if r := check(t, in); r.Ignored || !r.Drifted() {
		t.Errorf("a rule whose selector does not match ignored the object: %+v", r)
	}
	in.Rules, _ = Compile(&config.Drift{Ignore: []config.DriftIgnore{{Paths: []string{""}, Target: &config.DriftTarget{Group: "core"}}}})
	if r := check(t, in); r.Ignored {
		t.Errorf("group core matched apps: %+v", r)
	}
}

// TestUnstable: a field autox wrote last that differs is a webhook's or
// the server's doing: reported, never corrected.
func TestUnstable(t *testing.T) {
	in := scene(t, func(live *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(live.Object, "mutated-1", "metadata", "annotations", "note")
	})
	r := check(t, in)
	if len(r.Fields) != 1 || r.Fields[0].State != Unstable || r.Correction != nil {
		t.Errorf("result = %+v, want note unstable and no correction", r)
	}
}

// TestContested: a field corrected Limit times within the window is not
// corrected again until the window has passed.
func TestContested(t *testing.T) {
	in := scene(t, func(live *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(live.Object, int64(3), "spec", "replicas")
	}, "hpa|Update|"+scaled)
	for i := 0; i < DefaultLimit; i++ {
		r := check(t, in)
		if r.Correction == nil {
			t.Fatalf("correction %d refused: %+v", i, r)
		}
		in.Memory.Corrected(in.Release, r.Object, r.Correction.Paths, in.Now)
		in.Now = in.Now.Add(10 * time.Minute)
	}
	r := check(t, in)
	if len(r.Fields) != 1 || r.Fields[0].State != Contested || !reflect.DeepEqual(r.Fields[0].Managers, []string{"hpa"}) || r.Correction != nil {
		t.Fatalf("after %d corrections: %+v", DefaultLimit, r)
	}
	in.Now = in.Now.Add(DefaultWindow)
	if r := check(t, in); r.Correction == nil {
		t.Errorf("still contested after the window: %+v", r)
	}
	in.Memory.Corrected(in.Release, r.Object, []string{"/spec/replicas"}, in.Now)
	in.Memory.Forget(in.Release)
	in.Memory.Sweep(in.Now)
	if len(in.Memory.hit) != 0 {
		t.Errorf("memory after Forget: %v", in.Memory.hit)
	}
}

// TestMissingFields: a removed env entry is added back as the manifest
// has it; a removed labels map comes back with the manifest's keys only,
// and an ignored key is not among them.
func TestMissingFields(t *testing.T) {
	in := scene(t, func(live *unstructured.Unstructured) {
		_ = unstructured.SetNestedSlice(live.Object, []interface{}{map[string]interface{}{"name": "B", "value": "2"}, map[string]interface{}{"name": "C", "value": "3"}},
			"spec", "template", "spec", "containers", "0", "env")
		cs, _, _ := unstructured.NestedSlice(live.Object, "spec", "template", "spec", "containers")
		c := cs[0].(map[string]interface{})
		c["env"] = []interface{}{map[string]interface{}{"name": "B", "value": "2"}, map[string]interface{}{"name": "C", "value": "3"}}
		_ = unstructured.SetNestedSlice(live.Object, cs, "spec", "template", "spec", "containers")
		unstructured.RemoveNestedField(live.Object, "metadata", "labels")
	})
	in.Rules, _ = Compile(&config.Drift{Ignore: []config.DriftIgnore{{Paths: []string{"/metadata/labels/app"}}}})
	r := check(t, in)
	var paths []string
	for _, f := range r.Fields {
		paths = append(paths, f.Path)
		if f.State != Drifted || len(f.Managers) != 0 {
			t.Errorf("field %+v", f)
		}
	}
	want := []string{"/metadata/labels/app.kubernetes.io~1managed-by",
		"/spec/template/spec/containers/0/env/0/name", "/spec/template/spec/containers/0/env/0/value"}
	if !reflect.DeepEqual(paths, want) {
		t.Errorf("paths = %v, want %v", paths, want)
	}
	out := patched(t, in, r)
	env, _, _ := unstructured.NestedFieldNoCopy(out, "spec", "template", "spec", "containers")
	got, _ := json.Marshal(env.([]interface{})[0].(map[string]interface{})["env"])
	if string(got) != `[{"name":"B","value":"2"},{"name":"C","value":"3"},{"name":"A","value":"1"}]` {
		t.Errorf("env = %s", got)
	}
	if l, _, _ := unstructured.NestedStringMap(out, "metadata", "labels"); !reflect.DeepEqual(l, map[string]string{"app.kubernetes.io/managed-by": "Helm"}) {
		t.Errorf("labels = %v", l)
	}
}

// TestOverlapsIgnored: an atomic field holding an ignored path is
// reported, never written.
func TestOverlapsIgnored(t *testing.T) {
	in := scene(t, func(live *unstructured.Unstructured) {
		cs, _, _ := unstructured.NestedSlice(live.Object, "spec", "template", "spec", "containers")
		cs[0].(map[string]interface{})["args"] = []interface{}{"x", "b"}
		_ = unstructured.SetNestedSlice(live.Object, cs, "spec", "template", "spec", "containers")
	}, "kubectl|Update|"+applied)
	in.Rules, _ = Compile(&config.Drift{Ignore: []config.DriftIgnore{{Paths: []string{"/spec/template/spec/containers/0/args/1"}}}})
	r := check(t, in)
	if len(r.Fields) != 1 || r.Fields[0].State != Overlaps || r.Correction != nil {
		t.Errorf("result = %+v", r)
	}
}

func TestMissingObject(t *testing.T) {
	in := scene(t, nil)
	in.Live, in.DryRun = nil, nil
	r := check(t, in)
	if !r.Missing || r.Correction == nil || r.Correction.Create == nil || r.Correction.Create.GetName() != "web" || !reflect.DeepEqual(r.Correction.Paths, []string{""}) {
		t.Fatalf("result = %+v", r)
	}
	for i := 0; i < DefaultLimit; i++ {
		in.Memory.Corrected(in.Release, r.Object, r.Correction.Paths, in.Now)
	}
	if r := check(t, in); r.Correction != nil || r.NotCorrected != string(Contested) {
		t.Errorf("re-created %d times: %+v", DefaultLimit, r)
	}
}

// TestNeverCorrected: Jobs, Pods and CRDs, objects of another release and
// opted-out objects are reported only.
func TestNeverCorrected(t *testing.T) {
	job := obj(t, "{apiVersion: batch/v1, kind: Job, metadata: {name: j, namespace: default}, spec: {template: {spec: {containers: [{name: c, image: x}]}}}}")
	in := Input{Release: rel, Desired: job, Mode: config.DriftCorrect, Now: time.Unix(1e9, 0)}
	if r := check(t, in); !r.Missing || r.Correction != nil || r.NotCorrected != ReasonKind {
		t.Errorf("a missing Job: %+v", r)
	}
	for _, kind := range []string{"v1|Pod", "apiextensions.k8s.io/v1|CustomResourceDefinition"} {
		k := strings.Split(kind, "|")
		in.Desired = obj(t, "{apiVersion: "+k[0]+", kind: "+k[1]+", metadata: {name: x}}")
		if r := check(t, in); r.Correction != nil || r.NotCorrected != ReasonKind {
			t.Errorf("%s: %+v", kind, r)
		}
	}

	edit := func(live *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(live.Object, int64(3), "spec", "replicas")
	}
	in = scene(t, edit, "kubectl|Update|"+scaled)
	in.Live.SetAnnotations(map[string]string{"meta.helm.sh/release-name": "other", "meta.helm.sh/release-namespace": "default", "note": "a"})
	if r := check(t, in); r.Correction != nil || r.NotCorrected != ReasonOtherRelease {
		t.Errorf("another release's: %+v", r)
	}
	in = scene(t, edit, "kubectl|Update|"+scaled)
	in.Live.SetAnnotations(map[string]string{"note": "a"})
	if r := check(t, in); r.Correction != nil || r.NotCorrected != ReasonUnmarked {
		t.Errorf("without Helm's marks: %+v", r)
	}
	in = scene(t, edit, "kubectl|Update|"+scaled)
	in.Live.SetAnnotations(map[string]string{"meta.helm.sh/release-name": "web", "meta.helm.sh/release-namespace": "default", "note": "a", "autox.dev/drift": "disabled"})
	if r := check(t, in); r.Correction != nil || r.NotCorrected != ReasonOptedOut || len(r.Fields) != 1 {
		t.Errorf("opted out live: %+v", r)
	}
	in = scene(t, edit, "kubectl|Update|"+scaled)
	in.Desired.SetAnnotations(map[string]string{"autox.dev/drift": "disabled"})
	if r := check(t, in); r.Correction != nil || r.NotCorrected != ReasonOptedOut {
		t.Errorf("opted out in the chart: %+v", r)
	}
}

// TestSecretNoValues: a drifted Secret's report names no value and no key.
func TestSecretNoValues(t *testing.T) {
	const s = "{apiVersion: v1, kind: Secret, metadata: {name: s, namespace: default, annotations: {meta.helm.sh/release-name: web}}, data: {password: c2VjcmV0LXZhbHVl}}"
	const f = `{"f:data":{"f:password":{}}}`
	in := Input{Release: rel, Desired: obj(t, s), DryRun: withFields(t, s, "autox|Apply|"+f), Live: withFields(t, s, "kubectl|Update|"+f),
		Mode: config.DriftWarn, Now: time.Unix(1e9, 0)}
	_ = unstructured.SetNestedField(in.Live.Object, "b3RoZXI=", "data", "password")
	in.Mode = config.DriftCorrect
	r := check(t, in)
	if r.Correction == nil || !strings.Contains(string(r.Correction.Patch), "c2VjcmV0LXZhbHVl") {
		t.Fatalf("no correction of the Secret: %+v", r)
	}
	js, _ := json.Marshal(r)
	if len(r.Fields) != 1 || r.Fields[0].Path != "/data/"+SecretKeyHidden || strings.Contains(string(js), "password") || strings.Contains(string(js), "Correction") || strings.Contains(string(js), "c2VjcmV0LXZhbHVl") || strings.Contains(string(js), "b3RoZXI=") {
		t.Errorf("result %s", js)
	}
}

func TestCheckErrors(t *testing.T) {
	in := scene(t, nil)
	in.DryRun = obj(t, desiredDeploy) // no managed fields
	if _, err := Check(in); err == nil || !strings.Contains(err.Error(), "no managed fields of autox") {
		t.Errorf("err = %v", err)
	}
	in.DryRun = nil
	if _, err := Check(in); err == nil {
		t.Error("no error without a dry run")
	}
}

// TestVerifyRefuses: the invariants hold on the patch itself.
func TestVerifyRefuses(t *testing.T) {
	live := obj(t, desiredDeploy).Object
	rules := []rule{{paths: [][]string{{"spec", "replicas"}}}}
	for name, ops := range map[string][]jsonOp{
		"an ignored path":          {{Op: "replace", Path: "/spec/replicas", Value: 2}},
		"the parent of an ignored": {{Op: "replace", Path: "/spec", Value: map[string]interface{}{}}},
		"a missing field":          {{Op: "replace", Path: "/spec/nothing", Value: 1}},
	} {
		if err := verify(live, ops, rules); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if err := verify(live, []jsonOp{{Op: "add", Path: "/spec/template/spec/containers/0/env/-", Value: map[string]interface{}{"name": "C"}}}, rules); err != nil {
		t.Errorf("an add: %v", err)
	}
}
