// Command k8s-schemagen turns the Kubernetes OpenAPI v2 document (api/openapi-spec/swagger.json in the
// k8s.io/kubernetes module) into the standalone JSON schemas kubeconform reads, so manifests are validated
// with no network: OUT/v<version>-standalone[-strict]/<kind>[-<group>]-<version>.json. Each -crd file (a
// CustomResourceDefinition, e.g. Gateway API's HTTPRoute) adds the schemas of its served versions, named the
// same way, with the Kubernetes ObjectMeta as their metadata.
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

	"sigs.k8s.io/yaml"
)

const (
	refPrefix  = "#/definitions/"
	objectMeta = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
)

// files is a repeatable flag.
type files []string

func (f *files) String() string     { return strings.Join(*f, ",") }
func (f *files) Set(v string) error { *f = append(*f, v); return nil }

func main() {
	in := flag.String("in", "", "path of swagger.json")
	out := flag.String("out", "schemas", "output root folder")
	ver := flag.String("k8s-version", "", "Kubernetes version, e.g. 1.37.2")
	strict := flag.Bool("strict", true, "close every object that lists its properties (additionalProperties: false)")
	var crds files
	flag.Var(&crds, "crd", "path of a CustomResourceDefinition YAML file whose served versions get schemas too (repeatable)")
	flag.Parse()
	n, dir, err := generate(*in, *out, *ver, *strict, crds)
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

// closure converts the definitions that seen refers to, and those they refer to, transitively.
func (c converter) closure(defs map[string]map[string]any, seen map[string]bool) map[string]any {
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
	return closure
}

// write completes root as the standalone schema of group/version/kind and writes it to dir.
func write(dir string, root map[string]any, closure map[string]any, group, version, kind string) (bool, error) {
	apiVersion, file := version, strings.ToLower(kind)
	if group != "" {
		apiVersion = group + "/" + version
		file += "-" + strings.ToLower(strings.Split(group, ".")[0])
	}
	file += "-" + strings.ToLower(version) + ".json"
	props, ok := root["properties"].(map[string]any)
	if !ok {
		return false, nil
	}
	props["apiVersion"] = map[string]any{"type": "string", "enum": []any{apiVersion}}
	props["kind"] = map[string]any{"type": "string", "enum": []any{kind}}
	root["type"] = "object"
	root["definitions"] = closure
	root["$schema"] = "http://json-schema.org/draft-04/schema#"
	b, err := json.Marshal(root)
	if err != nil {
		return false, fmt.Errorf("encoding the schema of %s %s: %w", apiVersion, kind, err)
	}
	if err := os.WriteFile(filepath.Join(dir, file), b, 0o644); err != nil {
		return false, fmt.Errorf("writing %s: %w", file, err)
	}
	return true, nil
}

// crd is the part of a CustomResourceDefinition the schemas are made of.
type crd struct {
	Spec struct {
		Group string `json:"group"`
		Names struct {
			Kind string `json:"kind"`
		} `json:"names"`
		Versions []struct {
			Name   string `json:"name"`
			Served bool   `json:"served"`
			Schema struct {
				OpenAPIV3Schema map[string]any `json:"openAPIV3Schema"`
			} `json:"schema"`
		} `json:"versions"`
	} `json:"spec"`
}

// generateCRD writes the schema of every served version of the CustomResourceDefinition in path. Its
// metadata, a bare object in the CRD, is the Kubernetes ObjectMeta.
func (c converter) generateCRD(path, dir string, defs map[string]map[string]any) (int, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("reading the CustomResourceDefinition: %w", err)
	}
	var d crd
	if err := yaml.Unmarshal(raw, &d); err != nil {
		return 0, fmt.Errorf("decoding %s: %w", path, err)
	}
	if d.Spec.Group == "" || d.Spec.Names.Kind == "" {
		return 0, fmt.Errorf("%s is not a CustomResourceDefinition (no spec.group or spec.names.kind)", path)
	}
	n := 0
	for _, v := range d.Spec.Versions {
		if !v.Served || v.Schema.OpenAPIV3Schema == nil {
			continue
		}
		seen := map[string]bool{}
		root, _ := c.convert(v.Schema.OpenAPIV3Schema, seen).(map[string]any)
		if props, ok := root["properties"].(map[string]any); ok {
			if _, has := props["metadata"]; has {
				props["metadata"] = map[string]any{"$ref": refPrefix + objectMeta}
				seen[objectMeta] = true
			}
		}
		ok, err := write(dir, root, c.closure(defs, seen), d.Spec.Group, v.Name, d.Spec.Names.Kind)
		if err != nil {
			return n, err
		}
		if ok {
			n++
		}
	}
	if n == 0 {
		return 0, fmt.Errorf("%s has no served version with a schema", path)
	}
	return n, nil
}

func generate(in, outRoot, ver string, strict bool, crds []string) (int, string, error) {
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
		ok, err := write(dir, root, c.closure(defs, seen), group, version, kind)
		if err != nil {
			return n, dir, err
		}
		if ok {
			n++
		}
	}
	for _, path := range crds {
		m, err := c.generateCRD(path, dir, defs)
		n += m
		if err != nil {
			return n, dir, err
		}
	}
	return n, dir, nil
}
