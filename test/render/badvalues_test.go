package render

import (
	"strings"
	"testing"
)

// Bad values are refused, by the schema or by the chart's own checks, with an error that names the
// offending value.
func TestBadValuesAreRejectedNamingTheOffendingValue(t *testing.T) {
	for _, c := range []struct {
		name   string
		values string
		// path is the offending value, dotted; the error must name it (dotted or as a JSON pointer).
		path string
	}{
		{"a negative TTL", "migration: {ttlSecondsAfterFinished: -1}", "migration.ttlSecondsAfterFinished"},
		{"a TTL given as a string", `migration: {ttlSecondsAfterFinished: "60"}`, "migration.ttlSecondsAfterFinished"},
		{"an unknown migration mode", "migration: {mode: presync}", "migration.mode"},
		{"no migration command at all", "command: []", "migration.command"},
		{"a missing image repository", `image: {repository: ""}`, "image.repository"},
		{"a missing gate image repository", `gate: {image: {repository: ""}}`, "gate.image.repository"},
		{"an existing secret without its key", "postgresql: {enabled: false}\ndatabase: {existingSecret: db}", "database.existingSecretKey"},
		{"both the embedded and an external database", "database: {existingSecret: db, existingSecretKey: url}", "database.existingSecret"},
		{"neither the embedded nor an external database", "postgresql: {enabled: false}", "database.existingSecret"},
		{"an unknown top-level key", "replicas: 3", "replicas"},
		{"an unknown nested key", "migration: {backofflimit: 3}", "migration.backofflimit"},
		{"an unknown deeply nested key", "postgresql: {persistence: {sizeGi: 3}}", "postgresql.persistence.sizeGi"},
		{"a negative backoffLimit", "migration: {backoffLimit: -1}", "migration.backoffLimit"},
		{"replicaCount given as a string", `replicaCount: "2"`, "replicaCount"},
		{"a negative replicaCount", "replicaCount: -1", "replicaCount"},
		{"a digest without sha256", "image: {digest: 0123456789abcdef}", "image.digest"},
		{"a short digest", "image: {digest: 'sha256:abc'}", "image.digest"},
		{"an upper-case migration image digest", "migration: {image: {digest: 'sha256:" + strings.Repeat("A", 64) + "'}}", "migration.image.digest"},
		{"a check given as one string", "migration: {check: 'migrate status'}", "migration.check"},
		{"a readiness probe of two handlers", "readinessProbe: {httpGet: {path: /, port: http}, tcpSocket: {port: http}}", "readinessProbe has 2 handlers (httpGet, tcpSocket)"},
		{"a readiness probe of timings only (a probe is taken whole, not merged with the default)", "readinessProbe: {periodSeconds: 5}", "readinessProbe has no handler"},
		{"a liveness probe of timings only", "livenessProbe: {failureThreshold: 6}", "livenessProbe has no handler"},
		{"a startup probe of two handlers", "startupProbe: {exec: {command: [/ok]}, grpc: {port: 9000}}", "startupProbe has 2 handlers (exec, grpc)"},
		{"a check with an empty argument", "migration: {check: [migrate, '']}", "migration.check.1"},
		{"an unknown gate mode", "gate: {mode: initContainer}", "gate.mode"},
		{"the gate mode's name before 0.3.0", "gate: {mode: job}", "set gate.mode: watch"},
		{"an unknown gate delivery", "gate: {delivery: emptyDir}", "gate.delivery"},
		{"an unknown place for the gate to wait", "gate: {waitIn: sidecar}", "gate.waitIn"},
		{"no replica of the gate Deployment", "gate: {waitIn: schedulingGate, deployment: {replicas: 0}}", "gate.deployment.replicas"},
		{"the gate Deployment's tolerations given as a map", "gate: {deployment: {tolerations: {key: pool}}}", "gate.deployment.tolerations"},
		{"an unknown key of the gate Deployment", "gate: {deployment: {replica: 2}}", "gate.deployment.replica"},
		{"the app container waiting without its command", "gate: {waitIn: app}\ncommand: []\nmigration: {command: [/demo]}", "gate.waitIn app needs the app container's command"},
		{"a zero activeDeadlineSeconds", "migration: {activeDeadlineSeconds: 0}", "migration.activeDeadlineSeconds"},
		{"exit code 0 as a fail-fast code", "migration: {failFastExitCodes: [0]}", "migration.failFastExitCodes.0"},
		{"an exit code above 255", "migration: {failFastExitCodes: [3, 300]}", "migration.failFastExitCodes.1"},
		{"an unknown hook delete policy", "migration: {hookDeletePolicy: always}", "migration.hookDeletePolicy"},
		{"a hook weight given as a string", `migration: {hookWeight: "5"}`, "migration.hookWeight"},
		{"zero records kept", "migration: {keepRecords: 0}", "migration.keepRecords"},
		{"a negative run history", "migration: {runHistory: -1}", "migration.runHistory"},
		{"a run history given as a string", `migration: {runHistory: "10"}`, "migration.runHistory"},
		{"the guard turned on with a string", `migration: {guard: {enabled: "yes"}}`, "migration.guard.enabled"},
		{"the guard given as a bool", "migration: {guard: true}", "migration.guard"},
		{"an unknown key of the guard", "migration: {guard: {enable: true}}", "migration.guard.enable"},
		{"a contract command given as one string", "migration: {contract: {command: '/demo contract'}}", "migration.contract.command"},
		{"a negative contract soak", "migration: {contract: {command: [/demo, contract], soakSeconds: -1}}", "migration.contract.soakSeconds"},
		{"a contract rollout timeout that is no duration", "migration: {contract: {command: [/demo, contract], rolloutTimeout: soon}}", "migration.contract.rolloutTimeout"},
		{"an unknown key of the contract", "migration: {contract: {cmd: [/demo, contract]}}", "migration.contract.cmd"},
		{"the previous contract required with a string", `migration: {requirePreviousContract: "yes"}`, "migration.requirePreviousContract"},
		{"the previous contract required in job mode", "migration: {mode: job, requirePreviousContract: true}\npostgresql: {auth: {password: pw}}", "migration.requirePreviousContract needs migration.mode hook"},
		{"the previous contract required in argocd mode", "migration: {mode: argocd, requirePreviousContract: true}\npostgresql: {auth: {password: pw}}", "migration.requirePreviousContract needs migration.mode hook"},
		{"a hook weight that would run the Job before its ServiceAccount", "migration: {hookWeight: -10}", "migration.hookWeight"},
		{"an unknown pull policy", "image: {pullPolicy: Sometimes}", "image.pullPolicy"},
		{"a gate timeout that is no duration", "gate: {timeout: 15 minutes}", "gate.timeout"},
		{"a service port out of range", "service: {port: 70000}", "service.port"},
		{"an unknown service type", "service: {type: ExternalName}", "service.type"},
		{"container port 0", "containerPort: 0", "containerPort"},
		{"migration.enabled given as a string", `migration: {enabled: "yes"}`, "migration.enabled"},
		{"an env entry without a name", "env: [{value: x}]", "env.0.name"},
		{"a database user with a space", "postgresql: {auth: {username: my user}}", "postgresql.auth.username"},
		{"a volume size that is no quantity", "postgresql: {persistence: {size: lots}}", "postgresql.persistence.size"},
		{"an image tag with a space", "image: {tag: v 1}", "image.tag"},
		{"an empty URL env name", `database: {urlEnvName: ""}`, "database.urlEnvName"},
		{"both budget bounds", "podDisruptionBudget: {minAvailable: 1, maxUnavailable: 1}", "podDisruptionBudget.minAvailable"},
		{"a budget bound that is no percentage", "podDisruptionBudget: {minAvailable: half, maxUnavailable: null}", "podDisruptionBudget.minAvailable"},
		{"gate command mode without a command", "gate: {mode: command, args: []}", "gate.command"},
		{"an invalid name override", "nameOverride: Bad_Name", "nameOverride"},
		{"tests.enabled given as a string", `tests: {enabled: "true"}`, "tests.enabled"},
		{"a probe given as a string", `readinessProbe: "/readyz"`, "readinessProbe"},
		{"an env value given as a number", "env: [{name: WORKERS, value: 1}]", "env.0.value"},
		{"an env value given as a boolean", "migration: {env: [{name: DRY_RUN, value: true}]}", "migration.env.0.value"},
		{"an env entry with a value and a valueFrom", "env: [{name: A, value: x, valueFrom: {fieldRef: {fieldPath: metadata.name}}}]", "env.0"},
		{"an unknown env entry key", "env: [{name: A, val: x}]", "env.0.val"},
		{"a PostgreSQL env value given as a number", "postgresql: {env: [{name: A, value: 2}]}", "postgresql.env.0.value"},
		{"a cpu request that is no quantity", "resources: {requests: {cpu: lots}}", "resources.requests.cpu"},
		{"a memory limit with a bad unit", "migration: {resources: {limits: {memory: 64MB}}}", "migration.resources.limits.memory"},
		{"a misspelt resources key", "gate: {resources: {limit: {memory: 32Mi}}}", "gate.resources.limit"},
		{"an unknown strategy type", "strategy: {type: BlueGreen}", "strategy.type"},
		{"Recreate with rollingUpdate", "strategy: {type: Recreate, rollingUpdate: {maxSurge: 1}}", "strategy"},
		{"a maxSurge that is no percentage", "strategy: {rollingUpdate: {maxSurge: half}}", "strategy.rollingUpdate.maxSurge"},
		{"maxSurge and maxUnavailable both 0", "strategy: {rollingUpdate: {maxSurge: 0, maxUnavailable: 0}}", "strategy.rollingUpdate.maxSurge"},
		{"a pre-install hook on the embedded database", "migration: {preInstallHook: true}", "migration.preInstallHook"},
		{"preInstallHook given as a string", `migration: {preInstallHook: "yes"}`, "migration.preInstallHook"},
		{"the gate on the namespace's default ServiceAccount", "serviceAccount: {create: false}", "gate.mode"},
		{"a progress deadline below the migration's", "progressDeadlineSeconds: 300", "progressDeadlineSeconds"},
		{"enabled given as a string", `enabled: "false"`, "enabled"},
		{"an autoscaler whose minimum exceeds its maximum", "autoscaling: {enabled: true, minReplicas: 5, maxReplicas: 3}", "autoscaling.minReplicas"},
		{"an autoscaler without a metric", "autoscaling: {enabled: true, targetCPUUtilizationPercentage: null}", "autoscaling.targetCPUUtilizationPercentage"},
		{"an autoscaler with zero minReplicas", "autoscaling: {minReplicas: 0}", "autoscaling.minReplicas"},
		{"an unknown ingress path type", "ingress: {hosts: [{host: a.example, paths: [{path: /, pathType: Regex}]}]}", "ingress.hosts.0.paths.0.pathType"},
		{"an ingress path without a leading slash", "ingress: {hosts: [{paths: [{path: api}]}]}", "ingress.hosts.0.paths.0.path"},
		{"an ingress host without paths", "ingress: {hosts: [{host: a.example}]}", "ingress.hosts.0.paths"},
		{"an unknown ingress TLS key", "ingress: {tls: [{secret: x}]}", "ingress.tls.0.secret"},
		{"an HTTPRoute without parentRefs", "httpRoute: {enabled: true}", "httpRoute.parentRefs"},
		{"an HTTPRoute parentRef without a name", "httpRoute: {parentRefs: [{namespace: infra}]}", "httpRoute.parentRefs.0.name"},
		{"a volume mount without a mountPath", "extraVolumeMounts: [{name: tmp}]", "extraVolumeMounts.0.mountPath"},
		{"an extra volume with a name of the chart's", "extraVolumes: [{name: premigrate-gate-token, emptyDir: {}}]", "extraVolumes"},
		{"a spread constraint without a topologyKey", "topologySpreadConstraints: [{maxSkew: 1, whenUnsatisfiable: DoNotSchedule}]", "topologySpreadConstraints.0.topologyKey"},
		{"a priority class with capitals", "priorityClassName: High", "priorityClassName"},
		{"an extra object given as a number", "extraObjects: [3]", "extraObjects.0"},
		{"a database password and an existing Secret", "postgresql: {auth: {password: pw, existingSecret: db}}", "postgresql.auth.existingSecret"},
		{"an existing password Secret without the embedded database", "postgresql: {enabled: false, auth: {existingSecret: db}}\ndatabase: {existingSecret: ext, existingSecretKey: url}", "postgresql.auth.existingSecret"},
		{"an empty existing password key", `postgresql: {auth: {existingSecret: db, existingSecretPasswordKey: ""}}`, "postgresql.auth.existingSecretPasswordKey"},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, upgrade := range []bool{false, true} {
				_, err := renderValues(renderOptions{values: c.values, upgrade: upgrade})
				if err == nil {
					t.Fatalf("values %q (upgrade=%v) rendered without error", c.values, upgrade)
				}
				if !namesValue(err.Error(), c.path) {
					t.Errorf("error does not name %s:\n%v", c.path, err)
				}
				if !upgrade {
					t.Logf("%v", err)
				}
			}
		})
	}
}

// namesValue reports whether msg names the dotted path: as written, as a JSON pointer, or (for a key
// that is not allowed) as its parent pointer plus the quoted key.
func namesValue(msg, path string) bool {
	if strings.Contains(msg, path) {
		return true
	}
	pointer := "/" + strings.ReplaceAll(path, ".", "/")
	if strings.Contains(msg, "'"+pointer+"'") || strings.Contains(msg, pointer+"'") || strings.Contains(msg, pointer+":") {
		return true
	}
	i := strings.LastIndex(pointer, "/")
	parent, leaf := pointer[:i], pointer[i+1:]
	if parent == "" {
		parent = "''"
	} else {
		parent = "'" + parent + "'"
	}
	return strings.Contains(msg, "at "+parent) && strings.Contains(msg, "'"+leaf+"'")
}

// The same check must not accept an unrelated message.
func TestTheBadValuesCheckRejectsAnErrorThatNamesAnotherValue(t *testing.T) {
	_, err := renderValues(renderOptions{values: "migration: {backoffLimit: -1}"})
	if err == nil {
		t.Fatal("no error")
	}
	if namesValue(err.Error(), "migration.activeDeadlineSeconds") || namesValue(err.Error(), "replicaCount") {
		t.Errorf("the check accepts an error about another value:\n%v", err)
	}
}
