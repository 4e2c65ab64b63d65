// Package framework is what the cluster tests are built from, beside the scenarios themselves. It starts with
// the chart values the scenarios deploy; the rest of the harness (releases, namespaces, the process runner,
// the witness, the report) moves here from test/e2e step by step (docs/development.md).
package framework

// Merge returns the chart values of layers merged in order, as Helm merges several --values files: a map
// merges into the map under the same key, anything else (a list, a string, a number) replaces what was there.
// No layer is modified, and the result shares no map with them.
func Merge(layers ...map[string]any) map[string]any {
	out := map[string]any{}
	for _, l := range layers {
		mergeInto(out, l)
	}
	return out
}

func mergeInto(dst, src map[string]any) {
	for k, v := range src {
		m, isMap := v.(map[string]any)
		if !isMap {
			dst[k] = v
			continue
		}
		into, ok := dst[k].(map[string]any)
		if !ok {
			into = map[string]any{}
			dst[k] = into
		}
		mergeInto(into, m)
	}
}

// EnvVar is a container environment variable as the chart's values take it (env, migration.env).
func EnvVar(name, value string) map[string]any { return map[string]any{"name": name, "value": value} }
