// Command registry is a local OCI registry (distribution/v3, the registry
// Docker Hub and Helm's tests run) on one address with its blobs in one
// directory, for scripts/image.sh to push autox's image to on a machine
// without a container engine. It has only the filesystem storage driver, so
// it builds from autox's own module; scripts/registry.sh builds, caches,
// starts and stops it.
//
//	registry --addr 127.0.0.1:5001 --root ~/.cache/autox/registry/data
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/distribution/distribution/v3/configuration"
	dregistry "github.com/distribution/distribution/v3/registry"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/filesystem"
	"github.com/sirupsen/logrus"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:5001", "address to listen on (plain HTTP: keep it on loopback)")
	root := flag.String("root", "", "directory of the registry's blobs and manifests (required)")
	flag.Parse()
	if err := run(*addr, *root); err != nil {
		fmt.Fprintln(os.Stderr, "registry:", err)
		os.Exit(1)
	}
}

func run(addr, root string) error {
	if root == "" {
		return fmt.Errorf("--root is required")
	}
	if err := os.MkdirAll(root, 0o700); err != nil {
		return fmt.Errorf("cannot create --root %s: %w", root, err)
	}
	// No traces to a collector that is not there, no access log per request.
	os.Setenv("OTEL_TRACES_EXPORTER", "none")
	logrus.SetOutput(io.Discard)
	cfg := &configuration.Configuration{}
	cfg.HTTP.Addr = addr
	cfg.HTTP.DrainTimeout = 5 * time.Second
	cfg.Storage = configuration.Storage{
		"filesystem":  configuration.Parameters{"rootdirectory": root},
		"maintenance": configuration.Parameters{"uploadpurging": map[interface{}]interface{}{"enabled": false}},
		"delete":      configuration.Parameters{"enabled": true},
	}
	cfg.Log.Level = "error"
	cfg.Log.AccessLog.Disabled = true
	reg, err := dregistry.NewRegistry(context.Background(), cfg)
	if err != nil {
		return fmt.Errorf("cannot configure the registry: %w", err)
	}
	fmt.Fprintf(os.Stderr, "registry: serving on http://%s, storage %s\n", addr, root)
	// With a drain timeout it stops by itself on SIGTERM or SIGINT, after
	// the requests under way.
	return reg.ListenAndServe()
}
