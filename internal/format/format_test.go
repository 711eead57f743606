package format

import (
	"strings"
	"testing"
)

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
			r := &Release{Record: Record{Spec: tc.labels[LabelSpec], ReleaseSpec: tc.labels[LabelReleaseSpec], Instance: InstanceOf(tc.labels)}}
			if r.Managed() != tc.managed || r.OwnedBy(DefaultInstance) != tc.ownedByAutox {
				t.Errorf("Managed = %v, OwnedBy(autox) = %v; want %v, %v", r.Managed(), r.OwnedBy(DefaultInstance), tc.managed, tc.ownedByAutox)
			}
		})
	}
}

func TestObjectLabel(t *testing.T) {
	short := "web"
	if got := ObjectLabel(short); got != short || !ObjectLabelIsName(got) {
		t.Errorf("ObjectLabel(%q) = %q (is name %v)", short, got, ObjectLabelIsName(got))
	}
	long := strings.Repeat("a", 60) + "-" + strings.Repeat("b", 40)
	got := ObjectLabel(long)
	if len(got) != 63 || !strings.HasPrefix(got, long[:50]+"-") || got != ObjectLabel(long) {
		t.Errorf("ObjectLabel(long) = %q: want 63 characters, the first 50 of the name, '-', a stable hash", got)
	}
	if ObjectLabelIsName(got) {
		t.Errorf("a hashed label %q is taken for a whole name", got)
	}
	if other := ObjectLabel(long + "x"); other == got {
		t.Errorf("two long names share the label %q", got)
	}
	exact := strings.Repeat("c", 63)
	if ObjectLabel(exact) != exact {
		t.Errorf("a 63-character name must be its own label")
	}
}

func TestTriggerObject(t *testing.T) {
	long := strings.Repeat("y", 80)
	rel := &Release{Record: Record{ObjectNamespace: "ns", ObjectName: ObjectLabel(long)},
		Values: map[string]interface{}{"autox": map[string]interface{}{"trigger": map[string]interface{}{"name": long}}}}
	if got := rel.TriggerObject(); got != (Object{Namespace: "ns", Name: long}) {
		t.Errorf("TriggerObject = %v, want the whole name from the values", got)
	}
	rel.Values["autox"].(map[string]interface{})["trigger"].(map[string]interface{})["name"] = "forged"
	if got := rel.TriggerObject(); got.Name != ObjectLabel(long) {
		t.Errorf("values that do not give the label back were believed: %v", got)
	}
}
