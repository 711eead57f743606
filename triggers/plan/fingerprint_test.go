package plan

import (
	"testing"

	"github.com/autox-dev/autox/config"
)

// TestFingerprintIgnoresDrift: the drift policy is not how an operation
// runs: setting it starts no new remediation count.
func TestFingerprintIgnoresDrift(t *testing.T) {
	rs := &config.ReleaseSpec{Timeout: "1m"}
	with := &config.ReleaseSpec{Timeout: "1m", Drift: &config.Drift{Mode: config.DriftCorrect, Ignore: []config.DriftIgnore{{Paths: []string{"/spec/replicas"}}}}}
	if a, b := Fingerprint("sha256:x", rs), Fingerprint("sha256:x", with); a != b {
		t.Errorf("fingerprint %s with drift, %s without", b, a)
	}
}
