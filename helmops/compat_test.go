package helmops

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	chartcommon "helm.sh/helm/v4/pkg/chart/common"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/release/common"
	release "helm.sh/helm/v4/pkg/release/v1"

	"github.com/autox-dev/autox/config"
)

// TestHelm3RecordDecodes: a record Helm 3's secret driver wrote (v3.22.0,
// the SDK of autox before Helm 4; frozen in testdata/records, since that
// module is gone from go.mod) decodes as Helm 4 reads it, with the empty
// times Helm 3 wrote ("deleted":"", a hook's "started_at":"") as zero
// times and no apply method (client-side, for Helm 4's "auto" and autox).
func TestHelm3RecordDecodes(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(chartsDir(t), "records", "helm-v3.22.0.release"))
	if err != nil {
		t.Fatal(err)
	}
	rel, err := decodeRecord(strings.TrimSpace(string(data)))
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	if rel.Name != "demo" || rel.Version != 1 || rel.Info == nil || rel.Info.Status != common.StatusDeployed ||
		!rel.Info.FirstDeployed.Equal(at) || !rel.Info.LastDeployed.Equal(at) || !rel.Info.Deleted.IsZero() ||
		rel.Chart == nil || rel.Chart.Metadata.Name != "hooked" || rel.Config["greeting"] != "hi" || rel.ApplyMethod != "" {
		t.Fatalf("the Helm 3 record reads as %+v (info %+v)", rel, rel.Info)
	}
	if len(rel.Hooks) != 1 || rel.Hooks[0].LastRun.Phase != release.HookPhaseSucceeded || !rel.Hooks[0].LastRun.StartedAt.IsZero() {
		t.Fatalf("its hook reads as %+v", rel.Hooks)
	}
	if serverSide(config.Policy{}, rel.ApplyMethod) {
		t.Error("an upgrade of a release Helm 3 wrote would apply server-side")
	}
}

// helm3Release is the JSON shape Helm 3's release.Release has (v3.22.0,
// pkg/release and pkg/time: times are strings, "" for none), what an autox
// built on Helm 3 decodes a record into with encoding/json.
type helm3Release struct {
	Name string `json:"name"`
	Info *struct {
		FirstDeployed helm3Time `json:"first_deployed"`
		LastDeployed  helm3Time `json:"last_deployed"`
		Deleted       helm3Time `json:"deleted"`
		Description   string    `json:"description"`
		Status        string    `json:"status"`
	} `json:"info"`
	Chart *struct {
		Metadata *struct{ Name, Version string } `json:"metadata"`
		Files    []struct {
			Name string `json:"name"`
			Data []byte `json:"data"`
		} `json:"files"`
		Templates []struct {
			Name string `json:"name"`
			Data []byte `json:"data"`
		} `json:"templates"`
		Values map[string]interface{} `json:"values"`
	} `json:"chart"`
	Config   map[string]interface{} `json:"config"`
	Manifest string                 `json:"manifest"`
	Hooks    []struct {
		Name    string `json:"name"`
		LastRun struct {
			StartedAt   helm3Time `json:"started_at"`
			CompletedAt helm3Time `json:"completed_at"`
			Phase       string    `json:"phase"`
		} `json:"last_run"`
	} `json:"hooks"`
	Version   int    `json:"version"`
	Namespace string `json:"namespace"`
}

// helm3Time decodes as Helm 3's pkg/time.Time does: "" or RFC 3339.
type helm3Time struct{ time.Time }

func (t *helm3Time) UnmarshalJSON(b []byte) error {
	if string(b) == `""` || string(b) == "null" {
		return nil
	}
	return json.Unmarshal(b, &t.Time)
}

// TestHelm4RecordDecodesForHelm3: what autox writes on Helm 4 (the fields
// Helm 4 adds: the apply method, the chart's schemamodtime and its files'
// modtime, a hook's last run without times; zero times left out) decodes
// into the shape an autox on Helm 3 reads, with nothing lost that it uses.
func TestHelm4RecordDecodesForHelm3(t *testing.T) {
	at := time.Date(2026, 12, 1, 10, 1, 0, 0, time.UTC)
	v4 := &release.Release{Name: "demo", Namespace: "ns", Version: 2, ApplyMethod: string(release.ApplyMethodClientSideApply),
		Chart: &chart.Chart{Metadata: &chart.Metadata{Name: "hooked", Version: "0.1.0"},
			Templates: []*chartcommon.File{{Name: "templates/objects.yaml", ModTime: at, Data: []byte("kind: ConfigMap\n")}}},
		Config: map[string]interface{}{"greeting": "hi"}, Manifest: "kind: ConfigMap\n",
		Hooks: []*release.Hook{{Name: "demo-hook", Events: []release.HookEvent{release.HookPostUpgrade}}},
		Info:  &release.Info{FirstDeployed: at, LastDeployed: at, Status: common.StatusDeployed, Description: "Upgrade complete"}}
	data, err := encodeRecord(v4)
	if err != nil {
		t.Fatal(err)
	}
	js := decodedJSON(t, data)
	for _, field := range []string{`"apply_method":"csa"`, `"schemamodtime":`, `"modtime":`, `"last_run":{"phase":""}`} {
		if !strings.Contains(js, field) {
			t.Errorf("the record has no %s: the test no longer covers what Helm 4 adds:\n%s", field, js)
		}
	}
	var old helm3Release
	if err := json.Unmarshal([]byte(js), &old); err != nil {
		t.Fatalf("an autox on Helm 3 cannot decode a record Helm 4 wrote: %v", err)
	}
	if old.Name != "demo" || old.Version != 2 || old.Info == nil || old.Info.Status != "deployed" || !old.Info.LastDeployed.Equal(at) ||
		!old.Info.Deleted.IsZero() || old.Chart == nil || old.Chart.Metadata.Name != "hooked" || old.Chart.Metadata.Version != "0.1.0" ||
		old.Config["greeting"] != "hi" || len(old.Hooks) != 1 || len(old.Chart.Templates) != 1 {
		t.Errorf("read as Helm 3 reads it: %+v", old)
	}
}

// decodedJSON is the JSON of a record's data (base64 of gzip).
func decodedJSON(t *testing.T, data []byte) string {
	t.Helper()
	rel, err := decodeRecord(string(data))
	if err != nil {
		t.Fatal(err)
	}
	js, err := json.Marshal(rel)
	if err != nil {
		t.Fatal(err)
	}
	return string(js)
}
