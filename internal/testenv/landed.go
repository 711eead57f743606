package testenv

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"syscall"
)

// Upgrade tests run autox as it was at earlier landed commits. The commits
// come from a file in the repository; each is built from the repository's
// own history (a clean clone has it) and cached outside the repository by
// its full hash, so only the first run of a new commit pays for the build.

// LandedVersion is one earlier landed commit to test upgrades against.
type LandedVersion struct {
	Commit string // as written in the file: a hash or an abbreviation
	Note   string // the line's comment
}

// ReadLandedVersions reads a versions file: one commit per line, a comment
// after `#`, blank and comment-only lines skipped.
func ReadLandedVersions(path string) ([]LandedVersion, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read the landed versions: %w", err)
	}
	defer f.Close()
	var out []LandedVersion
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line, note, _ := strings.Cut(sc.Text(), "#")
		fields := strings.Fields(line)
		switch {
		case len(fields) == 0:
			continue
		case len(fields) > 1 || !hexCommit.MatchString(fields[0]):
			return nil, fmt.Errorf("%s:%d: want one commit hash (7 to 40 hex digits) and an optional # comment, got %q", path, n, sc.Text())
		}
		out = append(out, LandedVersion{Commit: fields[0], Note: strings.TrimSpace(note)})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("cannot read the landed versions: %w", err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s lists no commit", path)
	}
	return out, nil
}

var hexCommit = regexp.MustCompile(`^[0-9a-f]{7,40}$`)

// CacheDir is where tests keep what they build outside the repository:
// $AUTOX_CACHE_DIR, else the user cache directory + /autox (as
// scripts/controlplane.sh).
func CacheDir() (string, error) {
	if d := os.Getenv("AUTOX_CACHE_DIR"); d != "" {
		return d, nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no cache directory (set AUTOX_CACHE_DIR): %w", err)
	}
	return filepath.Join(d, "autox"), nil
}

// landedBuild names the build flags of BuildAutoxAt; bump it when they change
// so that cached binaries built the old way are not reused.
const landedBuild = "build1"

// BuildAutoxAt returns a plain (no -race) autox binary built from commit of
// the repository's history, and the commit's full hash, which is the
// binary's version stamp. The binary is cached under CacheDir()/landed by that hash: a cached one is
// returned at once. Test binaries of several packages may ask at the same
// time: one builds while the others wait on a lock, and a binary appears in
// the cache by a rename, whole or not at all.
func BuildAutoxAt(commit string) (bin, full string, err error) {
	root, err := ModuleRoot()
	if err != nil {
		return "", "", err
	}
	full, err = resolveCommit(root, commit)
	if err != nil {
		return "", "", err
	}
	cache, err := CacheDir()
	if err != nil {
		return "", "", err
	}
	bin = landedBinary(cache, full)
	dir := filepath.Dir(bin)
	if isExecutable(bin) {
		return bin, full, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", fmt.Errorf("cannot create the build cache: %w", err)
	}
	unlock, err := lockFile(filepath.Join(dir, ".lock"))
	if err != nil {
		return "", "", err
	}
	defer unlock()
	if isExecutable(bin) { // built by whoever held the lock before us
		return bin, full, nil
	}
	src, err := os.MkdirTemp("", "autox-landed-")
	if err != nil {
		return "", "", err
	}
	defer os.RemoveAll(src)
	if err := extractCommit(root, full, src); err != nil {
		return "", "", err
	}
	tmp := filepath.Join(dir, fmt.Sprintf("autox.tmp.%d", os.Getpid()))
	defer os.Remove(tmp)
	cmd := exec.Command("go", "build", "-buildvcs=false", "-ldflags", "-X main.version="+full, "-o", tmp, ".")
	cmd.Dir = src
	// The old commit is a module of its own: no workspace of the checkout.
	cmd.Env = append(os.Environ(), "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("cannot build autox at commit %s: go build: %w\n%s", full, err, out)
	}
	if err := os.Rename(tmp, bin); err != nil {
		return "", "", fmt.Errorf("cannot put the build of %s in the cache: %w", full, err)
	}
	return bin, full, nil
}

// landedBinary is where the cache under cache keeps the build of commit full.
func landedBinary(cache, full string) string {
	return filepath.Join(cache, "landed", fmt.Sprintf("autox-%s-%s-%s-%s", full, runtime.GOOS, runtime.GOARCH, landedBuild), "autox")
}

// resolveCommit returns the full hash of commit, or an error that says what
// to do when the clone does not have it.
func resolveCommit(root, commit string) (string, error) {
	out, err := exec.Command("git", "-C", root, "rev-parse", "--verify", "--quiet", commit+"^{commit}").Output()
	if err == nil {
		return strings.TrimSpace(string(out)), nil
	}
	hint := "fetch the history that has it (git fetch origin)"
	if s, err := exec.Command("git", "-C", root, "rev-parse", "--is-shallow-repository").Output(); err == nil && strings.TrimSpace(string(s)) == "true" {
		hint = "this is a shallow clone: run git fetch --unshallow"
	} else if err != nil {
		hint = "the tests need a git clone of autox with its history"
	}
	return "", fmt.Errorf("commit %s is not in the git history of %s; %s", commit, root, hint)
}

// extractCommit writes the tree of commit into dir, as git archive has it.
func extractCommit(root, commit, dir string) error {
	tarball := filepath.Join(dir, "src.tar")
	if out, err := exec.Command("git", "-C", root, "archive", "--format=tar", "-o", tarball, commit).CombinedOutput(); err != nil {
		return fmt.Errorf("cannot export commit %s with git archive: %w\n%s", commit, err, out)
	}
	if out, err := exec.Command("tar", "-xf", tarball, "-C", dir).CombinedOutput(); err != nil {
		return fmt.Errorf("cannot unpack commit %s: %w\n%s", commit, err, out)
	}
	return os.Remove(tarball)
}

// lockFile takes an exclusive flock on path, waiting for it, and returns
// its release. The lock goes with the process, so a killed build frees it.
func lockFile(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("cannot open the build lock: %w", err)
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("cannot lock %s: %w", path, err)
	}
	return func() { f.Close() }, nil
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// RunFlags returns the long flag names `bin run --help` lists: what that
// build of autox accepts, so a test passes an old build only flags it knows.
func RunFlags(bin string) (map[string]bool, error) {
	out, err := exec.Command(bin, "run", "--help").CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("%s run --help: %w\n%s", bin, err, out)
	}
	flags := map[string]bool{}
	for _, m := range helpFlag.FindAllStringSubmatch(string(out), -1) {
		flags[m[1]] = true
	}
	return flags, nil
}

// helpFlag matches a flag line of cobra's help: "  -h, --help" or "      --config string".
var helpFlag = regexp.MustCompile(`(?m)^\s+(?:-\w, )?--([a-z0-9][a-z0-9-]*)`)
