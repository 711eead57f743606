package watch

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
)

// LooksLikeSubPath reports whether path is itself a mount point, which is how
// a volume mounted with subPath appears inside a container. The kubelet never
// updates subPath mounts, so such a config never reloads.
func LooksLikeSubPath(path string) bool {
	return isMountPoint(path, "/proc/self/mountinfo")
}

func isMountPoint(path, mountinfo string) bool {
	abs, err := filepath.Abs(path)
	if err != nil {
		return false
	}
	f, err := os.Open(mountinfo)
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// Field 5 is the mount point, with spaces and such escaped as octal.
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && unescapeMountPath(fields[4]) == abs {
			return true
		}
	}
	return false
}

func unescapeMountPath(s string) string {
	r := strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`)
	return r.Replace(s)
}
