package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path"
	"strings"
	"text/tabwriter"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"sigs.k8s.io/yaml"
)

// verifyOptions are the options of `release verify`.
type verifyOptions struct {
	Layout          string // OCI image layout folder
	AppVersion      string // expected tag of the images; empty: any
	ChartVersion    string // expected version of the chart; empty: any
	LibraryVersion  string // expected version of the library chart; empty: any
	RequirePostgres bool   // ghcr.io/premigrate/postgres must be there
}

// machines is the ELF machine each architecture's binaries must have.
var machines = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}

// extraBinaries are binaries checked beside the entrypoint, by image name.
var extraBinaries = map[string][]string{registry + "/postgres": {"/usr/lib/postgresql/15/bin/postgres"}}

// row is one line of the report: one platform of an image, or the chart.
type row struct {
	ref, platform, digest, checked, result string
}

// verification collects the rows and the problems of one layout.
type verification struct {
	rows     []row
	problems []string
}

func (v *verification) fail(format string, args ...any) {
	v.problems = append(v.problems, fmt.Sprintf(format, args...))
}

func verify(opts verifyOptions, stdout io.Writer) error {
	lp, err := layout.FromPath(opts.Layout)
	if err != nil {
		return fmt.Errorf("opening the OCI layout %s: %w", opts.Layout, err)
	}
	ii, err := lp.ImageIndex()
	if err != nil {
		return fmt.Errorf("reading %s/index.json: %w", opts.Layout, err)
	}
	im, err := ii.IndexManifest()
	if err != nil {
		return fmt.Errorf("reading %s/index.json: %w", opts.Layout, err)
	}
	v := &verification{}

	// every expected name once, at the expected tag when one is given
	type want struct{ name, tag string }
	wants := []want{{registry + "/gate", opts.AppVersion}, {registry + "/demo", opts.AppVersion},
		{chartRefPrefix + "premigrate", opts.ChartVersion}, {chartRefPrefix + "premigrate-lib", opts.LibraryVersion}}
	if opts.RequirePostgres {
		wants = append(wants, want{registry + "/postgres", "15"})
	}
	for _, w := range wants {
		var tags []string
		for _, d := range im.Manifests {
			if name, tag, ok := strings.Cut(d.Annotations[annotationRefName], ":"); ok && name == w.name {
				tags = append(tags, tag)
			}
		}
		switch {
		case len(tags) == 0:
			v.fail("%s: not in the layout", w.name)
		case len(tags) > 1:
			v.fail("%s: %d references (%s), want one", w.name, len(tags), strings.Join(tags, ", "))
		case w.tag != "" && tags[0] != w.tag:
			v.fail("%s: tagged %s, want %s", w.name, tags[0], w.tag)
		}
	}

	for _, d := range im.Manifests {
		ref := d.Annotations[annotationRefName]
		if ref == "" {
			v.fail("%s: no %s annotation", d.Digest, annotationRefName)
			continue
		}
		switch d.MediaType {
		case types.OCIImageIndex, types.DockerManifestList:
			v.imageIndex(ii, d, ref)
		case types.OCIManifestSchema1:
			v.chart(ii, d, ref)
		default:
			v.fail("%s: media type %s is neither an image index nor an OCI manifest", ref, d.MediaType)
		}
	}

	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	_, _ = fmt.Fprintln(tw, "REFERENCE\tPLATFORM\tDIGEST\tCHECKED\tRESULT")
	for _, r := range v.rows {
		_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.ref, r.platform, r.digest, r.checked, r.result)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(v.problems) > 0 {
		return fmt.Errorf("%s: %d problem(s):\n  - %s", opts.Layout, len(v.problems), strings.Join(v.problems, "\n  - "))
	}
	slog.Info("layout verified", "layout", opts.Layout, "references", len(im.Manifests))
	return nil
}

// imageIndex checks one image index: exactly linux/amd64 and linux/arm64, each config naming its platform, each
// entrypoint (and extra binary) an ELF of that platform's machine.
func (v *verification) imageIndex(ii v1.ImageIndex, d v1.Descriptor, ref string) {
	idx, err := ii.ImageIndex(d.Digest)
	if err != nil {
		v.fail("%s: reading the image index: %v", ref, err)
		return
	}
	m, err := idx.IndexManifest()
	if err != nil {
		v.fail("%s: reading the image index: %v", ref, err)
		return
	}
	seen := map[string]bool{}
	for _, md := range m.Manifests {
		if md.Platform == nil {
			v.fail("%s: manifest %s has no platform", ref, md.Digest)
			continue
		}
		p := *md.Platform
		key := p.OS + "/" + p.Architecture
		if _, ok := machines[p.Architecture]; !ok || p.OS != "linux" {
			v.fail("%s: unexpected platform %s", ref, platformString(p))
			continue
		}
		if seen[key] {
			v.fail("%s: two manifests for %s", ref, key)
			continue
		}
		seen[key] = true
		v.platformImage(idx, md, ref)
	}
	for _, p := range platforms {
		if key := p.OS + "/" + p.Architecture; !seen[key] {
			v.fail("%s: the index has no %s manifest", ref, key)
			v.rows = append(v.rows, row{ref, key, "-", "-", "MISSING"})
		}
	}
}

func (v *verification) platformImage(idx v1.ImageIndex, md v1.Descriptor, ref string) {
	p := *md.Platform
	r := row{ref: ref, platform: platformString(p), digest: shortDigest(md.Digest), checked: "-", result: "ok"}
	defer func() { v.rows = append(v.rows, r) }()
	bad := func(format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		v.fail("%s %s: %s", ref, platformString(p), msg)
		r.result = "FAIL: " + msg
	}
	img, err := idx.Image(md.Digest)
	if err != nil {
		bad("reading the manifest: %v", err)
		return
	}
	cf, err := img.ConfigFile()
	if err != nil {
		bad("reading the config: %v", err)
		return
	}
	if cf.OS != p.OS || cf.Architecture != p.Architecture || cf.Variant != p.Variant {
		bad("the config says %s, the index %s", platformString(v1.Platform{OS: cf.OS, Architecture: cf.Architecture, Variant: cf.Variant}), platformString(p))
		return
	}
	if len(cf.Config.Entrypoint) == 0 || !path.IsAbs(cf.Config.Entrypoint[0]) {
		bad("the entrypoint %q is not an absolute path", cf.Config.Entrypoint)
		return
	}
	name, _, _ := strings.Cut(ref, ":")
	bins := append([]string{cf.Config.Entrypoint[0]}, extraBinaries[name]...)
	files, err := readFiles(img, bins)
	if err != nil {
		bad("reading the layers: %v", err)
		return
	}
	var checked []string
	for _, b := range bins {
		data, ok := files[b]
		if !ok {
			bad("%s is not in the image", b)
			return
		}
		f, err := elf.NewFile(bytes.NewReader(data))
		if err != nil {
			bad("%s is not an ELF binary: %v", b, err)
			return
		}
		if want := machines[p.Architecture]; f.Machine != want {
			bad("%s is an ELF binary for %s, want %s", b, f.Machine, want)
			return
		}
		checked = append(checked, fmt.Sprintf("%s %s", b, f.Machine))
	}
	r.checked = strings.Join(checked, ", ")
}

// readFiles reads the given absolute paths from an image's filesystem: the layers flattened (whiteouts
// respected), symlinks followed in every component. Paths that are not there are left out.
func readFiles(img v1.Image, paths []string) (map[string][]byte, error) {
	layers, err := img.Layers()
	if err != nil {
		return nil, err
	}
	entries := map[string]fsEntry{}
	for i, l := range layers {
		if err := eachEntry(l, func(name string, h *tar.Header, _ io.Reader) (bool, error) {
			dir, base := path.Split(name)
			if rest, ok := strings.CutPrefix(base, ".wh."); ok {
				delete(entries, path.Join(dir, rest))
				return false, nil
			}
			entries[name] = fsEntry{typ: h.Typeflag, link: h.Linkname, layer: i}
			return false, nil
		}); err != nil {
			return nil, err
		}
	}
	byLayer := map[int]map[string]string{} // layer -> resolved name -> wanted path
	for _, p := range paths {
		name, err := resolve(entries, p)
		if err != nil {
			return nil, err
		}
		if name == "" {
			continue
		}
		e := entries[name]
		if e.typ != tar.TypeReg {
			return nil, fmt.Errorf("%s is not a regular file (tar type %q)", p, e.typ)
		}
		if byLayer[e.layer] == nil {
			byLayer[e.layer] = map[string]string{}
		}
		byLayer[e.layer][name] = p
	}
	out := map[string][]byte{}
	for i, names := range byLayer {
		if err := eachEntry(layers[i], func(name string, h *tar.Header, r io.Reader) (bool, error) {
			p, ok := names[name]
			if !ok || h.Typeflag != tar.TypeReg {
				return false, nil
			}
			b, err := io.ReadAll(r)
			out[p] = b
			return len(out) == len(paths), err
		}); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// fsEntry is one path of a flattened image filesystem: its tar type, symlink target and layer.
type fsEntry struct {
	typ   byte
	link  string
	layer int
}

// resolve follows the symlinks of every component of the absolute path p: the name (relative, as in the
// layers) it leads to, or "" when there is nothing there.
func resolve(entries map[string]fsEntry, p string) (string, error) {
	rest := strings.Split(strings.Trim(path.Clean(p), "/"), "/")
	cur := ""
	for hops := 0; len(rest) > 0; {
		next := path.Join(cur, rest[0])
		e, ok := entries[next]
		if !ok {
			return "", nil
		}
		if e.typ != tar.TypeSymlink {
			cur, rest = next, rest[1:]
			continue
		}
		if hops++; hops > 32 {
			return "", fmt.Errorf("%s: too many levels of symlinks", p)
		}
		target := e.link
		if !path.IsAbs(target) {
			target = path.Join("/", cur, target)
		}
		rest = append(strings.Split(strings.Trim(path.Clean(target), "/"), "/"), rest[1:]...)
		cur = ""
		if rest[0] == "" { // a link to /
			rest = rest[1:]
		}
	}
	return cur, nil
}

// eachEntry calls fn for every entry of a layer (names relative, cleaned) until fn says stop.
func eachEntry(l v1.Layer, fn func(name string, h *tar.Header, r io.Reader) (stop bool, err error)) error {
	rc, err := l.Uncompressed()
	if err != nil {
		return err
	}
	defer func() { _ = rc.Close() }()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		name := strings.TrimPrefix(path.Clean("/"+h.Name), "/")
		if name == "" {
			continue
		}
		stop, err := fn(name, h, tr)
		if err != nil || stop {
			return err
		}
	}
}

// chart checks the chart artifact: Helm's media types, one layer that is a gzip tar whose Chart.yaml has the
// version of the reference, the config naming the same version.
func (v *verification) chart(ii v1.ImageIndex, d v1.Descriptor, ref string) {
	r := row{ref: ref, platform: "-", digest: shortDigest(d.Digest), checked: "-", result: "ok"}
	defer func() { v.rows = append(v.rows, r) }()
	bad := func(format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		v.fail("%s: %s", ref, msg)
		r.result = "FAIL: " + msg
	}
	_, version, _ := strings.Cut(ref, ":")
	img, err := ii.Image(d.Digest)
	if err != nil {
		bad("reading the manifest: %v", err)
		return
	}
	m, err := img.Manifest()
	if err != nil {
		bad("reading the manifest: %v", err)
		return
	}
	if m.Config.MediaType != helmConfigMediaType {
		bad("config media type %s, want %s", m.Config.MediaType, helmConfigMediaType)
		return
	}
	if len(m.Layers) != 1 || m.Layers[0].MediaType != helmContentMediaType {
		var mts []string
		for _, l := range m.Layers {
			mts = append(mts, string(l.MediaType))
		}
		bad("layers %v, want one %s", mts, helmContentMediaType)
		return
	}
	raw, err := img.RawConfigFile()
	if err != nil {
		bad("reading the config: %v", err)
		return
	}
	var meta struct{ Name, Version string }
	if err := json.Unmarshal(raw, &meta); err != nil {
		bad("the config is not the chart's metadata as JSON: %v", err)
		return
	}
	if meta.Version != version {
		bad("the config names version %q, the reference %q", meta.Version, version)
		return
	}
	layers, err := img.Layers()
	if err != nil {
		bad("reading the layer: %v", err)
		return
	}
	rc, err := layers[0].Compressed()
	if err != nil {
		bad("reading the layer: %v", err)
		return
	}
	defer func() { _ = rc.Close() }()
	chartYAML, err := chartYAMLOf(rc, meta.Name)
	if err != nil {
		bad("the layer: %v", err)
		return
	}
	var cy struct {
		Version string `json:"version"`
	}
	if err := yaml.Unmarshal(chartYAML, &cy); err != nil {
		bad("%s/Chart.yaml: %v", meta.Name, err)
		return
	}
	if cy.Version != version {
		bad("%s/Chart.yaml has version %q, the reference %q", meta.Name, cy.Version, version)
		return
	}
	r.checked = fmt.Sprintf("%s/Chart.yaml version %s", meta.Name, cy.Version)
}

// chartYAMLOf returns <name>/Chart.yaml from a gzip tar.
func chartYAMLOf(r io.Reader, name string) ([]byte, error) {
	zr, err := gzip.NewReader(r)
	if err != nil {
		return nil, fmt.Errorf("not gzip: %w", err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("no %s/Chart.yaml in the archive", name)
		}
		if err != nil {
			return nil, fmt.Errorf("not a tar: %w", err)
		}
		if path.Clean(h.Name) == name+"/Chart.yaml" {
			return io.ReadAll(tr)
		}
	}
}

func shortDigest(h v1.Hash) string {
	if len(h.Hex) < 12 {
		return h.String()
	}
	return h.Algorithm + ":" + h.Hex[:12]
}
