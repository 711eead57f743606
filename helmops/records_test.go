package helmops

import (
	"bytes"
	"context"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/autox-dev/autox/internal/format"
)

// The records autox writes are those Helm's secret driver writes, byte for
// byte but for the time label's value.
func TestSecretRecordsWriteWhatHelmWrites(t *testing.T) {
	ctx := context.Background()
	rel := &release.Release{Name: "r", Namespace: "ns", Version: 1, Labels: map[string]string{format.LabelSpec: "s", format.LabelReleaseSpec: "rs"},
		Chart: &chart.Chart{Metadata: &chart.Metadata{Name: "hello", Version: "0.1.0"}}, Config: map[string]interface{}{"a": "b"},
		Manifest: "kind: ConfigMap\n", Info: &release.Info{Status: release.StatusPendingInstall, Description: "Initial install underway"}}
	helmClient, ourClient := fake.NewSimpleClientset(), fake.NewSimpleClientset()
	helm := driver.NewSecrets(helmClient.CoreV1().Secrets("ns"))
	ours := newSecretRecords(ourClient.CoreV1().Secrets("ns"), func(string, ...interface{}) {})
	for _, step := range []struct {
		write     func(d driver.Driver) error
		timeLabel string
	}{
		{func(d driver.Driver) error { return d.Create("sh.helm.release.v1.r.v1", rel) }, "createdAt"},
		{func(d driver.Driver) error {
			rel.Info.Status = release.StatusDeployed
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
		back, err := ours.Get("sh.helm.release.v1.r.v1")
		if err != nil || back.Info.Status != rel.Info.Status || back.Config["a"] != "b" {
			t.Errorf("read back: %+v, %v", back, err)
		}
	}
	if err := ours.Create("sh.helm.release.v1.r.v1", rel); err != driver.ErrReleaseExists {
		t.Errorf("Create of an existing record = %v, want ErrReleaseExists", err)
	}
}
