package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

const swagger = `{"definitions": {
  "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta": {"type": "object", "properties": {
    "name": {"type": "string"}, "labels": {"type": "object", "additionalProperties": {"type": "string"}}}},
  "io.k8s.api.core.v1.ConfigMap": {"type": "object",
    "x-kubernetes-group-version-kind": [{"group": "", "version": "v1", "kind": "ConfigMap"}],
    "properties": {"apiVersion": {"type": "string"}, "kind": {"type": "string"},
      "metadata": {"$ref": "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"},
      "data": {"type": "object", "additionalProperties": {"type": "string"}}}}}}`

const crdYAML = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: httproutes.gateway.networking.k8s.io
spec:
  group: gateway.networking.k8s.io
  names:
    kind: HTTPRoute
    plural: httproutes
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        description: a route
        type: object
        properties:
          apiVersion: {type: string}
          kind: {type: string}
          metadata: {type: object}
          spec:
            type: object
            x-kubernetes-validations: [{rule: "true"}]
            properties:
              hostnames: {type: array, maxItems: 16, items: {type: string}}
  - name: v1alpha1
    served: false
    storage: false
    schema:
      openAPIV3Schema: {type: object, properties: {spec: {type: object}}}
`

// A CRD's served versions become standalone strict schemas named as kubeconform looks them up
// ({{ .ResourceKind }}{{ .KindSuffix }}), with the Kubernetes ObjectMeta as their metadata.
func TestACRDBecomesAStrictStandaloneSchemaPerServedVersion(t *testing.T) {
	tmp := t.TempDir()
	in, crd := filepath.Join(tmp, "swagger.json"), filepath.Join(tmp, "crd.yaml")
	if err := os.WriteFile(in, []byte(swagger), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(crd, []byte(crdYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	n, dir, err := generate(in, filepath.Join(tmp, "out"), "1.37.2", true, []string{crd})
	if err != nil {
		t.Fatal(err)
	}
	if n != 2 || dir != filepath.Join(tmp, "out", "v1.37.2-standalone-strict") {
		t.Errorf("wrote %d schemas to %s, want 2 (ConfigMap, HTTPRoute v1) to .../v1.37.2-standalone-strict", n, dir)
	}
	if _, err := os.Stat(filepath.Join(dir, "httproute-gateway-v1alpha1.json")); !os.IsNotExist(err) {
		t.Errorf("a version that is not served has a schema (%v)", err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "httproute-gateway-v1.json"))
	if err != nil {
		t.Fatal(err)
	}
	var s map[string]any
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	props := s["properties"].(map[string]any)
	if got := props["apiVersion"].(map[string]any)["enum"]; !reflect.DeepEqual(got, []any{"gateway.networking.k8s.io/v1"}) {
		t.Errorf("apiVersion enum %v", got)
	}
	if got := props["kind"].(map[string]any)["enum"]; !reflect.DeepEqual(got, []any{"HTTPRoute"}) {
		t.Errorf("kind enum %v", got)
	}
	if got := props["metadata"]; !reflect.DeepEqual(got, map[string]any{"$ref": refPrefix + objectMeta}) {
		t.Errorf("metadata %v, want the ObjectMeta definition", got)
	}
	if _, ok := s["definitions"].(map[string]any)[objectMeta]; !ok {
		t.Error("the ObjectMeta definition is not in the schema")
	}
	spec := props["spec"].(map[string]any)
	if spec["additionalProperties"] != false || spec["x-kubernetes-validations"] != nil || s["description"] != nil {
		t.Errorf("spec %v is not closed, or keeps Kubernetes extensions and descriptions", spec)
	}
	hostnames := spec["properties"].(map[string]any)["hostnames"].(map[string]any)
	if hostnames["maxItems"] != float64(16) || !reflect.DeepEqual(hostnames["type"], []any{"array", "null"}) {
		t.Errorf("hostnames %v", hostnames)
	}
}

func TestAFileThatIsNoCRDIsRefused(t *testing.T) {
	tmp := t.TempDir()
	in, bad := filepath.Join(tmp, "swagger.json"), filepath.Join(tmp, "bad.yaml")
	if err := os.WriteFile(in, []byte(swagger), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("apiVersion: v1\nkind: ConfigMap\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := generate(in, filepath.Join(tmp, "out"), "1.37.2", true, []string{bad}); err == nil {
		t.Error("a ConfigMap was accepted as a CustomResourceDefinition")
	}
}
