package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
)

// The media types of a chart pushed by `helm push` (helm.sh/helm/v3/pkg/registry).
const (
	helmConfigMediaType  types.MediaType = "application/vnd.cncf.helm.config.v1+json"
	helmContentMediaType types.MediaType = "application/vnd.cncf.helm.chart.content.v1.tar+gzip"
	chartRefPrefix                       = registry + "/charts/"
)

// chartArtifact is the packaged chart as the OCI artifact `helm push` makes: the config is the Chart.yaml
// metadata as JSON, the one layer the .tgz itself, the manifest annotated as Helm annotates it (with created
// fixed). It returns the artifact and its reference ghcr.io/premigrate/charts/<name>:<version>.
func chartArtifact(tgz string, created time.Time) (v1.Image, string, error) {
	data, err := os.ReadFile(tgz)
	if err != nil {
		return nil, "", err
	}
	ch, err := loader.LoadArchive(bytes.NewReader(data))
	if err != nil {
		return nil, "", fmt.Errorf("loading the chart %s: %w", tgz, err)
	}
	config, err := json.Marshal(ch.Metadata)
	if err != nil {
		return nil, "", err
	}
	layer := static.NewLayer(data, helmContentMediaType)
	art := &artifact{config: config, layer: layer}
	ld, err := partial.Descriptor(layer)
	if err != nil {
		return nil, "", err
	}
	cd := v1.Descriptor{MediaType: helmConfigMediaType, Size: int64(len(config))}
	if cd.Digest, _, err = v1.SHA256(bytes.NewReader(config)); err != nil {
		return nil, "", err
	}
	m := v1.Manifest{SchemaVersion: 2, MediaType: types.OCIManifestSchema1, Config: cd, Layers: []v1.Descriptor{*ld},
		Annotations: helmAnnotations(ch.Metadata, created)}
	if art.manifest, err = json.Marshal(m); err != nil {
		return nil, "", err
	}
	img, err := partial.CompressedToImage(art)
	if err != nil {
		return nil, "", err
	}
	return img, chartRefPrefix + ch.Metadata.Name + ":" + ch.Metadata.Version, nil
}

// helmAnnotations are the manifest annotations helm push writes (helm.sh/helm/v3/pkg/registry generateOCIAnnotations).
func helmAnnotations(md *chart.Metadata, created time.Time) map[string]string {
	a := map[string]string{
		"org.opencontainers.image.title":   md.Name,
		"org.opencontainers.image.version": md.Version,
		"org.opencontainers.image.created": created.Format(time.RFC3339),
	}
	if md.Description != "" {
		a["org.opencontainers.image.description"] = md.Description
	}
	if md.Home != "" {
		a["org.opencontainers.image.url"] = md.Home
	}
	if len(md.Sources) > 0 {
		a["org.opencontainers.image.source"] = md.Sources[0]
	}
	var authors []string
	for _, m := range md.Maintainers {
		if m != nil && m.Name != "" {
			s := m.Name
			if m.Email != "" {
				s += " (" + m.Email + ")"
			}
			authors = append(authors, s)
		}
	}
	if len(authors) > 0 {
		a["org.opencontainers.image.authors"] = strings.Join(authors, ", ")
	}
	return a
}

// artifact is an OCI manifest whose config is not an image config (partial.CompressedImageCore).
type artifact struct {
	config, manifest []byte
	layer            v1.Layer
}

func (a *artifact) RawConfigFile() ([]byte, error)      { return a.config, nil }
func (a *artifact) MediaType() (types.MediaType, error) { return types.OCIManifestSchema1, nil }
func (a *artifact) RawManifest() ([]byte, error)        { return a.manifest, nil }
func (a *artifact) LayerByDigest(h v1.Hash) (partial.CompressedLayer, error) {
	if d, err := a.layer.Digest(); err == nil && d == h {
		return a.layer, nil
	}
	return nil, fmt.Errorf("the chart artifact has no layer %s", h)
}
