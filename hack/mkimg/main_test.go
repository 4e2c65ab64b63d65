package main

import (
	"archive/tar"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/premigrate/premigrate/hack/imagebuild"
)

// layerEntries reads a layer's tar: name -> header, and the names in order.
func layerEntries(t *testing.T, l v1.Layer) (map[string]*tar.Header, []string) {
	t.Helper()
	rc, err := l.Uncompressed()
	require.NoError(t, err)
	defer func() { _ = rc.Close() }()
	tr := tar.NewReader(rc)
	byName := map[string]*tar.Header{}
	var names []string
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return byName, names
		}
		require.NoError(t, err)
		byName[h.Name], names = h, append(names, h.Name)
	}
}

func TestTheTestsImagesStartWithTheBaseLayerTheReleaseShips(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "gate")
	require.NoError(t, os.WriteFile(bin, []byte("#!/bin/true\n"), 0o755))
	out := filepath.Join(dir, "gate.tar")
	require.NoError(t, run([]string{"-o", out, "-tag", "premigrate/gate:1.2.3", "-base", "-file", bin + ":/gate",
		"-entrypoint", "/gate", "-user", "65532:65532", "-env", "PATH=/usr/local/bin:/usr/bin:/bin"}))

	tag, err := name.NewTag("premigrate/gate:1.2.3")
	require.NoError(t, err)
	img, err := tarball.ImageFromPath(out, &tag)
	require.NoError(t, err)
	cf, err := img.ConfigFile()
	require.NoError(t, err)
	assert.Equal(t, "amd64", cf.Architecture)
	assert.Equal(t, []string{"/gate"}, cf.Config.Entrypoint)
	assert.Equal(t, "65532:65532", cf.Config.User)
	layers, err := img.Layers()
	require.NoError(t, err)
	require.Len(t, layers, 2, "the base, then the binary")

	// the release's base (OCI media type) holds the same tar: the same uncompressed digest
	shipped, err := imagebuild.Base(imagebuild.Epoch, imagebuild.OCI)
	require.NoError(t, err)
	want, err := shipped.DiffID()
	require.NoError(t, err)
	got, err := layers[0].DiffID()
	require.NoError(t, err)
	assert.Equal(t, want, got, "the tests' images and the release start from the same base layer")

	base, _ := layerEntries(t, layers[0])
	require.Contains(t, base, "tmp/")
	assert.Equal(t, int64(0o1777), base["tmp/"].Mode, "/tmp is sticky and world-writable")
	app, names := layerEntries(t, layers[1])
	assert.Equal(t, []string{"gate"}, names)
	assert.Equal(t, int64(0o755), app["gate"].Mode)
	assert.True(t, app["gate"].ModTime.Equal(imagebuild.Epoch), "fixed timestamp")
}

func TestATreeKeepsItsModesAndSymlinksAndEachLayerFlagStartsALayer(t *testing.T) {
	root := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(root, "var/run/postgresql"), 0o755))
	require.NoError(t, os.Chmod(filepath.Join(root, "var/run/postgresql"), 0o777|os.ModeSticky))
	require.NoError(t, os.Symlink("usr/bin", filepath.Join(root, "bin")))
	other := filepath.Join(t.TempDir(), "x")
	require.NoError(t, os.WriteFile(other, []byte("x"), 0o600))
	out := filepath.Join(t.TempDir(), "img.tar")
	require.NoError(t, run([]string{"-o", out, "-tag", "example/pg:15", "-platform", "linux/arm64/v8", "-dir", root + ":/",
		"-layer", "x", "-file", other + ":/etc/x", "-stop-signal", "SIGINT"}))

	tag, err := name.NewTag("example/pg:15")
	require.NoError(t, err)
	img, err := tarball.ImageFromPath(out, &tag)
	require.NoError(t, err)
	cf, err := img.ConfigFile()
	require.NoError(t, err)
	assert.Equal(t, "arm64", cf.Architecture)
	assert.Equal(t, "v8", cf.Variant)
	assert.Equal(t, "SIGINT", cf.Config.StopSignal)
	layers, err := img.Layers()
	require.NoError(t, err)
	require.Len(t, layers, 2)
	tree, _ := layerEntries(t, layers[0])
	assert.Equal(t, int64(0o1777), tree["var/run/postgresql/"].Mode)
	assert.Equal(t, byte(tar.TypeSymlink), tree["bin"].Typeflag)
	assert.Equal(t, "usr/bin", tree["bin"].Linkname)
	second, names := layerEntries(t, layers[1])
	assert.Equal(t, []string{"etc/", "etc/x"}, names)
	assert.Equal(t, int64(0o600), second["etc/x"].Mode)
}

func TestTheCommandLineRefusesAMissingTagAndAPathWithoutADestination(t *testing.T) {
	out := filepath.Join(t.TempDir(), "x.tar")
	for _, args := range [][]string{
		{"-o", out},
		{"-o", out, "-tag", "a/b:c", "-file", "no-destination"},
	} {
		assert.Error(t, run(args), "%q", args)
	}
}

func TestAnArchiveWithTwoTagsLoadsTheSameImageUnderBothNames(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "app")
	require.NoError(t, os.WriteFile(bin, []byte("#!/bin/true\n"), 0o755))
	out := filepath.Join(dir, "app.tar")
	require.NoError(t, run([]string{"-o", out, "-tag", "ghcr.io/premigrate/postgres:15", "-tag", "premigrate/postgres:15",
		"-file", bin + ":/app", "-entrypoint", "/app"}))
	var digests []string
	for _, n := range []string{"ghcr.io/premigrate/postgres:15", "premigrate/postgres:15"} {
		tag, err := name.NewTag(n)
		require.NoError(t, err)
		img, err := tarball.ImageFromPath(out, &tag)
		require.NoError(t, err, n)
		d, err := img.Digest()
		require.NoError(t, err)
		digests = append(digests, d.String())
	}
	assert.Equal(t, digests[0], digests[1])
}
