package format

import "testing"

func TestInstanceOf(t *testing.T) {
	for _, tc := range []struct {
		name         string
		labels       map[string]string
		want         string
		managed      bool
		ownedByAutox bool
	}{
		{"both labels and instance", map[string]string{LabelSpec: "s", LabelReleaseSpec: "r", LabelInstance: "blue"}, "blue", true, false},
		{"both labels, no instance", map[string]string{LabelSpec: "s", LabelReleaseSpec: "r"}, DefaultInstance, true, true},
		{"empty instance label", map[string]string{LabelSpec: "s", LabelReleaseSpec: "r", LabelInstance: ""}, DefaultInstance, true, true},
		{"spec only", map[string]string{LabelSpec: "s", LabelInstance: "autox"}, "", false, false},
		{"release spec only", map[string]string{LabelReleaseSpec: "r"}, "", false, false},
		{"empty release spec", map[string]string{LabelSpec: "s", LabelReleaseSpec: ""}, "", false, false},
		{"not autox's", map[string]string{"app": "x"}, "", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := InstanceOf(tc.labels); got != tc.want {
				t.Errorf("InstanceOf = %q, want %q", got, tc.want)
			}
			r := &Release{Spec: tc.labels[LabelSpec], ReleaseSpec: tc.labels[LabelReleaseSpec], Instance: InstanceOf(tc.labels)}
			if r.Managed() != tc.managed || r.OwnedBy(DefaultInstance) != tc.ownedByAutox {
				t.Errorf("Managed = %v, OwnedBy(autox) = %v; want %v, %v", r.Managed(), r.OwnedBy(DefaultInstance), tc.managed, tc.ownedByAutox)
			}
		})
	}
}
