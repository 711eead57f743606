package helmops

import (
	"bytes"
	"context"
	"log/slog"
	"testing"
	"time"

	chartcommon "helm.sh/helm/v4/pkg/chart/common"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/release/common"
	release "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage/driver"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/autox-dev/autox/internal/format"
)

// The records autox writes are those Helm's secret driver writes, byte for
// byte but for the time label's value: Helm 4's fields (the apply method,
// times written only when set, a hook's last run, chart file times)
// included.
func TestSecretRecordsWriteWhatHelmWrites(t *testing.T) {
	ctx := context.Background()
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	rel := &release.Release{Name: "r", Namespace: "ns", Version: 1, Labels: map[string]string{format.LabelSpec: "s", format.LabelReleaseSpec: "rs"},
		Chart: &chart.Chart{Metadata: &chart.Metadata{Name: "hello", Version: "0.1.0"},
			Templates: []*chartcommon.File{{Name: "templates/cm.yaml", ModTime: at, Data: []byte("kind: ConfigMap\n")}}},
		Config: map[string]interface{}{"a": "b"}, Manifest: "kind: ConfigMap\n", ApplyMethod: string(release.ApplyMethodClientSideApply),
		Hooks: []*release.Hook{{Name: "job", Kind: "Job", Path: "templates/job.yaml", Manifest: "kind: Job\n",
			Events: []release.HookEvent{release.HookPreUpgrade}, LastRun: release.HookExecution{StartedAt: at, Phase: release.HookPhaseSucceeded}}},
		Info: &release.Info{FirstDeployed: at, LastDeployed: at, Status: common.StatusPendingInstall, Description: "Initial install underway"}}
	helmClient, ourClient := fake.NewSimpleClientset(), fake.NewSimpleClientset()
	helm := driver.NewSecrets(helmClient.CoreV1().Secrets("ns"))
	ours := newSecretRecords(ourClient.CoreV1().Secrets("ns"), slog.DiscardHandler)
	for _, step := range []struct {
		write     func(d driver.Driver) error
		timeLabel string
	}{
		{func(d driver.Driver) error { return d.Create("sh.helm.release.v1.r.v1", rel) }, "createdAt"},
		{func(d driver.Driver) error {
			rel.Info.Status = common.StatusDeployed
			return d.Update("sh.helm.release.v1.r.v1", rel)
		}, "modifiedAt"},
	} {
		if err := step.write(helm); err != nil {
			t.Fatal(err)
		}
		if err := step.write(ours); err != nil {
			t.Fatal(err)
		}
		want, err := helmClient.CoreV1().Secrets("ns").Get(ctx, "sh.helm.release.v1.r.v1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got, err := ourClient.CoreV1().Secrets("ns").Get(ctx, "sh.helm.release.v1.r.v1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Labels[step.timeLabel] == "" {
			t.Errorf("no %s label: %v", step.timeLabel, got.Labels)
		}
		got.Labels[step.timeLabel] = want.Labels[step.timeLabel]
		if len(got.Labels) != len(want.Labels) || got.Type != want.Type || !bytes.Equal(got.Data["release"], want.Data["release"]) {
			t.Errorf("record differs from Helm's:\n got labels %v type %s\nwant labels %v type %s", got.Labels, got.Type, want.Labels, want.Type)
		}
		for k, v := range want.Labels {
			if got.Labels[k] != v {
				t.Errorf("label %s = %q, Helm writes %q", k, got.Labels[k], v)
			}
		}
		stored, err := ours.Get("sh.helm.release.v1.r.v1")
		if err != nil {
			t.Fatal(err)
		}
		back, err := asV1(stored)
		if err != nil || back.Info.Status != rel.Info.Status || back.Config["a"] != "b" || back.ApplyMethod != "csa" {
			t.Errorf("read back: %+v, %v", back, err)
		}
	}
	if err := ours.Create("sh.helm.release.v1.r.v1", rel); err != driver.ErrReleaseExists {
		t.Errorf("Create of an existing record = %v, want ErrReleaseExists", err)
	}
}
