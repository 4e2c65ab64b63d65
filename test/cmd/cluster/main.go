// Command cluster brings the kind cluster of `make cluster` and `make demo` up or down.
//
//	go run ./test/cmd/cluster up   [--name premigrate] [--node-image IMG] [--kubeconfig PATH] [--images DIR]
//	go run ./test/cmd/cluster down [--name premigrate]
//
// `up` reuses a cluster of that name or creates it, then loads every *.tar image archive of --images.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/premigrate/premigrate/test/kindcluster"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 || (args[0] != "up" && args[0] != "down") {
		return fmt.Errorf("usage: cluster up|down [flags]")
	}
	cache := os.Getenv("PREMIGRATE_CACHE")
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	name := fs.String("name", kindcluster.Name(), "kind cluster name")
	image := fs.String("node-image", os.Getenv("KIND_NODE_IMAGE"), "kind node image (see hack/offline/kind/node-image.sh)")
	kubeconfig := fs.String("kubeconfig", filepath.Join(cache, "kubeconfig"), "where to write the kubeconfig")
	images := fs.String("images", filepath.Join(cache, "images"), "folder of image archives (*.tar) to load")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	start := time.Now()
	if args[0] == "down" {
		if err := kindcluster.Delete(*name); err != nil {
			return err
		}
		fmt.Printf("cluster %q deleted in %s\n", *name, time.Since(start).Round(time.Second))
		return nil
	}
	c, err := kindcluster.Ensure(kindcluster.Options{Name: *name, NodeImage: *image, Kubeconfig: *kubeconfig})
	if err != nil {
		return err
	}
	how := "reused"
	if c.Created {
		how = "created"
	}
	fmt.Printf("cluster %q %s in %s (kubeconfig: %s)\n", *name, how, time.Since(start).Round(time.Second), *kubeconfig)
	archives, err := filepath.Glob(filepath.Join(*images, "*.tar"))
	if err != nil {
		return fmt.Errorf("listing image archives: %w", err)
	}
	t := time.Now()
	n, err := c.LoadImageArchives(archives...)
	if err != nil {
		return err
	}
	fmt.Printf("images: %d of %d archives loaded in %s (the rest were loaded already)\n", n, len(archives), time.Since(t).Round(time.Second))
	return nil
}
