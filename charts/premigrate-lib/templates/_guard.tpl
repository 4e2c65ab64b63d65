{{/*
The guard at the API server (`guard.enabled`, off by default): a ValidatingAdmissionPolicy and its binding,
both cluster-scoped, that refuse an update of a gated workload (a Deployment, StatefulSet or DaemonSet whose
annotations come from premigrate-lib.deploymentAnnotations) which would run code no migration ran for:

- a pod template whose identity is new, not recorded in the store, while its migration Job is a hook or an
  Argo CD wave before the workload, so that it should have been recorded before the update (`helm upgrade
  --no-hooks`, an Argo CD sync of the workload alone); an identity whose Job runs beside the workload (a plain
  Job: the first install or move, job mode, `helm template | kubectl apply`) passes, its pods wait in the gate;
- the migrated image swapped under an unchanged identity (`kubectl set image`, `kubectl edit`): the gate would
  let those pods start, since their identity is recorded, on a schema migrated for another image.

The gate does not rely on it: it holds the pods either way. The guard refuses early, with a message that names
the identity and what to do, instead of pods that wait until gate.timeout (the first case) and, in the second,
closes the one way around the gate. Each takes the same argument as premigrate-lib.migrationJob.
*/}}

{{/*
"true" when the guard is on (and the migration with it). Fails on a guard that is not {enabled: true|false}.
*/}}
{{- define "premigrate-lib.guardEnabled" -}}
{{- $c := dict -}}{{- include "premigrate-lib.config" (dict "in" . "out" $c) -}}
{{- $g := (.values | default dict).guard -}}
{{- if not (or (kindIs "invalid" $g) (kindIs "map" $g)) -}}
{{- fail (printf "premigrate-lib: guard must be a map ({enabled: true}), not %s %v" (kindOf $g) $g) -}}
{{- end -}}
{{- $on := ($g | default dict).enabled -}}
{{- if not (or (kindIs "invalid" $on) (kindIs "bool" $on)) -}}
{{- fail (printf "premigrate-lib: guard.enabled must be true or false, not %s %v" (kindOf $on) $on) -}}
{{- end -}}
{{- if and $c.enabled $on -}}
true
{{- end -}}
{{- end }}

{{/*
The guard's annotations of the workload (not of its pods: they change nothing that would roll the pods): the
release's guard that watches it, the image its identity was migrated with, and whether the migration Job runs
beside the workload rather than before it. Included by premigrate-lib.deploymentAnnotations.
*/}}
{{- define "premigrate-lib.guardAnnotations" -}}
{{- if include "premigrate-lib.guardEnabled" . -}}
{{- $c := dict -}}{{- include "premigrate-lib.config" (dict "in" . "out" $c) -}}
premigrate.io/guard: {{ $c.fullname | quote }}
premigrate.io/migrated-image: {{ $c.image | quote }}
premigrate.io/migration-beside: {{ eq $c.jobKind "plain" | toString | quote }}
{{- end -}}
{{- end }}

{{/*
The policy's name: cluster-scoped, so it carries the release's namespace.
*/}}
{{- define "premigrate-lib.guardName" -}}
{{- $c := dict -}}{{- include "premigrate-lib.config" (dict "in" . "out" $c) -}}
{{- printf "premigrate.%s.%s" $c.root.Release.Namespace $c.fullname -}}
{{- end }}

{{- define "premigrate-lib.guardPolicy" -}}
{{- if include "premigrate-lib.guardEnabled" . -}}
{{- $c := dict -}}{{- include "premigrate-lib.config" (dict "in" . "out" $c) -}}
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: {{ include "premigrate-lib.guardName" . }}
  labels:
    {{- include "premigrate-lib.labels" (dict "c" $c "component" "migration") | nindent 4 }}
spec:
  failurePolicy: Fail
  paramKind:
    apiVersion: v1
    kind: ConfigMap
  matchConstraints:
    resourceRules:
      - apiGroups: ["apps"]
        apiVersions: ["v1"]
        operations: ["UPDATE"]
        resources: ["deployments", "statefulsets", "daemonsets"]
  matchConditions:
    - name: guarded-by-this-release
      expression: {{ printf "object.metadata.?annotations[?'premigrate.io/guard'].orValue('') == '%s'" $c.fullname | quote }}
  variables:
    - name: identity
      expression: "object.spec.template.metadata.?annotations[?'premigrate.io/identity'].orValue('')"
    - name: oldIdentity
      expression: "oldObject.spec.template.metadata.?annotations[?'premigrate.io/identity'].orValue('')"
    - name: recorded
      expression: "variables.identity in params.?data.orValue({})"
    - name: beside
      expression: "object.metadata.?annotations[?'premigrate.io/migration-beside'].orValue('') == 'true'"
    - name: migratedImage
      expression: "oldObject.metadata.?annotations[?'premigrate.io/migrated-image'].orValue('')"
  validations:
    - expression: "variables.identity == '' || variables.identity == variables.oldIdentity || variables.recorded || variables.beside"
      reason: Forbidden
      messageExpression: {{ printf "'premigrate: ' + request.kind.kind + ' ' + object.metadata.name + ' would run the identity ' + variables.identity + ', whose migration has not run: the ConfigMap %s has no record of it, and its Job %s runs before the workload (helm upgrade --no-hooks, or a sync of the workload without its Job). Deploy it with its migration: helm upgrade with its hooks, or sync the Job too'" $c.storeName $c.migrateName | quote }}
    - expression: "variables.identity != variables.oldIdentity || variables.migratedImage == '' || object.spec.template.spec.containers.all(c, c.image == variables.migratedImage || !oldObject.spec.template.spec.containers.exists(o, o.name == c.name && o.image == variables.migratedImage))"
      reason: Forbidden
      messageExpression: "'premigrate: ' + request.kind.kind + ' ' + object.metadata.name + ' changes the image ' + variables.migratedImage + ' under the identity ' + variables.identity + ', which was migrated for that image: the new image would start with no migration. Change the image through the chart (helm upgrade, a Git commit), which runs its migration first'"
{{- end -}}
{{- end }}

{{- define "premigrate-lib.guardPolicyBinding" -}}
{{- if include "premigrate-lib.guardEnabled" . -}}
{{- $c := dict -}}{{- include "premigrate-lib.config" (dict "in" . "out" $c) -}}
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: {{ include "premigrate-lib.guardName" . }}
  labels:
    {{- include "premigrate-lib.labels" (dict "c" $c "component" "migration") | nindent 4 }}
spec:
  policyName: {{ include "premigrate-lib.guardName" . }}
  validationActions: [Deny]
  paramRef:
    name: {{ $c.storeName }}
    namespace: {{ $c.root.Release.Namespace }}
    {{- /* no store yet: no migration ever recorded here, nothing to hold an update to */}}
    parameterNotFoundAction: Allow
  matchResources:
    namespaceSelector:
      matchLabels:
        kubernetes.io/metadata.name: {{ $c.root.Release.Namespace }}
{{- end -}}
{{- end }}
