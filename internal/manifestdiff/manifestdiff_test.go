package manifestdiff

import (
	"strings"
	"testing"
)

const deployment = `---
# Source: web/templates/deployment.yaml
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: team
spec:
  replicas: %s
  template:
    spec:
      containers:
      - name: web
        image: nginx
`

const secret = `---
# Source: web/templates/secret.yaml
apiVersion: v1
kind: Secret
metadata:
  name: creds
  namespace: team
data:
  password: %s
stringData:
  token: plain-token-value
`

func manifest(parts ...string) string { return strings.Join(parts, "\n") }

func TestCompare(t *testing.T) {
	cm := "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  mode: fast\n"
	cases := []struct {
		name     string
		from, to string
		want     []string // object and change of each Change, in order
		shows    []string // text some diff must contain
		hides    []string // text no diff may contain
	}{
		{name: "equal", from: manifest(strings.Replace(deployment, "%s", "1", 1), cm), to: manifest(strings.Replace(deployment, "%s", "1", 1), cm)},
		{name: "only comments and key order differ",
			from: "# Source: x\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  mode: fast\n",
			to:   "---\nkind: ConfigMap\ndata: {mode: fast}\nmetadata: {name: settings}\napiVersion: v1\n---\n# Source: empty.yaml\n"},
		{name: "changed value", from: strings.Replace(deployment, "%s", "1", 1), to: strings.Replace(deployment, "%s", "3", 1),
			want:  []string{"apps/v1 Deployment team/web changed"},
			shows: []string{"-  replicas: 1\n", "+  replicas: 3\n", "--- a/apps/v1 Deployment team/web\n", "+++ b/apps/v1 Deployment team/web\n"}},
		{name: "added and removed", from: cm, to: strings.Replace(deployment, "%s", "1", 1),
			want:  []string{"apps/v1 Deployment team/web added", "v1 ConfigMap settings removed"},
			shows: []string{"--- /dev/null\n", "+kind: Deployment\n", "-kind: ConfigMap\n", "+++ /dev/null\n"}},
		{name: "secret added", from: "", to: strings.Replace(secret, "%s", "c2VjcmV0LXZhbHVl", 1),
			want:  []string{"v1 Secret team/creds added"},
			shows: []string{"+data: <redacted>\n", "+stringData: <redacted>\n"},
			hides: []string{"c2VjcmV0LXZhbHVl", "plain-token-value", "password", "token"}},
		{name: "secret data changed", from: strings.Replace(secret, "%s", "b2xkLXZhbHVl", 1), to: strings.Replace(secret, "%s", "bmV3LXZhbHVl", 1),
			want:  []string{"v1 Secret team/creds changed"},
			shows: []string{"-data: <redacted>\n", "+data: <redacted> (changed)\n"},
			hides: []string{"b2xkLXZhbHVl", "bmV3LXZhbHVl", "plain-token-value", "password"}},
		{name: "secret removed", from: strings.Replace(secret, "%s", "b2xkLXZhbHVl", 1), to: "",
			want:  []string{"v1 Secret team/creds removed"},
			shows: []string{"-data: <redacted>\n"},
			hides: []string{"b2xkLXZhbHVl", "plain-token-value"}},
		{name: "secret unchanged data, changed label",
			from:  strings.Replace(secret, "%s", "b2xkLXZhbHVl", 1),
			to:    strings.Replace(strings.Replace(secret, "%s", "b2xkLXZhbHVl", 1), "  name: creds\n", "  name: creds\n  labels: {tier: db}\n", 1),
			want:  []string{"v1 Secret team/creds changed"},
			shows: []string{" data: <redacted>\n", "+  labels:\n"},
			hides: []string{"(changed)", "b2xkLXZhbHVl"}},
		{name: "duplicate objects both kept", from: "", to: manifest(cm, cm),
			want: []string{"v1 ConfigMap settings added", "v1 ConfigMap settings #2 added"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			changes, err := Compare(c.from, c.to)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			var all strings.Builder
			for _, ch := range changes {
				got = append(got, ch.Object+" "+ch.Change)
				all.WriteString(ch.Diff)
			}
			if strings.Join(got, "|") != strings.Join(c.want, "|") {
				t.Fatalf("changes %q, want %q\n%s", got, c.want, all.String())
			}
			for _, s := range c.shows {
				if !strings.Contains(all.String(), s) {
					t.Errorf("diff lacks %q:\n%s", s, all.String())
				}
			}
			for _, s := range c.hides {
				if strings.Contains(all.String(), s) {
					t.Errorf("diff shows %q:\n%s", s, all.String())
				}
			}
		})
	}
}

func TestCompareInvalidYAMLQuotesNothing(t *testing.T) {
	_, err := Compare("", "apiVersion: v1\nkind: Secret\ndata: {password: [unclosed-secret-text\n")
	if err == nil {
		t.Fatal("no error for a document that is not YAML")
	}
	if strings.Contains(err.Error(), "unclosed-secret-text") {
		t.Fatalf("the error quotes the document: %v", err)
	}
}
