{{/*
The contract step (migration.contract): what drops the schema older versions still use, run by `gate contract`
only once the rollout of contract.deployment to this identity has ended with nothing of another identity
running or terminating (docs/design.md, "The contract step"). Empty unless the migration is enabled and
contract.command is set. Every template takes the library's argument (premigrate-lib.config).
*/}}

{{/*
The contract's configuration, from the values' contract key: "premigrate-lib.contractConfig" (dict "in" ARGUMENT
"c" CONFIG "out" DICT) fills DICT. As a hook (hook and argocd modes) its Job has one name, <fullname>-contract,
which Helm and Argo CD delete before they create the next (before-hook-creation): one contract Job per release,
never a patch of an immutable one. A plain Job (job mode) is named by a hash of the migration Job's spec hash
(the identity, the gate's image and the pod values it shares) and the contract's values, so a changed contract
command or gate image is a new Job, and the apply that renders the next removes the previous
one (Helm; `kubectl apply --prune`). Either way the identity (which the app pods and the records carry) stays the
migration's.
*/}}
{{- define "premigrate-lib.contractConfig" -}}
{{- $c := .c -}}
{{- $k := .out -}}
{{- $ct := (.in.values | default dict).contract | default dict -}}
{{- $_ := set $k "command" ($ct.command | default list) -}}
{{- $_ = set $k "args" ($ct.args | default list) -}}
{{- $_ = set $k "deployment" ($ct.deployment | default $c.fullname) -}}
{{- $_ = set $k "soakSeconds" (ternary 0 $ct.soakSeconds (kindIs "invalid" $ct.soakSeconds)) -}}
{{- $_ = set $k "rolloutTimeout" ($ct.rolloutTimeout | default "1h") -}}
{{- $_ = set $k "activeDeadlineSeconds" (ternary 1800 $ct.activeDeadlineSeconds (kindIs "invalid" $ct.activeDeadlineSeconds)) -}}
{{- include "premigrate-lib.validateContract" $k -}}
{{- $_ = set $k "enabled" (and $c.enabled (gt (len $k.command) 0)) -}}
{{- $_ = set $k "name" (printf "%s-contract" $c.fullname) -}}
{{- $_ = set $k "jobName" (printf "%s-contract-%s" $c.fullname (toJson (dict "job" $c.jobHash "contract" $ct) | sha256sum | trunc 10)) -}}
{{- if has $c.mode (list "hook" "argocd") -}}
{{- $_ = set $k "jobName" $k.name -}}
{{- end -}}
{{- end }}

{{- define "premigrate-lib.validateContract" -}}
{{- range $key := list "command" "args" -}}
{{- $list := get $ $key -}}
{{- if not (kindIs "slice" $list) -}}
{{- fail (printf "premigrate-lib: contract.%s must be a list of strings, not %s %v" $key (kindOf $list) $list) -}}
{{- end -}}
{{- range $list -}}
{{- if not (kindIs "string" .) -}}
{{- fail (printf "premigrate-lib: contract.%s must be a list of strings; %v is a %s" $key . (kindOf .)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- range $key := list "soakSeconds" "activeDeadlineSeconds" -}}
{{- $n := get $ $key -}}
{{- if not (and (or (kindIs "int" $n) (kindIs "int64" $n) (and (kindIs "float64" $n) (eq (float64 (int64 $n)) $n))) (ge (int64 $n) 0)) -}}
{{- fail (printf "premigrate-lib: contract.%s must be a whole number of seconds >= 0, not %v" $key $n) -}}
{{- end -}}
{{- end -}}
{{- if not (regexMatch "^([0-9]+(ns|us|ms|s|m|h))+$" (toString .rolloutTimeout)) -}}
{{- fail (printf "premigrate-lib: contract.rolloutTimeout must be a duration such as 10m or 1h, not %v" .rolloutTimeout) -}}
{{- end -}}
{{- end }}

{{/*
The contract Job: the migration Job's pod (image, environment, init containers and sidecars, security
contexts, volumes, scheduling) with `gate contract` in its container, its own ServiceAccount, and its own name
(contractConfig). Hook mode: a post-install,post-upgrade hook (Helm runs it after the release's objects and,
with --wait, after they are ready; never on a rollback), owned by the records ConfigMap once it exists, like
the migration's hook, so `helm uninstall` (which leaves hooks behind) removes it with the records. argocd mode:
a PostSync hook. job mode: a plain Job.
*/}}
{{- define "premigrate-lib.contractJob" -}}
{{- $c := dict -}}{{- include "premigrate-lib.config" (dict "in" . "out" $c) -}}
{{- $k := dict -}}{{- include "premigrate-lib.contractConfig" (dict "in" . "c" $c "out" $k) -}}
{{- if $k.enabled -}}
{{- $job := include "premigrate-lib.migrationJob" . | fromYaml -}}
{{- $spec := $job.spec -}}
{{- $pod := $spec.template -}}
{{- $ctr := first $pod.spec.containers -}}
{{- $cmd := list "/premigrate/gate" "contract" "--identity" $c.identity "--records" $c.recordsName "--store" $c.storeName "--job" "$(JOB_NAME)" "--deployment" $k.deployment "--soak" (printf "%ds" (int $k.soakSeconds)) "--rollout-timeout" $k.rolloutTimeout -}}
{{- $cmd = concat $cmd (include "premigrate-lib.databaseArgs" $c | fromJsonArray) (list "--") $k.command -}}
{{- $_ := set $ctr "name" "contract" -}}
{{- $_ = set $ctr "command" $cmd -}}
{{- if $k.args -}}
{{- $_ = set $ctr "args" $k.args -}}
{{- else -}}
{{- $_ = unset $ctr "args" -}}
{{- end -}}
{{- $_ = set $pod.spec "serviceAccountName" $k.name -}}
{{- $_ = set $pod.metadata "labels" (merge (dict "app.kubernetes.io/component" "contract") $pod.metadata.labels) -}}
{{- /* the gate's refusal (exit 3: the contract's migration is not recorded on this database) fails the Job at once;
the exit codes of fail-fast are the migration's, so a contract command that fails is retried up to backoffLimit */ -}}
{{- $_ = set $spec "podFailurePolicy" (dict "rules" (list
  (dict "action" "FailJob" "onExitCodes" (dict "containerName" "contract" "operator" "In" "values" (list 3)))
  (dict "action" "Ignore" "onPodConditions" (list (dict "type" "DisruptionTarget" "status" "True"))))) -}}
{{- $_ = set $spec "activeDeadlineSeconds" $k.activeDeadlineSeconds -}}
{{- if kindIs "invalid" $c.ttlSecondsAfterFinished -}}
{{- $_ = unset $spec "ttlSecondsAfterFinished" -}}
{{- else -}}
{{- $_ = set $spec "ttlSecondsAfterFinished" $c.ttlSecondsAfterFinished -}}
{{- end -}}
{{- $labels := include "premigrate-lib.labels" (dict "c" $c "component" "contract") | fromYaml -}}
{{- $_ = set $labels "premigrate.io/identity" $c.identity -}}
{{- $meta := dict "name" $k.jobName "labels" $labels -}}
{{- with include "premigrate-lib.contractAnnotations" $c | fromYaml -}}
{{- $_ = set $meta "annotations" . -}}
{{- end -}}
{{- if and (eq $c.mode "hook") $c.recordsUID -}}
{{- $_ = set $meta "ownerReferences" (list (dict "apiVersion" "v1" "kind" "ConfigMap" "name" $c.recordsName "uid" $c.recordsUID)) -}}
{{- end -}}
{{- toYaml (dict "apiVersion" "batch/v1" "kind" "Job" "metadata" $meta "spec" $spec) -}}
{{- end -}}
{{- end }}

{{/*
Annotations of the contract Job. Argument: the resolved configuration. YAML.
*/}}
{{- define "premigrate-lib.contractAnnotations" -}}
{{- if eq .mode "hook" -}}
helm.sh/hook: post-install,post-upgrade
helm.sh/hook-weight: "0"
helm.sh/hook-delete-policy: before-hook-creation
{{- if .hookOutputLogs }}
helm.sh/hook-output-log-policy: hook-failed
{{- end }}
{{- else if eq .mode "argocd" -}}
argocd.argoproj.io/hook: PostSync
argocd.argoproj.io/hook-delete-policy: BeforeHookCreation
{{- end -}}
{{- end }}

{{/*
The contract's ServiceAccount: its token only in the contract pod (automountServiceAccountToken there), the
migration's ServiceAccount annotations (a cloud database identity).
*/}}
{{- define "premigrate-lib.contractServiceAccount" -}}
{{- $c := dict -}}{{- include "premigrate-lib.config" (dict "in" . "out" $c) -}}
{{- $k := dict -}}{{- include "premigrate-lib.contractConfig" (dict "in" . "c" $c "out" $k) -}}
{{- if $k.enabled -}}
apiVersion: v1
kind: ServiceAccount
metadata:
  name: {{ $k.name }}
  labels:
    {{- include "premigrate-lib.labels" (dict "c" $c "component" "contract") | nindent 4 }}
  {{- with $c.serviceAccountAnnotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
automountServiceAccountToken: false
{{- end }}
{{- end }}

{{/*
The contract's Role: read and update the records ConfigMaps, by name (the release's migration lock and the
contract's record); get its Job, by name (its creation time); get the Deployment, by name, and list its
ReplicaSets and pods (list cannot be limited to names: the rollout facts), get a pod (the holder of a lock
that was not renewed); create Events (ContractFailed and
ContractCompleted, on the Deployment); get the object that holds the database's data, by name.
*/}}
{{- define "premigrate-lib.contractRole" -}}
{{- $c := dict -}}{{- include "premigrate-lib.config" (dict "in" . "out" $c) -}}
{{- $k := dict -}}{{- include "premigrate-lib.contractConfig" (dict "in" . "c" $c "out" $k) -}}
{{- if $k.enabled -}}
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: {{ $k.name }}
  labels:
    {{- include "premigrate-lib.labels" (dict "c" $c "component" "contract") | nindent 4 }}
rules:
  - apiGroups:
      - ""
    resources:
      - configmaps
    resourceNames:
      - {{ $c.recordsName }}
      - {{ $c.storeName }}
    verbs:
      - get
      - update
  - apiGroups:
      - batch
    resources:
      - jobs
    resourceNames:
      - {{ $k.jobName }}
    verbs:
      - get
  - apiGroups:
      - apps
    resources:
      - deployments
    resourceNames:
      - {{ $k.deployment }}
    verbs:
      - get
  - apiGroups:
      - apps
    resources:
      - replicasets
    verbs:
      - list
  - apiGroups:
      - ""
    resources:
      - pods
    verbs:
      - get
      - list
  - apiGroups:
      - ""
    resources:
      - events
    verbs:
      - create
  {{- with $c.database.object }}
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

{{- define "premigrate-lib.contractRoleBinding" -}}
{{- $c := dict -}}{{- include "premigrate-lib.config" (dict "in" . "out" $c) -}}
{{- $k := dict -}}{{- include "premigrate-lib.contractConfig" (dict "in" . "c" $c "out" $k) -}}
{{- if $k.enabled -}}
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: {{ $k.name }}
  labels:
    {{- include "premigrate-lib.labels" (dict "c" $c "component" "contract") | nindent 4 }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: {{ $k.name }}
subjects:
  - kind: ServiceAccount
    name: {{ $k.name }}
    namespace: {{ $c.root.Release.Namespace }}
{{- end }}
{{- end }}
