package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/autox-dev/autox/internal/manifestdiff"
	"github.com/autox-dev/autox/internal/redact"
	"github.com/autox-dev/autox/triggers/plan"
)

// TestMaskLines: a secret that ends in a newline (a Secret key's whole
// content) is masked without taking the diff's line end with it.
func TestMaskLines(t *testing.T) {
	hide := redact.Build(nil, []map[string]interface{}{{"v": "abcd-1234\n"}})
	got := maskLines(hide, "-  token: abcd-1234\n+  greeting: hi\n")
	if got != "-  token: ***\n+  greeting: hi\n" {
		t.Errorf("masked %q", got)
	}
}

// TestStepsJSONDiffs: with --diff, -o json keeps each step's fields as
// without it and adds "diff" only to the steps that have one.
func TestStepsJSONDiffs(t *testing.T) {
	steps := []plan.Step{{Action: plan.ActionUpgrade, Spec: "s", Release: "r"}, {Action: plan.ActionNone, Spec: "s", Release: "q"}}
	out, err := stepsJSON(planView{steps: steps, shards: 1, diff: true, diffs: map[int]*releaseDiff{0: {Changes: []manifestdiff.Change{{Object: "v1 ConfigMap r", Change: "changed", Diff: "-a\n+b\n"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := json.Marshal(steps[0])
	if !strings.HasPrefix(string(out[0]), strings.TrimSuffix(string(plain), "}")+`,"diff":{"changes":[{"object":"v1 ConfigMap r"`) {
		t.Errorf("step with a diff: %s", out[0])
	}
	plain, _ = json.Marshal(steps[1])
	if string(out[1]) != string(plain) {
		t.Errorf("step without a diff: %s, want %s", out[1], plain)
	}
}
