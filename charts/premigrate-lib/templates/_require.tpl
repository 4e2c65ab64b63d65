{{/*
The declared order of an expand after the previous version's contract (requirePreviousContract): a version
whose migration (its expand) conflicts with a contract of the version before it that has not run (it re-adds
what that contract drops) says so, and `gate require-contract` refuses its migration until that contract ran
(docs/zero-downtime.md, "Skipping versions"). Every template takes the library's argument (premigrate-lib.config).
*/}}

{{/*
Whether the values declare it: "true" or "". Fails on a value that is not a boolean, and in a mode where no
check can run before the migration: in job mode the migration Job starts with the apply, beside everything else.
*/}}
{{- define "premigrate-lib.requirePreviousContract" -}}
{{- $c := dict -}}{{- include "premigrate-lib.config" (dict "in" . "out" $c) -}}
{{- $v := (.values | default dict).requirePreviousContract -}}
{{- if not (or (kindIs "invalid" $v) (kindIs "bool" $v)) -}}
{{- fail (printf "premigrate-lib: requirePreviousContract must be true or false, not %s %v" (kindOf $v) $v) -}}
{{- end -}}
{{- if and $v $c.enabled -}}
{{- if ne $c.mode "hook" -}}
{{- fail (printf "premigrate-lib: requirePreviousContract needs mode hook, not %s: its check is a pre-upgrade hook that runs before the migration's; in job mode the migration Job starts with the apply, and argocd mode has no such check yet. Deploy the previous version until its contract ran (its contract Job complete), then this one, with requirePreviousContract false" $c.mode) -}}
{{- end -}}
true
{{- end -}}
{{- end }}

{{/*
The check Job, <fullname>-require-<identity>: a pre-upgrade hook (pre-install too with preInstallHook) one
weight before the migration's, so Helm runs it after the migration's ServiceAccount, Role and RoleBinding and
before the migration. It is the migration Job's pod (image, environment, service account, security contexts,
scheduling) with `gate require-contract` in its container, which reads the records and exits 3 (the Job fails at
once, the upgrade with it, before anything is migrated or rolled out) while the identity deployed last before
this one has not run its contract step. Nothing on an install of hook mode without preInstallHook: the migration
Job is then a release object, and its ServiceAccount does not exist before the release's objects do.
*/}}
{{- define "premigrate-lib.requireContractJob" -}}
{{- $c := dict -}}{{- include "premigrate-lib.config" (dict "in" . "out" $c) -}}
{{- if and (include "premigrate-lib.requirePreviousContract" .) (eq $c.jobKind "hook") -}}
{{- $job := include "premigrate-lib.migrationJob" . | fromYaml -}}
{{- $spec := $job.spec -}}
{{- $pod := $spec.template -}}
{{- $ctr := first $pod.spec.containers -}}
{{- $cmd := list "/premigrate/gate" "require-contract" "--identity" $c.identity "--records" $c.recordsName "--store" $c.storeName "--job" "$(JOB_NAME)" -}}
{{- $cmd = concat $cmd (include "premigrate-lib.databaseArgs" $c | fromJsonArray) -}}
{{- $_ := set $ctr "name" "require-contract" -}}
{{- $_ = set $ctr "command" $cmd -}}
{{- $_ = unset $ctr "args" -}}
{{- $_ = set $pod.metadata "labels" (merge (dict "app.kubernetes.io/component" "require-contract") $pod.metadata.labels) -}}
{{- /* a refusal (exit 3) is an answer: the Job fails at once; anything else (the API server unreachable) is retried */ -}}
{{- $_ = set $spec "podFailurePolicy" (dict "rules" (list
  (dict "action" "FailJob" "onExitCodes" (dict "containerName" "require-contract" "operator" "In" "values" (list 3)))
  (dict "action" "Ignore" "onPodConditions" (list (dict "type" "DisruptionTarget" "status" "True"))))) -}}
{{- $_ = set $spec "backoffLimit" 2 -}}
{{- $_ = set $spec "activeDeadlineSeconds" 300 -}}
{{- $labels := include "premigrate-lib.labels" (dict "c" $c "component" "require-contract") | fromYaml -}}
{{- $_ = set $labels "premigrate.io/identity" $c.identity -}}
{{- $annotations := dict
  "helm.sh/hook" (include "premigrate-lib.hookEvents" $c)
  "helm.sh/hook-weight" (toString (sub (int $c.hookWeight) 1))
  "helm.sh/hook-delete-policy" "before-hook-creation,hook-succeeded" -}}
{{- if $c.hookOutputLogs -}}
{{- $_ = set $annotations "helm.sh/hook-output-log-policy" "hook-failed" -}}
{{- end -}}
{{- $meta := dict "name" (printf "%s-require-%s" $c.fullname $c.identity) "labels" $labels "annotations" $annotations -}}
{{- with $job.metadata.ownerReferences -}}
{{- $_ = set $meta "ownerReferences" . -}}
{{- end -}}
{{- toYaml (dict "apiVersion" "batch/v1" "kind" "Job" "metadata" $meta "spec" $spec) -}}
{{- end -}}
{{- end }}
