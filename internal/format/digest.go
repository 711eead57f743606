package format

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
)

// Digest identifies what a release should run: chart name, chart version and
// the exact values (the merged values, `autox` key included). autox stores
// it as LabelDigest so a pass can compare from record metadata alone. It is
// the hex of the first 16 bytes of the sha256 of the JSON of
// {"Chart":name,"Version":version,"Values":values}; JSON encoding sorts map
// keys, so equal values give equal digests.
func Digest(chartName, chartVersion string, values map[string]interface{}) (string, error) {
	b, err := json.Marshal(struct {
		Chart, Version string
		Values         map[string]interface{}
	}{chartName, chartVersion, values})
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16]), nil
}
