// Package framework is what the cluster tests are built from, beside the scenarios themselves: the
// environment of a run (Env: the kind cluster, its clients, the chart, the pinned CLIs), one process runner
// (Runner, on terratest's shell module), namespaces under the restricted Pod Security Standard, releases of the
// chart driven by Helm 3 or 4 (Release: deploy, psql, the witness), the in-cluster load (Load), polling
// (WaitUntil), the chart values and their one merge (Merge), and the declared scenarios with the promise each
// proves (Scenarios). It holds no package state: a test package makes one Env in its TestMain.
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

// BaseValues are what every scenario's release starts from: two replicas, so a rollout has pods of two
// identities at once.
func BaseValues() map[string]any {
	return map[string]any{"replicaCount": 2}
}
