// Command release builds premigrate's release artifacts offline into an OCI image layout, and checks them.
//
//	go run ./hack/release build --out dist/oci --app-version 0.2.0 --chart dist/premigrate-0.3.0.tgz \
//	    --chart dist/premigrate-lib-0.1.0.tgz [--postgres-rootfs-amd64 DIR --postgres-rootfs-arm64 DIR]
//	go run ./hack/release verify --layout dist/oci [--app-version 0.2.0] [--chart-version 0.3.0] [--require-postgres]
//	go run ./hack/release push --layout dist/oci [--to registry.example.com/premigrate] [--plain-http]
//
// build cross-compiles cmd/gate and cmd/demo (and cmd/postgres-init when both PostgreSQL root filesystems are
// given) for linux/amd64 and linux/arm64, makes the images hack/images.sh makes (no base image is pulled: the
// distroless-like base is written here), joins each image's two platforms into an OCI image index, and adds the
// packaged chart as the OCI artifact `helm push` makes. Every entry of the layout's index.json carries the
// annotation org.opencontainers.image.ref.name (ghcr.io/premigrate/gate:<appVersion>, ...), the name skopeo's and oras's
// oci: references use. Timestamps come from SOURCE_DATE_EPOCH (else the Unix epoch), so the same inputs give the
// same digests. Every reference is where it is published: ghcr.io/premigrate/gate:<appVersion>,
// ghcr.io/premigrate/charts/premigrate:<version>, ...
//
// push copies every reference of a layout to its registry (the release workflow runs it), or, with --to, to
// another one with the same paths below it (a mirror, the tests' registry): index, manifests and blobs with their
// digests unchanged. It prints one line per reference, `<destination>@<digest>`. Credentials come from the docker
// configuration (docker login, helm registry login); --plain-http talks HTTP to the registry.
//
// verify opens a layout and checks every image index (exactly linux/amd64 and linux/arm64, each manifest's config
// naming the same platform, the entrypoint an ELF binary of that machine) and the chart artifact (media types,
// a gzip tar whose Chart.yaml has the version of its reference), then prints a table. Exit codes: 0 all good,
// 1 a build failed or the layout is wrong, 2 bad usage.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"time"
)

// options is the parsed command line: the subcommand and its options.
type options struct {
	Command string // build, verify or push
	Build   buildOptions
	Verify  verifyOptions
	Push    pushOptions
}

// errUsage marks a command line that cannot be run.
var errUsage = errors.New("usage")

func main() {
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})))
	opts, err := parseArgs(os.Args[1:])
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "error:", err)
		}
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err = run(ctx, opts, os.Stdout)
	stop()
	switch {
	case err == nil:
	case errors.Is(err, errUsage):
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

// run executes the subcommand of opts, writing its report to stdout.
func run(ctx context.Context, opts options, stdout io.Writer) error {
	switch opts.Command {
	case "build":
		return build(ctx, opts.Build, stdout)
	case "verify":
		return verify(opts.Verify, stdout)
	case "push":
		return push(ctx, opts.Push, stdout)
	default:
		return fmt.Errorf("%w: unknown command %q (want build, verify or push)", errUsage, opts.Command)
	}
}

func parseArgs(args []string) (options, error) {
	if len(args) == 0 {
		return options{}, fmt.Errorf("%w: release build|verify|push [flags]", errUsage)
	}
	opts := options{Command: args[0]}
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	switch args[0] {
	case "build":
		b := &opts.Build
		var amd, arm string
		fs.StringVar(&b.Out, "out", "dist/oci", "OCI image layout folder to write (replaced)")
		fs.StringVar(&b.AppVersion, "app-version", "", "the chart's appVersion: the images' tag and main.version")
		fs.Func("chart", "a packaged chart (.tgz) to add as an OCI artifact (repeat for each chart)", func(v string) error {
			b.Charts = append(b.Charts, v)
			return nil
		})
		fs.StringVar(&b.Repo, "repo", ".", "the repository root (go builds run there)")
		fs.StringVar(&amd, "postgres-rootfs-amd64", "", "PostgreSQL root filesystem for linux/amd64 (with the arm64 one: adds ghcr.io/premigrate/postgres:15)")
		fs.StringVar(&arm, "postgres-rootfs-arm64", "", "PostgreSQL root filesystem for linux/arm64")
		if err := fs.Parse(args[1:]); err != nil {
			return opts, err
		}
		if b.AppVersion == "" || len(b.Charts) == 0 {
			return opts, fmt.Errorf("%w: build needs --app-version and --chart", errUsage)
		}
		if (amd == "") != (arm == "") {
			return opts, fmt.Errorf("%w: give both --postgres-rootfs-amd64 and --postgres-rootfs-arm64, or neither", errUsage)
		}
		t, err := sourceDateEpoch()
		if err != nil {
			return opts, err
		}
		b.Created = t
		b.Images = defaultImages(b.AppVersion)
		if amd != "" {
			b.Images = append(b.Images, postgresImage(map[string]string{"amd64": amd, "arm64": arm}))
		}
	case "verify":
		v := &opts.Verify
		fs.StringVar(&v.Layout, "layout", "dist/oci", "OCI image layout folder to check")
		fs.StringVar(&v.AppVersion, "app-version", "", "the images' expected tag (default: whatever the layout names)")
		fs.StringVar(&v.ChartVersion, "chart-version", "", "the chart's expected version (default: whatever the layout names)")
		fs.StringVar(&v.LibraryVersion, "library-version", "", "the library chart's expected version (default: whatever the layout names)")
		fs.BoolVar(&v.RequirePostgres, "require-postgres", false, registry+"/postgres must be in the layout")
		if err := fs.Parse(args[1:]); err != nil {
			return opts, err
		}
	case "push":
		p := &opts.Push
		fs.StringVar(&p.Layout, "layout", "dist/oci", "OCI image layout folder to push")
		fs.StringVar(&p.To, "to", "", "push below this registry path instead of "+registry+" (host[:port][/path])")
		fs.BoolVar(&p.PlainHTTP, "plain-http", false, "talk HTTP, not HTTPS, to the registry")
		if err := fs.Parse(args[1:]); err != nil {
			return opts, err
		}
	default:
		return opts, fmt.Errorf("%w: unknown command %q (want build, verify or push)", errUsage, args[0])
	}
	if fs.NArg() > 0 {
		return opts, fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}
	return opts, nil
}

// sourceDateEpoch is the timestamp of everything built: $SOURCE_DATE_EPOCH, else the Unix epoch.
func sourceDateEpoch() (time.Time, error) {
	s := os.Getenv("SOURCE_DATE_EPOCH")
	if s == "" {
		return time.Unix(0, 0).UTC(), nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: SOURCE_DATE_EPOCH=%q is not a number of seconds", errUsage, s)
	}
	return time.Unix(n, 0).UTC(), nil
}
