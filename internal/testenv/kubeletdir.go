package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// KubeletDir lays out a directory the way the kubelet lays out a ConfigMap
// volume: FILE -> ..data/FILE, ..data -> ..<timestamp>/, and updates it the
// way the kubelet's atomic writer does.
type KubeletDir struct {
	t    testing.TB
	Dir  string
	file string
	n    int
}

// NewKubeletDir creates the layout with one file holding content.
func NewKubeletDir(t testing.TB, file, content string) *KubeletDir {
	t.Helper()
	k := &KubeletDir{t: t, Dir: t.TempDir(), file: file}
	k.Update(content)
	if err := os.Symlink(filepath.Join("..data", file), k.Path()); err != nil {
		t.Fatal(err)
	}
	return k
}

// Path is the visible file, the one autox is pointed at.
func (k *KubeletDir) Path() string { return filepath.Join(k.Dir, k.file) }

// Update writes a new timestamped directory, points a ..data_tmp symlink at
// it, renames that over ..data and removes the old directory.
func (k *KubeletDir) Update(content string) {
	k.t.Helper()
	k.n++
	ts := fmt.Sprintf("..2026_12_01_00_00_%02d.%d", k.n%60, k.n)
	check := func(err error) {
		if err != nil {
			k.t.Fatal(err)
		}
	}
	check(os.Mkdir(filepath.Join(k.Dir, ts), 0o755))
	check(os.WriteFile(filepath.Join(k.Dir, ts, k.file), []byte(content), 0o644))
	old, _ := os.Readlink(filepath.Join(k.Dir, "..data"))
	check(os.Symlink(ts, filepath.Join(k.Dir, "..data_tmp")))
	check(os.Rename(filepath.Join(k.Dir, "..data_tmp"), filepath.Join(k.Dir, "..data")))
	if old != "" {
		check(os.RemoveAll(filepath.Join(k.Dir, old)))
	}
}
