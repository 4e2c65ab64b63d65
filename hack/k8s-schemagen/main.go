// Command k8s-schemagen turns the Kubernetes OpenAPI v2 document (api/openapi-spec/swagger.json in the
// k8s.io/kubernetes module) into the standalone JSON schemas kubeconform reads, so manifests are validated
// with no network: OUT/v<version>-standalone[-strict]/<kind>[-<group>]-<version>.json.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

const refPrefix = "#/definitions/"

func main() {
	in := flag.String("in", "", "path of swagger.json")
	out := flag.String("out", "schemas", "output root folder")
	ver := flag.String("k8s-version", "", "Kubernetes version, e.g. 1.37.2")
	strict := flag.Bool("strict", true, "close every object that lists its properties (additionalProperties: false)")
	flag.Parse()
	n, dir, err := generate(*in, *out, *ver, *strict)
	if err != nil {
		fmt.Fprintln(os.Stderr, "k8s-schemagen:", err)
		os.Exit(1)
	}
	fmt.Printf("wrote %d schemas to %s\n", n, dir)
}

type converter struct {
	strict bool
}

// convert copies one schema node, dropping descriptions and Kubernetes extensions, letting every typed value
// be null (Helm renders empty values as null), and recording the definitions it refers to.
func (c converter) convert(node any, refs map[string]bool) any {
	switch n := node.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, v := range n {
			if strings.HasPrefix(k, "x-kubernetes-") || k == "description" {
				continue
			}
			out[k] = c.convert(v, refs)
		}
		if r, ok := out["$ref"].(string); ok {
			refs[strings.TrimPrefix(r, refPrefix)] = true
			return out
		}
		if out["format"] == "int-or-string" {
			return map[string]any{"oneOf": []any{map[string]any{"type": []any{"string", "null"}}, map[string]any{"type": "integer"}}}
		}
		if t, ok := out["type"].(string); ok {
			if _, has := out["properties"]; c.strict && t == "object" && has {
				if _, set := out["additionalProperties"]; !set {
					out["additionalProperties"] = false
				}
			}
			out["type"] = []any{t, "null"}
		}
		return out
	case []any:
		out := make([]any, len(n))
		for i, v := range n {
			out[i] = c.convert(v, refs)
		}
		return out
	}
	return node
}

func generate(in, outRoot, ver string, strict bool) (int, string, error) {
	if in == "" || ver == "" {
		return 0, "", errors.New("-in and -k8s-version are required")
	}
	raw, err := os.ReadFile(in)
	if err != nil {
		return 0, "", fmt.Errorf("reading the OpenAPI document: %w", err)
	}
	var doc struct {
		Definitions map[string]map[string]any `json:"definitions"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		return 0, "", fmt.Errorf("decoding %s: %w", in, err)
	}
	defs := doc.Definitions
	// a Quantity may be written as a number as well as a string
	defs["io.k8s.apimachinery.pkg.api.resource.Quantity"] = map[string]any{"oneOf": []any{
		map[string]any{"type": []any{"string", "null"}}, map[string]any{"type": "number"}}}
	suffix := ""
	if strict {
		suffix = "-strict"
	}
	dir := filepath.Join(outRoot, "v"+ver+"-standalone"+suffix)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, "", fmt.Errorf("creating %s: %w", dir, err)
	}
	c := converter{strict: strict}
	names := make([]string, 0, len(defs))
	for k := range defs {
		names = append(names, k)
	}
	sort.Strings(names)
	n := 0
	for _, name := range names {
		d := defs[name]
		gvks, _ := d["x-kubernetes-group-version-kind"].([]any)
		if len(gvks) != 1 { // shared types such as DeleteOptions and WatchEvent
			continue
		}
		g, _ := gvks[0].(map[string]any)
		group, _ := g["group"].(string)
		version, _ := g["version"].(string)
		kind, _ := g["kind"].(string)
		seen := map[string]bool{}
		root, _ := c.convert(d, seen).(map[string]any)
		closure := map[string]any{}
		queue := make([]string, 0, len(seen))
		for r := range seen {
			queue = append(queue, r)
		}
		for len(queue) > 0 {
			r := queue[0]
			queue = queue[1:]
			if _, done := closure[r]; done {
				continue
			}
			refs := map[string]bool{}
			closure[r] = c.convert(defs[r], refs)
			for rr := range refs {
				if _, done := closure[rr]; !done {
					queue = append(queue, rr)
				}
			}
		}
		apiVersion, file := version, strings.ToLower(kind)
		if group != "" {
			apiVersion = group + "/" + version
			file += "-" + strings.ToLower(strings.Split(group, ".")[0])
		}
		file += "-" + strings.ToLower(version) + ".json"
		props, ok := root["properties"].(map[string]any)
		if !ok {
			continue
		}
		props["apiVersion"] = map[string]any{"type": "string", "enum": []any{apiVersion}}
		props["kind"] = map[string]any{"type": "string", "enum": []any{kind}}
		root["type"] = "object"
		root["definitions"] = closure
		root["$schema"] = "http://json-schema.org/draft-04/schema#"
		b, err := json.Marshal(root)
		if err != nil {
			return n, dir, fmt.Errorf("encoding the schema of %s: %w", name, err)
		}
		if err := os.WriteFile(filepath.Join(dir, file), b, 0o644); err != nil {
			return n, dir, fmt.Errorf("writing %s: %w", file, err)
		}
		n++
	}
	return n, dir, nil
}
