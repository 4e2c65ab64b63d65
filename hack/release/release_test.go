package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/crane"
	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/premigrate/premigrate/hack/imagebuild"
)

// The tests cross-compile testdata/hello (a second each) instead of the real commands.
const helloPkg = "./testdata/hello"

var created = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func testImages() []imageSpec {
	return []imageSpec{
		{Ref: "ghcr.io/premigrate/gate:1.2.3", Binaries: map[string]string{helloPkg: "/gate"},
			Entrypoint: []string{"/gate"}, User: "65532:65532", Env: []string{pathEnv}},
		{Ref: "ghcr.io/premigrate/demo:1.2.3", Binaries: map[string]string{helloPkg: "/demo"},
			Entrypoint: []string{"/demo"}, User: "65532:65532", Env: []string{pathEnv, "DEMO_VERSION=1"}},
	}
}

// testChart writes a packaged chart named name at version into dir.
func testChart(t *testing.T, dir, name, version string) string {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, f := range []struct{ name, body string }{
		{name + "/Chart.yaml", "apiVersion: v2\nname: " + name + "\ndescription: test\ntype: application\nversion: " + version +
			"\nappVersion: \"1.2.3\"\nhome: https://example.invalid\nsources:\n  - https://example.invalid/src\n"},
		{name + "/values.yaml", "replicas: 1\n"},
	} {
		require.NoError(t, tw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.body)), Typeflag: tar.TypeReg}))
		_, err := io.WriteString(tw, f.body)
		require.NoError(t, err)
	}
	require.NoError(t, tw.Close())
	require.NoError(t, zw.Close())
	p := filepath.Join(dir, name+"-"+version+".tgz")
	require.NoError(t, os.WriteFile(p, buf.Bytes(), 0o644))
	return p
}

func buildTestLayout(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	out := filepath.Join(dir, "oci")
	var stdout bytes.Buffer
	err := run(context.Background(), options{Command: "build", Build: buildOptions{
		Out: out, AppVersion: "1.2.3", Charts: []string{testChart(t, dir, "premigrate", "0.9.1"), testChart(t, dir, "premigrate-lib", "0.4.2")}, Repo: ".", Created: created, Images: testImages(),
	}}, &stdout)
	require.NoError(t, err)
	return out
}

func verifyLayout(layoutDir string) (string, error) {
	var stdout bytes.Buffer
	err := run(context.Background(), options{Command: "verify", Verify: verifyOptions{Layout: layoutDir}}, &stdout)
	return stdout.String(), err
}

// hello cross-compiles testdata/hello once per architecture.
var hello = struct {
	once sync.Once
	dir  string
	err  error
}{}

func helloBinary(t *testing.T, arch string) string {
	t.Helper()
	hello.once.Do(func() {
		hello.dir, hello.err = os.MkdirTemp("", "release-test-")
		for _, p := range platforms {
			if hello.err == nil {
				hello.err = goBuild(context.Background(), ".", p.Architecture, "test", filepath.Join(hello.dir, p.Architecture), helloPkg)
			}
		}
	})
	require.NoError(t, hello.err)
	return filepath.Join(hello.dir, arch, "hello")
}

func TestMain(m *testing.M) {
	code := m.Run()
	if hello.dir != "" {
		_ = os.RemoveAll(hello.dir)
	}
	os.Exit(code)
}

// platformImage is one platform's gate image holding the binary at /gate.
func platformImage(t *testing.T, p v1.Platform, binary string) v1.Image {
	t.Helper()
	base, err := imagebuild.Base(created, imagebuild.OCI)
	require.NoError(t, err)
	app, err := fileLayer(filepath.Join(t.TempDir(), "layer.tar"), "", map[string]string{binary: "/gate"}, created)
	require.NoError(t, err)
	img, err := image(p, []v1.Layer{base, app}, testImages()[0], created)
	require.NoError(t, err)
	return img
}

// writeLayout writes one index of the given platforms' images as ghcr.io/premigrate/gate:1.2.3, plus a good demo
// image and chart, so that only the gate is wrong.
func writeLayout(t *testing.T, adds ...mutate.IndexAddendum) string {
	t.Helper()
	good := buildTestLayout(t)
	lp, err := layout.FromPath(good)
	require.NoError(t, err)
	require.NoError(t, lp.RemoveDescriptors(func(d v1.Descriptor) bool {
		return d.Annotations[annotationRefName] == "ghcr.io/premigrate/gate:1.2.3"
	}))
	idx := mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex), adds...)
	require.NoError(t, lp.AppendIndex(idx, layout.WithAnnotations(map[string]string{annotationRefName: "ghcr.io/premigrate/gate:1.2.3"})))
	return good
}

func addendum(img v1.Image, p v1.Platform) mutate.IndexAddendum {
	return mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &p}}
}

func TestBuildWritesMultiPlatformIndexesAndAChartThatVerifyAccepts(t *testing.T) {
	out := buildTestLayout(t)
	table, err := verifyLayout(out)
	require.NoError(t, err, table)
	t.Log("\n" + table)
	for _, want := range []string{
		"ghcr.io/premigrate/gate:1.2.3", "ghcr.io/premigrate/demo:1.2.3", "ghcr.io/premigrate/charts/premigrate:0.9.1",
		"linux/amd64", "linux/arm64/v8", "/gate EM_X86_64", "/gate EM_AARCH64", "/demo EM_AARCH64",
		"premigrate/Chart.yaml version 0.9.1", "ghcr.io/premigrate/charts/premigrate-lib:0.4.2", "premigrate-lib/Chart.yaml version 0.4.2",
	} {
		assert.Contains(t, table, want)
	}
	assert.NotContains(t, table, "FAIL")

	var stdout bytes.Buffer
	err = run(context.Background(), options{Command: "verify", Verify: verifyOptions{Layout: out, AppVersion: "1.2.3", ChartVersion: "0.9.1"}}, &stdout)
	require.NoError(t, err)
}

func TestTheImagesCarryTheConfigOfHackImagesSh(t *testing.T) {
	lp, err := layout.FromPath(buildTestLayout(t))
	require.NoError(t, err)
	ii, err := lp.ImageIndex()
	require.NoError(t, err)
	im, err := ii.IndexManifest()
	require.NoError(t, err)
	var demo *v1.Descriptor
	for i, d := range im.Manifests {
		if d.Annotations[annotationRefName] == "ghcr.io/premigrate/demo:1.2.3" {
			demo = &im.Manifests[i]
		}
	}
	require.NotNil(t, demo, "the layout has ghcr.io/premigrate/demo:1.2.3")
	assert.Equal(t, types.OCIImageIndex, demo.MediaType)
	idx, err := ii.ImageIndex(demo.Digest)
	require.NoError(t, err)
	m, err := idx.IndexManifest()
	require.NoError(t, err)
	require.Len(t, m.Manifests, 2)
	img, err := idx.Image(m.Manifests[1].Digest)
	require.NoError(t, err)
	cf, err := img.ConfigFile()
	require.NoError(t, err)
	assert.Equal(t, "arm64", cf.Architecture)
	assert.Equal(t, []string{"/demo"}, cf.Config.Entrypoint)
	assert.Equal(t, "65532:65532", cf.Config.User)
	assert.Equal(t, []string{pathEnv, "DEMO_VERSION=1"}, cf.Config.Env)
	assert.True(t, cf.Created.Equal(created), "the config's created is the fixed timestamp")

	files, err := readFiles(img, []string{"/etc/passwd", "/etc/group", "/etc/nsswitch.conf"})
	require.NoError(t, err)
	assert.Contains(t, string(files["/etc/passwd"]), "nonroot:x:65532:65532:")
	assert.Contains(t, string(files["/etc/group"]), "nonroot:x:65532:")
	assert.Equal(t, "hosts: files dns\n", string(files["/etc/nsswitch.conf"]))

	layers, err := img.Layers()
	require.NoError(t, err)
	rc, err := layers[0].Uncompressed()
	require.NoError(t, err)
	defer func() { _ = rc.Close() }()
	tr := tar.NewReader(rc)
	var tmpMode int64 = -1
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		if h.Name == "tmp/" {
			tmpMode = h.Mode
		}
	}
	assert.Equal(t, int64(0o1777), tmpMode, "/tmp is sticky and world-writable")
}

func TestBuildingTwiceGivesTheSameDigests(t *testing.T) {
	read := func(dir string) string {
		b, err := os.ReadFile(filepath.Join(dir, "index.json"))
		require.NoError(t, err)
		return string(b)
	}
	assert.Equal(t, read(buildTestLayout(t)), read(buildTestLayout(t)))
}

func TestVerifyFailsWhenAnIndexHasNoArm64Manifest(t *testing.T) {
	out := writeLayout(t, addendum(platformImage(t, platforms[0], helloBinary(t, "amd64")), platforms[0]))
	table, err := verifyLayout(out)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "ghcr.io/premigrate/gate:1.2.3: the index has no linux/arm64 manifest")
	assert.Contains(t, table, "MISSING")
	assert.NotContains(t, err.Error(), "ghcr.io/premigrate/demo", "only the gate is wrong")
}

func TestVerifyFailsWhenTheArm64ManifestHoldsAnAmd64Binary(t *testing.T) {
	out := writeLayout(t,
		addendum(platformImage(t, platforms[0], helloBinary(t, "amd64")), platforms[0]),
		addendum(platformImage(t, platforms[1], helloBinary(t, "amd64")), platforms[1]))
	table, err := verifyLayout(out)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "ghcr.io/premigrate/gate:1.2.3 linux/arm64/v8: /gate is an ELF binary for EM_X86_64, want EM_AARCH64")
	assert.Contains(t, table, "FAIL: /gate is an ELF binary for EM_X86_64")
}

func TestVerifyFailsWhenAConfigNamesAnotherPlatformThanItsIndex(t *testing.T) {
	out := writeLayout(t,
		addendum(platformImage(t, platforms[0], helloBinary(t, "amd64")), platforms[0]),
		addendum(platformImage(t, platforms[0], helloBinary(t, "amd64")), platforms[1]))
	_, err := verifyLayout(out)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "ghcr.io/premigrate/gate:1.2.3 linux/arm64/v8: the config says linux/amd64, the index linux/arm64/v8")
}

func TestVerifyFailsWhenTheChartIsNotTheExpectedVersion(t *testing.T) {
	out := buildTestLayout(t)
	var stdout bytes.Buffer
	err := run(context.Background(), options{Command: "verify", Verify: verifyOptions{Layout: out, ChartVersion: "1.0.0"}}, &stdout)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "ghcr.io/premigrate/charts/premigrate: tagged 0.9.1, want 1.0.0")
}

func TestVerifyFailsWhenPostgresIsRequiredButMissing(t *testing.T) {
	out := buildTestLayout(t)
	var stdout bytes.Buffer
	err := run(context.Background(), options{Command: "verify", Verify: verifyOptions{Layout: out, RequirePostgres: true}}, &stdout)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "ghcr.io/premigrate/postgres: not in the layout")
}

func TestARootfsLayerKeepsModesSymlinksAndTheBinaryOnTop(t *testing.T) {
	root := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(root, "usr/bin"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(root, "var/run/postgresql"), 0o755))
	require.NoError(t, os.Chmod(filepath.Join(root, "var/run/postgresql"), 0o777|os.ModeSticky))
	require.NoError(t, os.Symlink("usr/bin", filepath.Join(root, "bin")))
	require.NoError(t, os.Symlink("/usr/local/bin/app", filepath.Join(root, "usr/bin/app")))

	l, err := fileLayer(filepath.Join(t.TempDir(), "l.tar"), root, map[string]string{helloBinary(t, "arm64"): "/usr/local/bin/app"}, created)
	require.NoError(t, err)
	img, err := mutate.AppendLayers(empty.Image, l)
	require.NoError(t, err)

	files, err := readFiles(img, []string{"/bin/app"})
	require.NoError(t, err)
	assert.True(t, bytes.HasPrefix(files["/bin/app"], []byte("\x7fELF")), "the symlinks /bin -> usr/bin, /usr/bin/app -> /usr/local/bin/app are followed")

	rc, err := l.Uncompressed()
	require.NoError(t, err)
	defer func() { _ = rc.Close() }()
	tr := tar.NewReader(rc)
	modes := map[string]int64{}
	var names []string
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		names = append(names, h.Name)
		modes[h.Name] = h.Mode
		assert.True(t, h.ModTime.Equal(created), "%s has the fixed timestamp", h.Name)
		assert.Zero(t, h.Uid, h.Name)
	}
	assert.Equal(t, int64(0o1777), modes["var/run/postgresql/"])
	assert.Equal(t, "usr/local/bin/app", names[len(names)-1], "the binaries come after the tree: %s", strings.Join(names, " "))
}

func TestTheCommandLineNeedsTheAppVersionTheChartAndBothRootfsOrNone(t *testing.T) {
	_, err := parseArgs([]string{"build", "--app-version", "1.2.3"})
	require.ErrorIs(t, err, errUsage)
	_, err = parseArgs([]string{"build", "--app-version", "1.2.3", "--chart", "c.tgz", "--postgres-rootfs-amd64", "/x"})
	require.ErrorIs(t, err, errUsage)
	_, err = parseArgs([]string{"publish"})
	require.ErrorIs(t, err, errUsage)

	t.Setenv("SOURCE_DATE_EPOCH", "1700000000")
	opts, err := parseArgs([]string{"build", "--app-version", "1.2.3", "--chart", "c.tgz",
		"--postgres-rootfs-amd64", "/a", "--postgres-rootfs-arm64", "/b"})
	require.NoError(t, err)
	assert.Equal(t, int64(1700000000), opts.Build.Created.Unix())
	refs := []string{}
	for _, im := range opts.Build.Images {
		refs = append(refs, im.Ref)
	}
	assert.Equal(t, []string{"ghcr.io/premigrate/gate:1.2.3", "ghcr.io/premigrate/demo:1.2.3", "ghcr.io/premigrate/postgres:15"}, refs)
	assert.Equal(t, map[string]string{"amd64": "/a", "arm64": "/b"}, opts.Build.Images[2].Rootfs)
}

func TestVerifyFailsWhenTheLibraryChartIsMissing(t *testing.T) {
	out := buildTestLayout(t)
	lp, err := layout.FromPath(out)
	require.NoError(t, err)
	require.NoError(t, lp.RemoveDescriptors(func(d v1.Descriptor) bool {
		return d.Annotations[annotationRefName] == "ghcr.io/premigrate/charts/premigrate-lib:0.4.2"
	}))
	_, err = verifyLayout(out)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "ghcr.io/premigrate/charts/premigrate-lib: not in the layout")
}

func TestPushCopiesEveryReferenceBelowTheGivenRegistryWithItsDigest(t *testing.T) {
	out := buildTestLayout(t)
	srv := httptest.NewServer(ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")

	var stdout bytes.Buffer
	err := run(context.Background(), options{Command: "push", Push: pushOptions{Layout: out, To: host + "/mirror", PlainHTTP: true}}, &stdout)
	require.NoError(t, err)

	lp, err := layout.FromPath(out)
	require.NoError(t, err)
	ii, err := lp.ImageIndex()
	require.NoError(t, err)
	im, err := ii.IndexManifest()
	require.NoError(t, err)
	var want []string
	for _, d := range im.Manifests {
		ref := d.Annotations[annotationRefName]
		dest := host + "/mirror/" + strings.TrimPrefix(ref, "ghcr.io/premigrate/")
		want = append(want, dest+"@"+d.Digest.String())
		// what the registry serves, asked without the pusher's code
		got, err := crane.Digest(dest, crane.Insecure)
		require.NoError(t, err, dest)
		assert.Equal(t, d.Digest.String(), got, dest)
	}
	assert.Equal(t, strings.Join(want, "\n")+"\n", stdout.String())
	assert.Contains(t, stdout.String(), host+"/mirror/charts/premigrate-lib:0.4.2@sha256:")
	assert.Contains(t, stdout.String(), host+"/mirror/gate:1.2.3@sha256:")
}

func TestPushRefusesAReferenceOutsideThePublishedRegistry(t *testing.T) {
	_, err := destination("docker.io/premigrate/gate:1.2.3", "")
	require.Error(t, err)
	d, err := destination("ghcr.io/premigrate/charts/premigrate:0.9.1", "localhost:5000/x/")
	require.NoError(t, err)
	assert.Equal(t, "localhost:5000/x/charts/premigrate:0.9.1", d)
	d, err = destination("ghcr.io/premigrate/gate:1.2.3", "")
	require.NoError(t, err)
	assert.Equal(t, "ghcr.io/premigrate/gate:1.2.3", d)
}

// The workflows run third-party actions with the publishing token's rights: each is pinned by the commit it
// runs (a tag can be moved to other code), with its version beside it in a comment.
func TestEveryActionTheWorkflowsUseIsPinnedByItsCommit(t *testing.T) {
	files, err := filepath.Glob("../../.github/workflows/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no workflows found (%v)", err)
	}
	uses := regexp.MustCompile(`^\s*-?\s*uses:\s*(\S+)(.*)$`)
	pinned := regexp.MustCompile(`^[\w.-]+/[\w./-]+@[0-9a-f]{40}$`)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			m := uses.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			if !pinned.MatchString(m[1]) || !strings.Contains(m[2], "# v") {
				t.Errorf("%s:%d: %s is not pinned by a commit with its version in a comment (owner/action@<40 hex> # vX.Y.Z)", filepath.Base(f), i+1, m[1])
			}
		}
	}
}
