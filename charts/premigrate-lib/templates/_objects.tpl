{{/*
The objects beside the migration Job. Each takes the same argument as premigrate-lib.migrationJob and renders
nothing when it is not needed.
*/}}

{{/*
The records ConfigMap: identity -> completion, written by `gate run`. A release object in every mode, so helm
uninstall deletes it (and, through their owner reference, the hook Jobs that ran). The chart renders no data,
so neither an upgrade, an adoption nor a re-sync removes the records. Not rendered in hook mode on an upgrade
that finds a ConfigMap without this release's ownership: Helm would refuse to import it before any hook ran;
`gate run` gives it the ownership, and the next upgrade renders it.
*/}}
{{- define "premigrate-lib.recordsConfigMap" -}}
{{- $c := dict -}}{{- include "premigrate-lib.config" (dict "in" . "out" $c) -}}
{{- if and $c.enabled (or (ne $c.mode "hook") $c.root.Release.IsInstall (ne $c.recordsState "foreign")) -}}
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ $c.recordsName }}
  labels:
    {{- include "premigrate-lib.labels" (dict "c" $c "component" "migration") | nindent 4 }}
  {{- with include "premigrate-lib.syncWaveOf" (dict "c" $c "wave" "-1") }}
  annotations:
    {{- . | nindent 4 }}
  {{- end }}
{{- end }}
{{- end }}

{{/*
The migration's ServiceAccount: its token is mounted in the migration pod only. A hook beside a hook Job,
except when the cluster has it as a release object of this release (the install's, beside its plain Job): it
then stays one. A hook of its name would make Helm delete it first (before-hook-creation), under an install
migration still running on its token (an install that outlived Helm's --timeout, retried with `helm upgrade
--install`), which would lose the release's lock and be run again by the hook (docs/design.md). It exists, so
the hook Job has it; helm template (no cluster) renders the hook.
*/}}
{{- define "premigrate-lib.migrationServiceAccount" -}}
{{- $c := dict -}}{{- include "premigrate-lib.config" (dict "in" . "out" $c) -}}
{{- if $c.enabled -}}
{{- $hook := eq $c.jobKind "hook" -}}
{{- if $hook -}}
{{- $live := lookup "v1" "ServiceAccount" $c.root.Release.Namespace $c.migrateName | default dict -}}
{{- $liveAnnotations := dig "metadata" "annotations" dict $live -}}
{{- if and $live (not (hasKey $liveAnnotations "helm.sh/hook")) (eq (get $liveAnnotations "meta.helm.sh/release-name") $c.root.Release.Name) -}}
{{- $hook = false -}}
{{- end -}}
{{- end -}}
apiVersion: v1
kind: ServiceAccount
metadata:
  name: {{ $c.migrateName }}
  labels:
    {{- include "premigrate-lib.labels" (dict "c" $c "component" "migration") | nindent 4 }}
  {{- if $hook }}
  {{- with include "premigrate-lib.hookOwner" $c }}
  {{- . | nindent 2 }}
  {{- end }}
  {{- end }}
  {{- $annotations := merge (dict) (ternary (include "premigrate-lib.supportAnnotations" $c | fromYaml) (dict) (or $hook (ne $c.jobKind "hook"))) $c.serviceAccountAnnotations }}
  {{- with $annotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
automountServiceAccountToken: false
{{- end }}
{{- end }}

{{/*
The migration's Role: read and write its records ConfigMaps only (the release's and the store) and its run
history (runHistory); create a
ConfigMap (when the records are missing); get its own Job, by name; get a pod (the holder of a lock that was
not renewed); get the object that holds the database's data (database.object), by name. A hook Job is rendered
with its owner (hookOwner).
*/}}
{{- define "premigrate-lib.migrationRole" -}}
{{- $c := dict -}}{{- include "premigrate-lib.config" (dict "in" . "out" $c) -}}
{{- if $c.enabled -}}
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: {{ $c.migrateRoleName }}
  labels:
    {{- include "premigrate-lib.labels" (dict "c" $c "component" "migration") | nindent 4 }}
  {{- with include "premigrate-lib.hookOwner" $c }}
  {{- . | nindent 2 }}
  {{- end }}
  {{- with include "premigrate-lib.supportAnnotations" $c }}
  annotations:
    {{- . | nindent 4 }}
  {{- end }}
rules:
  - apiGroups:
      - ""
    resources:
      - configmaps
    resourceNames:
      - {{ $c.recordsName }}
      - {{ $c.storeName }}
      {{- if gt (int $c.runHistory) 0 }}
      - {{ $c.historyName }}
      {{- end }}
    verbs:
      - get
      - update
      - patch
  {{- /* create cannot be limited to a name: it lets `gate run` create the records ConfigMap when it is
  missing (migrations enabled later; a ConfigMap deleted by hand). It cannot read or change any other
  ConfigMap. */}}
  - apiGroups:
      - ""
    resources:
      - configmaps
    verbs:
      - create
  {{- /* pods, get (not list: it names the pod): before a waiter takes over the release's migration lock that
  was not renewed for its lease, it asks whether the holder's pod still runs (a migration cut off from the API
  server goes on) */}}
  - apiGroups:
      - ""
    resources:
      - pods
    verbs:
      - get
  {{- /* its own Job, by name: its creation time orders the release's migrations (a migration never runs
  after one deployed after it succeeded) */}}
  - apiGroups:
      - batch
    resources:
      - jobs
    resourceNames:
      - {{ $c.jobName }}
    verbs:
      - get
  {{- with $c.database.object }}
  {{- /* the object that holds the database's data, by name: its UID names the database the records are
  bound to */}}
  - apiGroups:
      - ""
    resources:
      - {{ printf "%ss" (regexReplaceAll "/.*$" . "") }}
    resourceNames:
      - {{ regexReplaceAll "^[^/]*/" . "" }}
    verbs:
      - get
  {{- end }}
{{- end }}
{{- end }}

{{- define "premigrate-lib.migrationRoleBinding" -}}
{{- $c := dict -}}{{- include "premigrate-lib.config" (dict "in" . "out" $c) -}}
{{- if $c.enabled -}}
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: {{ $c.migrateRoleName }}
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
  name: {{ $c.migrateRoleName }}
subjects:
  - kind: ServiceAccount
    name: {{ $c.migrateName }}
    namespace: {{ $c.root.Release.Namespace }}
{{- end }}
{{- end }}

{{/*
The gate's Role, bound to the ServiceAccounts of every gated workload (gate.serviceAccountName and
gate.extraServiceAccountNames), or with gate.waitIn schedulingGate to <fullname>-gate's alone: get, list and
watch the migration Job and the records ConfigMap, by name; get the object that holds the database's data
(database.object), by name. With gate.waitIn schedulingGate also list, watch and patch pods (their scheduling
gate; premigrate-lib.ungatePolicy holds the patches to that) and create Events (a failed migration, on the pods
it holds).
*/}}
{{- define "premigrate-lib.gateRole" -}}
{{- $c := dict -}}{{- include "premigrate-lib.config" (dict "in" . "out" $c) -}}
{{- if $c.gateEnabled -}}
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: {{ $c.gateName }}
  labels:
    {{- include "premigrate-lib.labels" (dict "c" $c "component" "gate") | nindent 4 }}
  {{- with include "premigrate-lib.syncWaveOf" (dict "c" $c "wave" "-1") }}
  annotations:
    {{- . | nindent 4 }}
  {{- end }}
rules:
  - apiGroups:
      - batch
    resources:
      - jobs
    resourceNames:
      - {{ $c.jobName }}
    verbs:
      - get
      - list
      - watch
  - apiGroups:
      - ""
    resources:
      - configmaps
    resourceNames:
      - {{ $c.recordsName }}
      - {{ $c.storeName }}
    verbs:
      - get
      - list
      - watch
  {{- with $c.database.object }}
  {{- /* the object that holds the database's data, by name: its UID names the database the records are
  bound to */}}
  - apiGroups:
      - ""
    resources:
      - {{ printf "%ss" (regexReplaceAll "/.*$" . "") }}
    resourceNames:
      - {{ regexReplaceAll "^[^/]*/" . "" }}
    verbs:
      - get
  {{- end }}
  {{- if $c.heldByScheduler }}
  - apiGroups:
      - ""
    resources:
      - pods
    verbs:
      - list
      - watch
      - patch
  - apiGroups:
      - ""
    resources:
      - events
    verbs:
      - create
  {{- end }}
{{- end }}
{{- end }}

{{- define "premigrate-lib.gateRoleBinding" -}}
{{- $c := dict -}}{{- include "premigrate-lib.config" (dict "in" . "out" $c) -}}
{{- if $c.gateEnabled -}}
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: {{ $c.gateName }}
  labels:
    {{- include "premigrate-lib.labels" (dict "c" $c "component" "gate") | nindent 4 }}
  {{- with include "premigrate-lib.syncWaveOf" (dict "c" $c "wave" "-1") }}
  annotations:
    {{- . | nindent 4 }}
  {{- end }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: {{ $c.gateName }}
subjects:
  {{- range $sa := ternary (list $c.gateName) (prepend $c.gate.extraServiceAccountNames $c.gate.serviceAccountName | uniq) $c.heldByScheduler }}
  - kind: ServiceAccount
    name: {{ $sa }}
    namespace: {{ $c.root.Release.Namespace }}
  {{- end }}
{{- end }}
{{- end }}

{{/*
Every object the values turn on, as documents separated by `---`: one include for a chart that does not keep
one object per template. The objects above, the guard's (guard.enabled), the contract step's (contract.command)
and the check of the previous contract (requirePreviousContract): each renders nothing when its values leave it
off.
*/}}
{{- define "premigrate-lib.all" -}}
{{- range $t := list "recordsConfigMap" "migrationServiceAccount" "migrationRole" "migrationRoleBinding" "gateRole" "gateRoleBinding" "ungateServiceAccount" "ungateDeployment" "ungatePodDisruptionBudget" "ungatePolicy" "ungatePolicyBinding" "migrationJob" "guardPolicy" "guardPolicyBinding" "guardRole" "guardRoleBinding" "contractJob" "contractServiceAccount" "contractRole" "contractRoleBinding" "requireContractJob" }}
{{- with include (printf "premigrate-lib.%s" $t) $ }}
---
{{ . }}
{{- end }}
{{- end }}
{{- end }}
