package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/premigrate/premigrate/hack/imagebuild"
)

const (
	// registry is where premigrate's images and charts are published, and the prefix of every reference in the
	// layout: the charts' default image repositories and the library's README name it
	registry          = "ghcr.io/premigrate"
	annotationRefName = "org.opencontainers.image.ref.name"
	sourceURL         = "https://github.com/premigrate/premigrate"
	// pathEnv is the PATH of the gate's and the demo's images (hack/images.sh)
	pathEnv = "PATH=/usr/local/bin:/usr/bin:/bin"
)

// platforms are the platforms of every image, in the order of their index.
var platforms = []v1.Platform{
	{OS: "linux", Architecture: "amd64"},
	{OS: "linux", Architecture: "arm64", Variant: "v8"},
}

// buildOptions are the options of `release build`.
type buildOptions struct {
	Out        string      // OCI image layout folder, replaced
	AppVersion string      // main.version of the binaries
	Charts     []string    // packaged charts (.tgz), each added as an OCI artifact
	Repo       string      // where `go build` runs
	Created    time.Time   // every timestamp of the output
	Images     []imageSpec // what to build
}

// imageSpec describes one multi-platform image, the way hack/images.sh describes the single-platform one.
type imageSpec struct {
	Ref        string            // ghcr.io/premigrate/gate:0.2.0, the layout's ref name
	Binaries   map[string]string // Go package (relative to Repo) -> path in the image
	Rootfs     map[string]string // architecture -> a folder copied to / in the same layer as the binaries
	Entrypoint []string
	User       string
	Env        []string
	StopSignal string
}

func defaultImages(appVersion string) []imageSpec {
	return []imageSpec{
		{Ref: registry + "/gate:" + appVersion, Binaries: map[string]string{"./cmd/gate": "/gate"},
			Entrypoint: []string{"/gate"}, User: "65532:65532", Env: []string{pathEnv}},
		{Ref: registry + "/demo:" + appVersion, Binaries: map[string]string{"./cmd/demo": "/demo"},
			Entrypoint: []string{"/demo"}, User: "65532:65532", Env: []string{pathEnv, "DEMO_VERSION=1"}},
	}
}

// postgresImage is ghcr.io/premigrate/postgres:15 from a Debian PostgreSQL 15 root filesystem per architecture
// (hack/release.sh prepares them as hack/images.sh does) and cmd/postgres-init.
func postgresImage(rootfs map[string]string) imageSpec {
	return imageSpec{Ref: registry + "/postgres:15", Rootfs: rootfs,
		Binaries:   map[string]string{"./cmd/postgres-init": "/usr/local/bin/postgres-init"},
		Entrypoint: []string{"/usr/local/bin/postgres-init"}, User: "999:999", StopSignal: "SIGINT",
		Env: []string{"PATH=/usr/local/bin:/usr/lib/postgresql/15/bin:/usr/bin:/bin", "PGDATA=/var/lib/postgresql/data", "LANG=C.UTF-8"}}
}

func build(ctx context.Context, opts buildOptions, stdout io.Writer) error {
	start := time.Now()
	work, err := os.MkdirTemp("", "premigrate-release-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(work) }()

	// every Go package of every image, built once per architecture
	pkgSet := map[string]bool{}
	for _, im := range opts.Images {
		for pkg := range im.Binaries {
			pkgSet[pkg] = true
		}
	}
	pkgs := sortedKeys(pkgSet)
	bins := map[string]string{} // arch -> folder of the binaries
	for _, p := range platforms {
		dir := filepath.Join(work, "bin-"+p.Architecture)
		t := time.Now()
		if err := goBuild(ctx, opts.Repo, p.Architecture, opts.AppVersion, dir, pkgs...); err != nil {
			return err
		}
		slog.Info("cross-compiled", "arch", p.Architecture, "packages", strings.Join(pkgs, " "), "took", time.Since(t).Round(time.Millisecond))
		bins[p.Architecture] = dir
	}

	if err := os.RemoveAll(opts.Out); err != nil {
		return err
	}
	lp, err := layout.Write(opts.Out, empty.Index)
	if err != nil {
		return fmt.Errorf("creating the layout %s: %w", opts.Out, err)
	}
	base, err := imagebuild.Base(opts.Created, imagebuild.OCI)
	if err != nil {
		return err
	}
	for _, im := range opts.Images {
		t := time.Now()
		imgs := map[string]v1.Image{}
		for _, p := range platforms {
			files := map[string]string{} // source -> destination
			for pkg, dst := range im.Binaries {
				files[filepath.Join(bins[p.Architecture], path.Base(pkg))] = dst
			}
			layerFile := filepath.Join(work, fmt.Sprintf("layer-%s-%s.tar", strings.NewReplacer("/", "_", ":", "_").Replace(im.Ref), p.Architecture))
			app, err := fileLayer(layerFile, im.Rootfs[p.Architecture], files, opts.Created)
			if err != nil {
				return fmt.Errorf("%s %s: %w", im.Ref, p.Architecture, err)
			}
			img, err := image(p, []v1.Layer{base, app}, im, opts.Created)
			if err != nil {
				return fmt.Errorf("%s %s: %w", im.Ref, p.Architecture, err)
			}
			imgs[p.Architecture] = img
		}
		idx, err := index(imgs, im.Ref, opts.Created)
		if err != nil {
			return fmt.Errorf("%s: %w", im.Ref, err)
		}
		if err := lp.AppendIndex(idx, layout.WithAnnotations(map[string]string{annotationRefName: im.Ref})); err != nil {
			return fmt.Errorf("writing %s: %w", im.Ref, err)
		}
		d, _ := idx.Digest()
		slog.Info("image index written", "ref", im.Ref, "digest", d.String(), "took", time.Since(t).Round(time.Millisecond))
	}
	for _, chart := range opts.Charts {
		art, ref, err := chartArtifact(chart, opts.Created)
		if err != nil {
			return err
		}
		if err := lp.AppendImage(art, layout.WithAnnotations(map[string]string{annotationRefName: ref})); err != nil {
			return fmt.Errorf("writing %s: %w", ref, err)
		}
		d, _ := art.Digest()
		slog.Info("chart artifact written", "ref", ref, "digest", d.String())
	}
	idx, err := lp.ImageIndex()
	if err != nil {
		return err
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return err
	}
	_, _ = fmt.Fprintf(stdout, "%s: %d references in %s\n", opts.Out, len(im.Manifests), time.Since(start).Round(time.Second))
	for _, m := range im.Manifests {
		_, _ = fmt.Fprintf(stdout, "  %-50s %s %s\n", m.Annotations[annotationRefName], m.Digest, m.MediaType)
	}
	return nil
}

// goBuild cross-compiles the main packages pkgs for linux/arch into dir, as hack/images.sh builds them.
func goBuild(ctx context.Context, repo, arch, version, dir string, pkgs ...string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	args := []string{"build", "-trimpath", "-ldflags", "-s -w -X main.version=" + version, "-o", dir + string(filepath.Separator)}
	cmd := exec.CommandContext(ctx, "go", append(args, pkgs...)...)
	cmd.Dir = repo
	// GOWORK=off: the product is built from the root module alone, never with the versions go.work's test and
	// workshop modules would choose
	cmd.Env = append(os.Environ(), "GOWORK=off", "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("go build for linux/%s: %w\n%s", arch, err, out)
	}
	return nil
}

// image is one platform's image: the base and the app layer, with the platform's OS and architecture, OCI media
// types and fixed timestamps (imagebuild, as hack/mkimg builds the images the tests run).
func image(p v1.Platform, layers []v1.Layer, im imageSpec, created time.Time) (v1.Image, error) {
	hist := make([]imagebuild.History, 0, len(layers))
	for i, l := range layers {
		by := "premigrate: the distroless-like base"
		if i > 0 {
			by = "premigrate hack/release: " + strings.Join(sortedValues(im.Binaries), " ")
		}
		hist = append(hist, imagebuild.History{Layer: l, CreatedBy: by})
	}
	return imagebuild.Image(p, hist, imagebuild.Config{Entrypoint: im.Entrypoint, User: im.User, Env: im.Env, StopSignal: im.StopSignal},
		created, imagebuild.OCI)
}

// index joins the platforms' images into one OCI image index.
func index(imgs map[string]v1.Image, ref string, created time.Time) (v1.ImageIndex, error) {
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	adds := make([]mutate.IndexAddendum, 0, len(platforms))
	for _, p := range platforms {
		img, ok := imgs[p.Architecture]
		if !ok {
			return nil, fmt.Errorf("no image for %s", platformString(p))
		}
		p := p
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &p}})
	}
	idx = mutate.AppendManifests(idx, adds...)
	version := ref[strings.LastIndex(ref, ":")+1:]
	annotated, ok := mutate.Annotations(idx, map[string]string{
		"org.opencontainers.image.source":  sourceURL,
		"org.opencontainers.image.version": version,
		"org.opencontainers.image.created": created.Format(time.RFC3339),
	}).(v1.ImageIndex)
	if !ok {
		return nil, fmt.Errorf("annotating the index of %s", ref)
	}
	return annotated, nil
}

// fileLayer writes a layer tar to file: the tree rootfs (may be empty) at /, then files (source -> destination),
// with imagebuild's rules (sorted, owned by root, stamped created, setuid, setgid and sticky bits kept).
func fileLayer(file, rootfs string, files map[string]string, created time.Time) (v1.Layer, error) {
	l, err := imagebuild.NewLayer(file, created)
	if err != nil {
		return nil, err
	}
	if rootfs != "" {
		if err := l.AddTree(rootfs, "/"); err != nil {
			_, _ = l.Close(imagebuild.OCI)
			return nil, err
		}
	}
	for _, src := range sortedKeys(files) {
		if err := l.Add(src, files[src]); err != nil {
			_, _ = l.Close(imagebuild.OCI)
			return nil, err
		}
	}
	return l.Close(imagebuild.OCI)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func sortedValues(m map[string]string) []string {
	vals := make([]string, 0, len(m))
	for _, v := range m {
		vals = append(vals, v)
	}
	sort.Strings(vals)
	return vals
}

func platformString(p v1.Platform) string {
	s := p.OS + "/" + p.Architecture
	if p.Variant != "" {
		s += "/" + p.Variant
	}
	return s
}
