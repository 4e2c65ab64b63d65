package render

import (
	"encoding/json"
	"slices"
	"sort"
	"strings"
	"testing"

	yamlv3 "go.yaml.in/yaml/v3"
)

// documentedPaths walks values.yaml and returns every key path that carries a helm-docs `# --`
// comment, and every key path that is neither documented itself nor fully documented below.
func documentedPaths(t *testing.T) (documented, undocumented []string) {
	t.Helper()
	var doc yamlv3.Node
	if err := yamlv3.Unmarshal([]byte(readChartFile(t, "values.yaml")), &doc); err != nil {
		t.Fatal(err)
	}
	var walk func(n *yamlv3.Node, prefix string) bool
	walk = func(n *yamlv3.Node, prefix string) bool {
		ok := true
		for i := 0; i+1 < len(n.Content); i += 2 {
			key, val := n.Content[i], n.Content[i+1]
			path := prefix + key.Value
			if hasDocComment(key.HeadComment) {
				documented = append(documented, path)
				continue
			}
			if val.Kind == yamlv3.MappingNode && len(val.Content) > 0 && walk(val, path+".") {
				continue
			}
			undocumented = append(undocumented, path)
			ok = false
		}
		return ok
	}
	walk(doc.Content[0], "")
	return documented, undocumented
}

func hasDocComment(c string) bool {
	for _, line := range strings.Split(c, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "# -- ") {
			return true
		}
	}
	return false
}

type jsonSchema map[string]any

func loadSchema(t *testing.T) jsonSchema {
	t.Helper()
	var s jsonSchema
	if err := json.Unmarshal([]byte(readChartFile(t, "values.schema.json")), &s); err != nil {
		t.Fatalf("values.schema.json: %v", err)
	}
	return s
}

func (s jsonSchema) props() map[string]any {
	p, _ := s["properties"].(map[string]any)
	return p
}

// Behaviour 7: every value is documented for helm-docs and typed by a closed draft-07 schema.
func TestEveryValueIsDocumentedAndTypedByTheSchema(t *testing.T) {
	documented, undocumented := documentedPaths(t)
	for _, p := range undocumented {
		t.Errorf("values.yaml key %s has no `# --` comment", p)
	}
	if len(documented) < 60 {
		t.Errorf("only %d documented values", len(documented))
	}

	schema := loadSchema(t)
	if schema["$schema"] != "http://json-schema.org/draft-07/schema#" {
		t.Errorf("$schema = %v, want draft-07", schema["$schema"])
	}

	// Objects of the chart (those with properties) are closed; free-form Kubernetes objects are not
	// described property by property. EnvVar items are Kubernetes objects too.
	// A "$ref" to "#/definitions/NAME" stands for that definition (its own description may be beside it).
	defs, _ := schema["definitions"].(map[string]any)
	resolve := func(s jsonSchema) jsonSchema {
		ref, ok := s["$ref"].(string)
		if !ok {
			return s
		}
		def, ok := defs[strings.TrimPrefix(ref, "#/definitions/")].(map[string]any)
		if !ok {
			t.Errorf("schema $ref %s names no definition", ref)
			return s
		}
		out := jsonSchema{}
		for k, v := range def {
			out[k] = v
		}
		for k, v := range s {
			if k != "$ref" {
				out[k] = v
			}
		}
		return out
	}
	var walk func(s jsonSchema, path string)
	walk = func(s jsonSchema, path string) {
		s = resolve(s)
		if _, ok := s["type"]; !ok && s["oneOf"] == nil {
			t.Errorf("schema %s has no type", path)
		}
		if props := s.props(); props != nil {
			// global stays open: Helm gives every chart its parent's globals, whatever they are
			if s["additionalProperties"] != false && path != "global" {
				t.Errorf("schema object %s is not closed (additionalProperties: false)", path)
			}
			for k, v := range props {
				child := jsonSchema(v.(map[string]any))
				if path != "" || k != "global" {
					if d, _ := resolve(child)["description"].(string); d == "" && !strings.HasSuffix(path, "[]") {
						t.Errorf("schema %s.%s has no description", path, k)
					}
				}
				walk(child, strings.TrimPrefix(path+"."+k, "."))
			}
		}
		if items, ok := s["items"].(map[string]any); ok {
			walk(jsonSchema(items), path+"[]")
		}
	}
	walk(schema, "")

	// Every key of values.yaml is in the schema and every schema property of ours is in values.yaml.
	var vals map[string]any
	if err := yamlv3.Unmarshal([]byte(readChartFile(t, "values.yaml")), &vals); err != nil {
		t.Fatal(err)
	}
	var compare func(v map[string]any, s jsonSchema, path string)
	compare = func(v map[string]any, s jsonSchema, path string) {
		props := s.props()
		if props == nil {
			return
		}
		for k, val := range v {
			child, ok := props[k].(map[string]any)
			if !ok {
				t.Errorf("values.yaml %s%s is not in the schema", path, k)
				continue
			}
			if m, ok := val.(map[string]any); ok {
				compare(m, child, path+k+".")
			}
		}
		for k := range props {
			if _, ok := v[k]; !ok && (path != "" || k != "global") {
				t.Errorf("schema property %s%s has no default in values.yaml", path, k)
			}
		}
	}
	compare(vals, schema, "")

	// The values the chart branches on are enums, integers have minimums, digests have a pattern.
	at := func(path string) jsonSchema {
		s := schema
		for _, p := range strings.Split(path, ".") {
			s = jsonSchema(s.props()[p].(map[string]any))
		}
		return s
	}
	enum := func(path string) []string {
		var out []string
		for _, v := range at(path)["enum"].([]any) {
			out = append(out, v.(string))
		}
		sort.Strings(out)
		return out
	}
	if got := enum("migration.mode"); !equalStrings(got, []string{"argocd", "hook", "job"}) {
		t.Errorf("migration.mode enum %v", got)
	}
	if got := enum("gate.mode"); !equalStrings(got, []string{"command", "job", "none", "watch"}) {
		t.Errorf("gate.mode enum %v", got)
	}
	for _, p := range []string{"replicaCount", "migration.backoffLimit", "migration.activeDeadlineSeconds", "migration.ttlSecondsAfterFinished", "migration.keepRecords", "terminationGracePeriodSeconds"} {
		if _, ok := at(p)["minimum"]; !ok {
			t.Errorf("%s has no minimum", p)
		}
	}
	ttl := at("migration.ttlSecondsAfterFinished")
	if types, _ := json.Marshal(ttl["type"]); string(types) != `["integer","null"]` || ttl["minimum"] != float64(0) {
		t.Errorf("ttlSecondsAfterFinished schema %v", ttl)
	}
	for _, p := range []string{"image.digest", "migration.image.digest", "gate.image.digest", "postgresql.image.digest"} {
		if pat, _ := at(p)["pattern"].(string); !strings.Contains(pat, "^sha256:[a-f0-9]{64}$") {
			t.Errorf("%s pattern %q", p, pat)
		}
	}
}

// The chart README's values table (written by helm-docs) types each value as the schema does: a table that
// says "string" where the schema takes an object sends a reader into a schema error (issue 26 item 7).
func TestTheReadmesValueTypesAreTheTypesTheSchemaTakes(t *testing.T) {
	schema := loadSchema(t)
	defs, _ := schema["definitions"].(map[string]any)
	lookup := func(key string) jsonSchema {
		node := schema
		for _, part := range strings.Split(key, ".") {
			child, ok := node.props()[part].(map[string]any)
			if !ok {
				return nil
			}
			node = child
			if ref, ok := node["$ref"].(string); ok {
				node = defs[strings.TrimPrefix(ref, "#/definitions/")].(map[string]any)
			}
		}
		return node
	}
	takes := func(s jsonSchema) []string {
		var out []string
		add := func(v any) {
			switch ty := v.(type) {
			case string:
				out = append(out, ty)
			case []any:
				for _, x := range ty {
					out = append(out, x.(string))
				}
			}
		}
		add(s["type"])
		for _, alt := range []string{"oneOf", "anyOf"} {
			list, _ := s[alt].([]any)
			for _, a := range list {
				add(a.(map[string]any)["type"])
			}
		}
		return out
	}
	helmDocsType := map[string]string{"string": "string", "int": "integer", "float": "number", "bool": "boolean",
		"object": "object", "list": "array"}
	rows := 0
	inTable := false
	for _, line := range strings.Split(readChartFile(t, "README.md"), "\n") {
		if strings.HasPrefix(line, "| Key | Type | Default | Description |") {
			inTable = true
			continue
		}
		if !inTable || strings.HasPrefix(line, "|-") {
			continue
		}
		if !strings.HasPrefix(line, "| ") {
			break
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		key, typ := strings.Trim(strings.TrimSpace(cells[0]), "`"), strings.TrimSpace(cells[1])
		rows++
		s := lookup(key)
		if s == nil {
			t.Errorf("README value %s is not in values.schema.json", key)
			continue
		}
		allowed := takes(s)
		for _, word := range strings.Split(typ, " or ") {
			want, known := helmDocsType[word]
			switch {
			case !known:
				t.Errorf("README value %s has type %q, which is no helm-docs type (%v)", key, typ, helmDocsType)
			case want == "integer" && slices.Contains(allowed, "number"):
			case !slices.Contains(allowed, want):
				t.Errorf("README value %s has type %q, but the schema takes %v: give it a `# -- (TYPE)` annotation in values.yaml", key, typ, allowed)
			}
		}
	}
	if rows < 60 {
		t.Fatalf("found %d rows in the README's values table, want the whole table", rows)
	}
}
