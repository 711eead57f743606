// Command image assembles autox's multi-platform image from binaries built
// beforehand (internal/image) and pushes it to a registry; scripts/image.sh
// builds the binaries and runs it. It prints the pushed reference with its
// digest, the way an overlay pins it.
//
//	go run ./scripts/image --binary linux/amd64=out/amd64/autox --binary linux/arm64=out/arm64/autox \
//	  --version v0.1.0 --revision $(git rev-parse HEAD) --created $(git log -1 --format=%ct) \
//	  --push 127.0.0.1:5001/autox:v0.1.0
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/autox-dev/autox/internal/image"
)

type binaries []image.Platform

func (b *binaries) String() string { return fmt.Sprint(*b) }

// Set parses os/arch[/variant]=path.
func (b *binaries) Set(s string) error {
	platform, path, ok := strings.Cut(s, "=")
	parts := strings.Split(platform, "/")
	if !ok || path == "" || len(parts) < 2 || len(parts) > 3 {
		return fmt.Errorf("--binary %q: want os/arch[/variant]=path", s)
	}
	p := image.Platform{OS: parts[0], Architecture: parts[1], Binary: path}
	if len(parts) == 3 {
		p.Variant = parts[2]
	}
	*b = append(*b, p)
	return nil
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		bins     binaries
		opts     image.Options
		created  = flag.String("created", "0", "Unix time written as the image's creation time (the commit's, for a reproducible image)")
		push     = flag.String("push", "", "where to push: registry/repository:tag")
		insecure = flag.Bool("insecure", false, "plain HTTP to the registry (loopback addresses use it anyway)")
	)
	flag.Var(&bins, "binary", "os/arch[/variant]=path of the autox binary for that platform (repeat per platform)")
	flag.StringVar(&opts.Version, "version", "", "the version stamped in the binary, for the version label")
	flag.StringVar(&opts.Revision, "revision", "", "the commit, for the revision label")
	flag.StringVar(&opts.Source, "source", "https://github.com/autox-dev/autox", "the repository, for the source label")
	flag.Parse()
	if *push == "" {
		return errors.New("--push is required")
	}
	secs, err := strconv.ParseInt(*created, 10, 64)
	if err != nil {
		return fmt.Errorf("--created %q: want a Unix time: %w", *created, err)
	}
	opts.Created, opts.Platforms = time.Unix(secs, 0), bins
	var nameOpts []name.Option
	if *insecure {
		nameOpts = append(nameOpts, name.Insecure)
	}
	ref, err := name.NewTag(*push, nameOpts...)
	if err != nil {
		return fmt.Errorf("--push %q: %w", *push, err)
	}
	idx, err := image.Build(opts)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := remote.WriteIndex(ref, idx, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
		return fmt.Errorf("cannot push %s: %w", ref, err)
	}
	digest, err := idx.Digest()
	if err != nil {
		return err
	}
	fmt.Printf("%s@%s\n", ref.Name(), digest)
	return nil
}
