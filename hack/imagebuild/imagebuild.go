// Package imagebuild builds premigrate's container images without a registry, a daemon or a base image to
// pull: layers from files on disk (sorted entries, owned by root, one fixed timestamp, setuid, setgid and sticky
// bits kept), the distroless-like base every premigrate image starts from, and an image config. It is the one
// image builder of the repository: hack/mkimg (the images the tests run, as docker archives, `make images`)
// and hack/release (the multi-platform OCI layout that ships, `make release`) both build with it, so what is
// tested is built by the code that ships.
package imagebuild

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Format is the kind of image built: its manifest's, config's and layers' media types.
type Format int

const (
	// DockerArchive images are written by WriteArchive for `docker load`, `ctr images import` and `kind load
	// image-archive` (Docker media types).
	DockerArchive Format = iota
	// OCI images go into an OCI image layout (OCI media types).
	OCI
)

func (f Format) layerType() types.MediaType {
	if f == OCI {
		return types.OCILayer
	}
	return types.DockerLayer
}

// Epoch is the timestamp of the images the tests run: fixed, so the same inputs give the same digests.
var Epoch = time.Unix(0, 0).UTC()

// BasePasswd, BaseGroup and BaseNsswitch are the base layer's /etc files: root, nonroot (65532, the gate's,
// the demo's and the ledger's user) and postgres (999, the embedded database's).
const (
	BasePasswd = "root:x:0:0:root:/root:/sbin/nologin\n" +
		"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n" +
		"postgres:x:999:999:PostgreSQL:/var/lib/postgresql:/bin/sh\n"
	BaseGroup    = "root:x:0:\nnonroot:x:65532:\npostgres:x:999:\n"
	BaseNsswitch = "hosts: files dns\n"
)

// Base is the distroless-like base layer of every premigrate image: /etc/passwd, /etc/group and
// /etc/nsswitch.conf (BasePasswd, BaseGroup, BaseNsswitch) and a sticky, world-writable /tmp.
func Base(created time.Time, f Format) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	files := []struct{ name, body string }{
		{"etc/group", BaseGroup},
		{"etc/nsswitch.conf", BaseNsswitch},
		{"etc/passwd", BasePasswd},
	}
	write := func(h *tar.Header, body string) error {
		h.ModTime, h.Format = created, tar.FormatPAX
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		_, err := io.WriteString(tw, body)
		return err
	}
	if err := write(&tar.Header{Typeflag: tar.TypeDir, Name: "etc/", Mode: 0o755}, ""); err != nil {
		return nil, fmt.Errorf("the base layer: %w", err)
	}
	for _, file := range files {
		h := &tar.Header{Typeflag: tar.TypeReg, Name: file.name, Mode: 0o644, Size: int64(len(file.body))}
		if err := write(h, file.body); err != nil {
			return nil, fmt.Errorf("the base layer: %w", err)
		}
	}
	if err := write(&tar.Header{Typeflag: tar.TypeDir, Name: "tmp/", Mode: 0o777 | modeSticky}, ""); err != nil {
		return nil, fmt.Errorf("the base layer: %w", err)
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("the base layer: %w", err)
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil },
		tarball.WithMediaType(f.layerType()), tarball.WithCompressedCaching)
}

// the tar mode bits beyond the permissions
const (
	modeSetuid = 0o4000
	modeSetgid = 0o2000
	modeSticky = 0o1000
)

// tarMode is a file's permission bits with its setuid, setgid and sticky bits, as a tar header holds them.
func tarMode(m fs.FileMode) int64 {
	mode := int64(m.Perm())
	if m&fs.ModeSetuid != 0 {
		mode |= modeSetuid
	}
	if m&fs.ModeSetgid != 0 {
		mode |= modeSetgid
	}
	if m&fs.ModeSticky != 0 {
		mode |= modeSticky
	}
	return mode
}

// Layer writes one layer's tar into a file. Add entries with AddTree and Add, then call Close.
type Layer struct {
	file    *os.File
	tw      *tar.Writer
	dirs    map[string]bool
	created time.Time
}

// NewLayer starts a layer written to file (created or truncated), every entry stamped created.
func NewLayer(file string, created time.Time) (*Layer, error) {
	f, err := os.Create(file)
	if err != nil {
		return nil, fmt.Errorf("creating a layer: %w", err)
	}
	return &Layer{file: f, tw: tar.NewWriter(f), dirs: map[string]bool{}, created: created}, nil
}

func (l *Layer) header(h *tar.Header) error {
	h.ModTime, h.Format = l.created, tar.FormatPAX
	return l.tw.WriteHeader(h)
}

// mkdirs writes the missing parents of dst (relative, no leading slash), 0755.
func (l *Layer) mkdirs(dst string) error {
	if dst == "" || dst == "." || l.dirs[dst] {
		return nil
	}
	if err := l.mkdirs(path.Dir(dst)); err != nil {
		return err
	}
	l.dirs[dst] = true
	return l.header(&tar.Header{Typeflag: tar.TypeDir, Name: dst + "/", Mode: 0o755})
}

// clean makes an image path relative: "/usr/bin" -> "usr/bin", "/" -> "".
func clean(dst string) string {
	return strings.TrimPrefix(path.Clean("/"+dst), "/")
}

// AddTree adds the entries of the folder src under dst ("/" or "" is the root), sorted by name, folders with
// their own modes.
func (l *Layer) AddTree(src, dst string) error {
	dst = clean(dst)
	ents, err := os.ReadDir(src) // sorted by name
	if err != nil {
		return fmt.Errorf("adding %s: %w", src, err)
	}
	for _, e := range ents {
		s, d := filepath.Join(src, e.Name()), path.Join(dst, e.Name())
		fi, err := os.Lstat(s)
		if err != nil {
			return fmt.Errorf("adding %s: %w", s, err)
		}
		if !fi.IsDir() {
			if err := l.addFile(s, d, fi); err != nil {
				return err
			}
			continue
		}
		if err := l.mkdirs(dst); err != nil {
			return err
		}
		if !l.dirs[d] {
			l.dirs[d] = true
			if err := l.header(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: tarMode(fi.Mode())}); err != nil {
				return err
			}
		}
		if err := l.AddTree(s, d); err != nil {
			return err
		}
	}
	return nil
}

// Add adds src at dst: a regular file or a symlink as itself, a folder as the folder dst (with its mode) and
// its tree.
func (l *Layer) Add(src, dst string) error {
	fi, err := os.Lstat(src)
	if err != nil {
		return fmt.Errorf("adding %s: %w", src, err)
	}
	if !fi.IsDir() {
		return l.addFile(src, dst, fi)
	}
	d := clean(dst)
	if d != "" && !l.dirs[d] {
		if err := l.mkdirs(path.Dir(d)); err != nil {
			return err
		}
		l.dirs[d] = true
		if err := l.header(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: tarMode(fi.Mode())}); err != nil {
			return err
		}
	}
	return l.AddTree(src, d)
}

// addFile adds the regular file or symlink src (fi is its Lstat) at dst.
func (l *Layer) addFile(src, dst string, fi fs.FileInfo) error {
	dst = clean(dst)
	if err := l.mkdirs(path.Dir(dst)); err != nil {
		return err
	}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		target, err := os.Readlink(src)
		if err != nil {
			return fmt.Errorf("adding %s: %w", src, err)
		}
		return l.header(&tar.Header{Typeflag: tar.TypeSymlink, Name: dst, Linkname: target, Mode: 0o777})
	case fi.Mode().IsRegular():
		f, err := os.Open(src)
		if err != nil {
			return fmt.Errorf("adding %s: %w", src, err)
		}
		defer func() { _ = f.Close() }()
		if err := l.header(&tar.Header{Typeflag: tar.TypeReg, Name: dst, Size: fi.Size(), Mode: tarMode(fi.Mode())}); err != nil {
			return err
		}
		if _, err := io.Copy(l.tw, f); err != nil {
			return fmt.Errorf("adding %s: %w", src, err)
		}
		return nil
	default:
		return fmt.Errorf("adding %s: neither a regular file, a symlink nor a folder (%s)", src, fi.Mode().Type())
	}
}

// Close ends the layer's tar and returns the layer, of format f's media type.
func (l *Layer) Close(f Format) (v1.Layer, error) {
	if err := l.tw.Close(); err != nil {
		_ = l.file.Close()
		return nil, fmt.Errorf("writing the layer %s: %w", l.file.Name(), err)
	}
	if err := l.file.Close(); err != nil {
		return nil, fmt.Errorf("writing the layer %s: %w", l.file.Name(), err)
	}
	return tarball.LayerFromFile(l.file.Name(), tarball.WithMediaType(f.layerType()), tarball.WithCompressedCaching)
}

// Config is what an image runs: its config's entrypoint, command, user, environment, working folder and stop
// signal.
type Config struct {
	Entrypoint, Cmd, Env         []string
	User, WorkingDir, StopSignal string
}

// History names a layer in the image's history; CreatedBy may be empty.
type History struct {
	Layer     v1.Layer
	CreatedBy string
}

// Image is the image of platform p from layers (first the lowest) running cfg, every timestamp created.
func Image(p v1.Platform, layers []History, cfg Config, created time.Time, f Format) (v1.Image, error) {
	img := empty.Image
	if f == OCI {
		img = mutate.MediaType(img, types.OCIManifestSchema1)
		img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	}
	adds := make([]mutate.Addendum, 0, len(layers))
	for _, l := range layers {
		adds = append(adds, mutate.Addendum{Layer: l.Layer, MediaType: f.layerType(),
			History: v1.History{Created: v1.Time{Time: created}, CreatedBy: l.CreatedBy}})
	}
	img, err := mutate.Append(img, adds...)
	if err != nil {
		return nil, fmt.Errorf("adding the layers: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("reading the config: %w", err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Variant = p.OS, p.Architecture, p.Variant
	cf.Created = v1.Time{Time: created}
	cf.Config.Entrypoint = cfg.Entrypoint
	cf.Config.Cmd = cfg.Cmd
	cf.Config.User = cfg.User
	cf.Config.Env = cfg.Env
	cf.Config.WorkingDir = cfg.WorkingDir
	cf.Config.StopSignal = cfg.StopSignal
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("writing the config: %w", err)
	}
	return img, nil
}
