package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestReadLandedVersions(t *testing.T) {
	for _, tc := range []struct {
		name, file string
		want       []LandedVersion
		wantErr    string
	}{
		{"commits and comments", "# header\n\n7924180  # first wave\nda701ab48b44b7bebbedea49d535c626eed032cc\n",
			[]LandedVersion{{"7924180", "first wave"}, {"da701ab48b44b7bebbedea49d535c626eed032cc", ""}}, ""},
		{"two words", "7924180 da701ab\n", nil, ":1: want one commit hash"},
		{"not a hash", "# x\nmain # a branch moves\n", nil, ":2: want one commit hash"},
		{"too short", "79241\n", nil, ":1: want one commit hash"},
		{"empty", "# nothing yet\n", nil, "lists no commit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "versions.txt")
			if err := os.WriteFile(path, []byte(tc.file), 0o600); err != nil {
				t.Fatal(err)
			}
			got, err := ReadLandedVersions(path)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

// TestLandedVersionsInHistory: every commit of the repository's list is in
// this clone's history (a shallow clone fails here, saying so).
func TestLandedVersionsInHistory(t *testing.T) {
	root, err := ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	versions, err := ReadLandedVersions(filepath.Join(root, "testdata", "upgrade", "versions.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range versions {
		full, err := resolveCommit(root, v.Commit)
		if err != nil || !strings.HasPrefix(full, v.Commit) || len(full) != 40 {
			t.Errorf("%s: %q, %v", v.Commit, full, err)
		}
	}
	if _, err := resolveCommit(root, "0000000"); err == nil || !strings.Contains(err.Error(), "is not in the git history") {
		t.Errorf("a missing commit: %v", err)
	}
}

// TestBuildAutoxAtUsesTheCache: a binary cached under the full hash of the
// commit is used as it is, whatever abbreviation names the commit.
func TestBuildAutoxAtUsesTheCache(t *testing.T) {
	root, err := ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatal(err)
	}
	head := strings.TrimSpace(string(out))
	cache := t.TempDir()
	t.Setenv("AUTOX_CACHE_DIR", cache)
	cached := landedBinary(cache, head)
	if err := os.MkdirAll(filepath.Dir(cached), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cached, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	bin, full, err := BuildAutoxAt(head[:9])
	if err != nil || bin != cached || full != head {
		t.Fatalf("BuildAutoxAt(%s) = %q, %q, %v; want the cached %s", head[:9], bin, full, err, cached)
	}
}

// TestBuildLockExcludesOtherProcesses: while one test binary holds a
// commit's build lock, another process cannot take it (flock(1) -n fails),
// and it can once the lock is released.
func TestBuildLockExcludesOtherProcesses(t *testing.T) {
	if _, err := exec.LookPath("flock"); err != nil {
		t.Skip("no flock command")
	}
	path := filepath.Join(t.TempDir(), ".lock")
	unlock, err := lockFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := exec.Command("flock", "-n", path, "true").Run(); err == nil {
		t.Fatal("another process took the build lock while it was held")
	}
	unlock()
	if out, err := exec.Command("flock", "-n", path, "true").CombinedOutput(); err != nil {
		t.Fatalf("the released build lock cannot be taken: %v %s", err, out)
	}
}

func TestRunFlags(t *testing.T) {
	help := filepath.Join(t.TempDir(), "help")
	script := "#!/bin/sh\ncat <<'EOF'\nUsage:\n  autox run [flags]\n\nFlags:\n      --config string   the file\n  -h, --help   help for run\n" +
		"      --leader-election-lease-duration duration   how long (default 15s)\n\nsee --not-a-flag here\nEOF\n"
	if err := os.WriteFile(help, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	got, err := RunFlags(help)
	want := map[string]bool{"config": true, "help": true, "leader-election-lease-duration": true}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("RunFlags = %v, %v; want %v", got, err, want)
	}
}
