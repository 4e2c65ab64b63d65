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

The policy reads no parameter: what is recorded, it reads from the workload itself, as it was before the update
(the annotation premigrate.io/recorded-identities, which `gate run --guard-workload` sets once its identity is
recorded; the guard's Role lets the migration's ServiceAccount patch the workloads of guard.workloads, and the
policy refuses any other change it would make). A ConfigMap parameter would be read from a cache of the API
server that stops updating once no binding in the cluster names a ConfigMap parameter
(kubernetes/kubernetes#130887): a guard turned off and on, or a release uninstalled and installed again, would
then judge by records that no longer exist.
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
The workloads the guard watches, as a JSON list of KIND/NAME (guard.workloads; default: the Deployment named
<fullname>). Fails on an entry that is not deployment|statefulset|daemonset/NAME.
*/}}
{{- define "premigrate-lib.guardWorkloads" -}}
{{- $c := dict -}}{{- include "premigrate-lib.config" (dict "in" . "out" $c) -}}
{{- $w := ((.values | default dict).guard | default dict).workloads -}}
{{- if kindIs "invalid" $w -}}
{{- $w = list (printf "deployment/%s" $c.fullname) -}}
{{- end -}}
{{- if or (not (kindIs "slice" $w)) (not $w) -}}
{{- fail (printf "premigrate-lib: guard.workloads must be a non-empty list of KIND/NAME (KIND: deployment, statefulset or daemonset), not %s %v" (kindOf $w) $w) -}}
{{- end -}}
{{- range $w -}}
{{- if not (and (kindIs "string" .) (regexMatch "^(deployment|statefulset|daemonset)/[a-z0-9]([-a-z0-9.]*[a-z0-9])?$" .)) -}}
{{- fail (printf "premigrate-lib: guard.workloads: %v is not KIND/NAME with KIND one of deployment, statefulset, daemonset and NAME an object name" .) -}}
{{- end -}}
{{- end -}}
{{- toJson $w -}}
{{- end }}

{{/*
The arguments of `gate run` for the guard: one --guard-workload per watched workload. Nothing when it is off.
*/}}
{{- define "premigrate-lib.guardArgs" -}}
{{- $args := list -}}
{{- if include "premigrate-lib.guardEnabled" . -}}
{{- range include "premigrate-lib.guardWorkloads" . | fromJsonArray -}}
{{- $args = concat $args (list "--guard-workload" .) -}}
{{- end -}}
{{- end -}}
{{- toJson $args -}}
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
      expression: "variables.identity in oldObject.metadata.?annotations[?'premigrate.io/recorded-identities'].orValue('').split(' ')"
    - name: beside
      expression: "object.metadata.?annotations[?'premigrate.io/migration-beside'].orValue('') == 'true'"
    - name: migratedImage
      expression: "oldObject.metadata.?annotations[?'premigrate.io/migrated-image'].orValue('')"
    - name: fromMigration
      expression: {{ printf "request.userInfo.username == 'system:serviceaccount:%s:%s'" $c.root.Release.Namespace $c.migrateName | quote }}
    - name: annotations
      expression: "object.metadata.?annotations.orValue({})"
    - name: oldAnnotations
      expression: "oldObject.metadata.?annotations.orValue({})"
  validations:
    - expression: "variables.identity == '' || variables.identity == variables.oldIdentity || variables.recorded || variables.beside"
      reason: Forbidden
      messageExpression: {{ printf "'premigrate: ' + request.kind.kind + ' ' + object.metadata.name + ' would run the identity ' + variables.identity + ', whose migration has not run: its Job %s runs before the workload and did not record it (the annotation premigrate.io/recorded-identities, which the Job sets, lists ' + variables.oldAnnotations[?'premigrate.io/recorded-identities'].orValue('none') + '): helm upgrade --no-hooks, or a sync of the workload without its Job. Deploy it with its migration: helm upgrade with its hooks, or sync the Job too'" $c.migrateName | quote }}
    - expression: "variables.identity != variables.oldIdentity || variables.migratedImage == '' || object.spec.template.spec.containers.all(c, c.image == variables.migratedImage || !oldObject.spec.template.spec.containers.exists(o, o.name == c.name && o.image == variables.migratedImage))"
      reason: Forbidden
      messageExpression: "'premigrate: ' + request.kind.kind + ' ' + object.metadata.name + ' changes the image ' + variables.migratedImage + ' under the identity ' + variables.identity + ', which was migrated for that image: the new image would start with no migration. Change the image through the chart (helm upgrade, a Git commit), which runs its migration first'"
    - expression: "!variables.fromMigration || (object.spec == oldObject.spec && object.metadata.?labels.orValue({}) == oldObject.metadata.?labels.orValue({}) && variables.annotations.all(k, k == 'premigrate.io/recorded-identities' || (k in variables.oldAnnotations && variables.oldAnnotations[k] == variables.annotations[k])) && variables.oldAnnotations.all(k, k == 'premigrate.io/recorded-identities' || k in variables.annotations))"
      reason: Forbidden
      messageExpression: {{ printf "'premigrate: the migration (ServiceAccount %s) may change only the annotation premigrate.io/recorded-identities of ' + request.kind.kind + ' ' + object.metadata.name" $c.migrateName | quote }}
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
  matchResources:
    namespaceSelector:
      matchLabels:
        kubernetes.io/metadata.name: {{ $c.root.Release.Namespace }}
{{- end -}}
{{- end }}

{{/*
The guard's Role: patch the watched workloads (guard.workloads), by name, so that `gate run` can set their
annotation premigrate.io/recorded-identities; the policy refuses any other change the migration would make.
Beside the migration's own Role, as a hook or an early wave like it. Helm never deletes a hook it no longer
renders: with the guard turned off, a hook-mode upgrade that finds the Role replaces it with one that grants
nothing (the policy that held the migration to its annotation is gone with the guard).
*/}}
{{- define "premigrate-lib.guardRole" -}}
{{- $c := dict -}}{{- include "premigrate-lib.config" (dict "in" . "out" $c) -}}
{{- $on := include "premigrate-lib.guardEnabled" . -}}
{{- $name := printf "%s-guard" $c.migrateRoleName -}}
{{- $left := and (not $on) $c.enabled (eq $c.jobKind "hook") (lookup "rbac.authorization.k8s.io/v1" "Role" $c.root.Release.Namespace $name) -}}
{{- if or $on $left -}}
{{- $byResource := dict -}}
{{- if $on -}}
{{- range include "premigrate-lib.guardWorkloads" . | fromJsonArray -}}
{{- $kind := regexReplaceAll "/.*$" . "" -}}{{- $wname := regexReplaceAll "^[^/]*/" . "" -}}
{{- $_ := set $byResource (printf "%ss" $kind) (append (get $byResource (printf "%ss" $kind) | default list) $wname | uniq) -}}
{{- end -}}
{{- end -}}
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: {{ $name }}
  labels:
    {{- include "premigrate-lib.labels" (dict "c" $c "component" "migration") | nindent 4 }}
  {{- with include "premigrate-lib.hookOwner" $c }}
  {{- . | nindent 2 }}
  {{- end }}
  {{- with include "premigrate-lib.supportAnnotations" $c }}
  annotations:
    {{- . | nindent 4 }}
  {{- end }}
{{- if $on }}
rules:
  {{- range $resource, $names := $byResource }}
  - apiGroups:
      - apps
    resources:
      - {{ $resource }}
    resourceNames:
      {{- toYaml $names | nindent 6 }}
    verbs:
      - patch
  {{- end }}
{{- else }}
rules: []
{{- end }}
{{- end -}}
{{- end }}

{{- define "premigrate-lib.guardRoleBinding" -}}
{{- if include "premigrate-lib.guardEnabled" . -}}
{{- $c := dict -}}{{- include "premigrate-lib.config" (dict "in" . "out" $c) -}}
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: {{ printf "%s-guard" $c.migrateRoleName }}
  labels:
    {{- include "premigrate-lib.labels" (dict "c" $c "component" "migration") | nindent 4 }}
  {{- with include "premigrate-lib.hookOwner" $c }}
  {{- . | nindent 2 }}
  {{- end }}
  {{- with include "premigrate-lib.supportAnnotations" $c }}
  annotations:
    {{- . | nindent 4 }}
  {{- end }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: {{ printf "%s-guard" $c.migrateRoleName }}
subjects:
  - kind: ServiceAccount
    name: {{ $c.migrateName }}
    namespace: {{ $c.root.Release.Namespace }}
{{- end -}}
{{- end }}
