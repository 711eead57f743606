// Command autox runs Helm releases for Kubernetes objects, as declared in one
// mounted YAML file. Its commands live in internal/cli; main only hands them
// the version stamped at build time and exits with their code.
package main

import (
	"os"

	"github.com/autox-dev/autox/internal/cli"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() { os.Exit(cli.Main(version, os.Stdout, os.Stderr)) }
