package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// pushOptions are the options of `release push`.
type pushOptions struct {
	Layout    string // OCI image layout folder
	To        string // registry path that replaces ghcr.io/premigrate; empty: ghcr.io/premigrate
	PlainHTTP bool   // HTTP instead of HTTPS
}

// destination is where the layout's reference ref goes: ref itself, or below to instead of ghcr.io/premigrate.
func destination(ref, to string) (string, error) {
	rest, ok := strings.CutPrefix(ref, registry+"/")
	if !ok {
		return "", fmt.Errorf("%s: not a reference below %s", ref, registry)
	}
	if to == "" {
		return ref, nil
	}
	return strings.TrimSuffix(to, "/") + "/" + rest, nil
}

// push copies every reference of the layout to its destination, digests unchanged, and prints
// `<destination>@<digest>` for each.
func push(ctx context.Context, opts pushOptions, stdout io.Writer) error {
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
	if len(im.Manifests) == 0 {
		return fmt.Errorf("%s: the layout holds no reference (run make release)", opts.Layout)
	}
	var nameOpts []name.Option
	if opts.PlainHTTP {
		nameOpts = append(nameOpts, name.Insecure)
	}
	remoteOpts := []remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)}
	for _, d := range im.Manifests {
		ref := d.Annotations[annotationRefName]
		dest, err := destination(ref, opts.To)
		if err != nil {
			return fmt.Errorf("%s: %w", opts.Layout, err)
		}
		tag, err := name.NewTag(dest, nameOpts...)
		if err != nil {
			return fmt.Errorf("%s: %w", dest, err)
		}
		t := time.Now()
		switch d.MediaType {
		case types.OCIImageIndex, types.DockerManifestList:
			idx, err := ii.ImageIndex(d.Digest)
			if err != nil {
				return fmt.Errorf("%s: reading the index: %w", ref, err)
			}
			err = remote.WriteIndex(tag, idx, remoteOpts...)
			if err != nil {
				return fmt.Errorf("pushing %s to %s: %w", ref, dest, err)
			}
		case types.OCIManifestSchema1, types.DockerManifestSchema2:
			img, err := ii.Image(d.Digest)
			if err != nil {
				return fmt.Errorf("%s: reading the manifest: %w", ref, err)
			}
			if err := remote.Write(tag, img, remoteOpts...); err != nil {
				return fmt.Errorf("pushing %s to %s: %w", ref, dest, err)
			}
		default:
			return fmt.Errorf("%s: media type %s is neither an image index nor a manifest", ref, d.MediaType)
		}
		if err := checkPushed(tag, d.Digest, remoteOpts); err != nil {
			return err
		}
		slog.Info("pushed", "ref", ref, "to", dest, "digest", d.Digest.String(), "took", time.Since(t).Round(time.Millisecond))
		_, _ = fmt.Fprintf(stdout, "%s@%s\n", dest, d.Digest)
	}
	return nil
}

// checkPushed asks the registry what the tag now names: the layout's digest, or the push did not do its job.
func checkPushed(tag name.Tag, want v1.Hash, opts []remote.Option) error {
	got, err := remote.Head(tag, opts...)
	if err != nil {
		return fmt.Errorf("asking %s for what it pushed: %w", tag, err)
	}
	if got.Digest != want {
		return fmt.Errorf("%s names %s after the push, want %s", tag, got.Digest, want)
	}
	return nil
}
