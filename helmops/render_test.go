package helmops

import (
	"context"
	"strings"
	"testing"

	"github.com/autox-dev/autox/internal/testenv"
)

// TestRenderWritesNothing: Render gives the manifest an upgrade or an
// install of the new values would apply, Recorded the one a release's
// record holds, and neither writes anything: the audit log shows no write
// in the namespace while they run.
func TestRenderWritesNothing(t *testing.T) {
	ctx := context.Background()
	m := newManager(t, DriverSecret)
	ns := cluster.Namespace(t)
	if _, err := m.Install(ctx, desired(t, ns, "r1", "charts/hooked", map[string]interface{}{"greeting": "greet-old"})); err != nil {
		t.Fatal(err)
	}
	writes := func() int {
		t.Helper()
		ws, err := cluster.Writes(func(w testenv.Write) bool { return w.Namespace == ns })
		if err != nil {
			t.Fatal(err)
		}
		return len(ws)
	}
	before := writes()

	up := desired(t, ns, "r1", "charts/hooked", map[string]interface{}{"greeting": "greet-new"})
	up.Revision = 2
	manifest, err := m.Render(ctx, up, true)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(manifest, "greet-new") || strings.Contains(manifest, "greet-old") {
		t.Errorf("upgrade render:\n%s", manifest)
	}
	recorded, err := m.Recorded(ctx, ns, "r1", 0)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(recorded, "greet-old") {
		t.Errorf("recorded manifest:\n%s", recorded)
	}
	// Hooks are part of both, rendered with the upgrade's revision.
	if !strings.Contains(manifest, `revision: "2"`) || !strings.Contains(recorded, `revision: "1"`) {
		t.Errorf("hooks left out:\nrendered:\n%s\nrecorded:\n%s", manifest, recorded)
	}
	// An install of a release that does not exist, and of one that does
	// (a reinstall's), renders too.
	for _, name := range []string{"r2", "r1"} {
		in := desired(t, ns, name, "charts/hello", map[string]interface{}{"greeting": "fresh"})
		manifest, err := m.Render(ctx, in, false)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(manifest, `greeting: "fresh"`) || !strings.Contains(manifest, "name: "+name) {
			t.Errorf("install render of %s:\n%s", name, manifest)
		}
	}
	// An upgrade of a release that does not exist fails, writing nothing.
	if _, err := m.Render(ctx, desired(t, ns, "r3", "charts/hello", nil), true); err == nil {
		t.Error("the upgrade of a missing release renders")
	}
	if after := writes(); after != before {
		t.Errorf("%d writes in the namespace while rendering", after-before)
	}
}
