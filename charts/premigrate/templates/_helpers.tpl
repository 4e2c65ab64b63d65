{{/*
Chart name, used in the app.kubernetes.io/name label.
*/}}
{{- define "premigrate.name" -}}
{{- include "premigrate-lib.name" (dict "root" . "override" .Values.nameOverride) -}}
{{- end }}

{{/*
Prefix of every resource name (premigrate-lib.fullname: at most 40 characters).
*/}}
{{- define "premigrate.fullname" -}}
{{- include "premigrate-lib.fullname" (dict "root" . "chart" (default .Chart.Name .Values.nameOverride) "override" .Values.fullnameOverride) -}}
{{- end }}

{{/*
Selector labels, and the recommended labels (premigrate-lib.matchLabels, premigrate-lib.standardLabels).
Argument: dict "root" $ "component" NAME.
*/}}
{{- define "premigrate.selectorLabels" -}}
{{- include "premigrate-lib.matchLabels" (dict "root" .root "name" (include "premigrate.name" .root) "component" .component) -}}
{{- end }}

{{- define "premigrate.labels" -}}
{{- include "premigrate-lib.standardLabels" (dict "root" .root "name" (include "premigrate.name" .root) "component" .component) -}}
{{- end }}

{{/*
An image reference (premigrate-lib.imageRef), its repository moved to global.imageRegistry when that is set.
Argument: dict "image" IMAGE_VALUES "tag" DEFAULT_TAG "root" $.
*/}}
{{- define "premigrate.imageRef" -}}
{{- include "premigrate-lib.imageRef" (dict "image" .image "tag" .tag "registry" ((.root.Values.global | default dict).imageRegistry)) -}}
{{- end }}

{{/*
A repository moved to global.imageRegistry when that is set (premigrate-lib.repository), and without its
registry (premigrate-lib.repositoryPath). Argument of the first: dict "repository" REPOSITORY "root" $.
*/}}
{{- define "premigrate.repository" -}}
{{- include "premigrate-lib.repository" (dict "repository" .repository "registry" ((.root.Values.global | default dict).imageRegistry)) -}}
{{- end }}

{{- define "premigrate.repositoryPath" -}}
{{- include "premigrate-lib.repositoryPath" . -}}
{{- end }}

{{- define "premigrate.appTag" -}}
{{- default .Chart.AppVersion .Values.image.tag | toString -}}
{{- end }}

{{- define "premigrate.image" -}}
{{- include "premigrate.imageRef" (dict "image" .Values.image "tag" (include "premigrate.appTag" .) "root" .) -}}
{{- end }}

{{- define "premigrate.gateImage" -}}
{{- include "premigrate.imageRef" (dict "image" .Values.gate.image "tag" .Chart.AppVersion "root" .) -}}
{{- end }}

{{- define "premigrate.postgresqlImage" -}}
{{- include "premigrate.imageRef" (dict "image" .Values.postgresql.image "tag" "15" "root" .) -}}
{{- end }}

{{/*
Object names.
*/}}
{{- define "premigrate.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "premigrate.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end }}


{{- define "premigrate.postgresqlName" -}}
{{- include "premigrate.fullname" . }}-postgresql
{{- end }}

{{/*
The Secret and key the app's database credential comes from: the database URL (the chart's Secret, or
database.existingSecret), or, with postgresql.auth.existingSecret, the embedded database's password.
*/}}
{{- define "premigrate.databaseSecretName" -}}
{{- if and .Values.postgresql.enabled .Values.postgresql.auth.existingSecret -}}
{{- .Values.postgresql.auth.existingSecret -}}
{{- else if .Values.postgresql.enabled -}}
{{- include "premigrate.postgresqlName" . -}}
{{- else -}}
{{- .Values.database.existingSecret -}}
{{- end -}}
{{- end }}

{{- define "premigrate.databaseSecretKey" -}}
{{- if and .Values.postgresql.enabled .Values.postgresql.auth.existingSecret -}}
{{- .Values.postgresql.auth.existingSecretPasswordKey -}}
{{- else if .Values.postgresql.enabled -}}
url
{{- else -}}
{{- .Values.database.existingSecretKey -}}
{{- end -}}
{{- end }}

{{/*
The database URL env entries (an EnvVar list): the URL from its Secret; or, when the embedded database's
password is in postgresql.auth.existingSecret, a URL without the password and PGPASSWORD from that Secret
(libpq-compatible drivers such as pgx and lib/pq read it when the URL has no password).
*/}}
{{- define "premigrate.databaseEnv" -}}
{{- if and .Values.postgresql.enabled .Values.postgresql.auth.existingSecret -}}
{{- $auth := .Values.postgresql.auth -}}
- name: {{ .Values.database.urlEnvName }}
  value: {{ printf "postgres://%s@%s:5432/%s?sslmode=disable" (urlquery $auth.username | replace "+" "%20") (include "premigrate.postgresqlName" .) $auth.database | quote }}
- name: PGPASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ include "premigrate.databaseSecretName" . }}
      key: {{ include "premigrate.databaseSecretKey" . }}
{{- else -}}
- name: {{ .Values.database.urlEnvName }}
  valueFrom:
    secretKeyRef:
      name: {{ include "premigrate.databaseSecretName" . }}
      key: {{ include "premigrate.databaseSecretKey" . }}
{{- end -}}
{{- end }}

{{/*
The env list of the app container: the database URL, then env.
*/}}
{{- define "premigrate.appEnv" -}}
{{ include "premigrate.databaseEnv" . }}
{{- with .Values.env }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/*
The migration machinery comes from the library chart premigrate-lib. "premigrate.lib" fills the dict given as
"out" with the library's argument: the root context, the chart's names, and the library's values mapped from
this chart's: the migration runs the app's image, command and env (the database URL first) unless the
migration.* values say otherwise, and its pod takes the app pod's scheduling, security contexts, annotations,
labels and volumes where migration.* leaves them null. Usage:

  {{- $lib := dict -}}{{- include "premigrate.lib" (dict "root" . "out" $lib) -}}
  {{ include "premigrate-lib.migrationJob" $lib }}
*/}}
{{- define "premigrate.lib" -}}
{{- $root := .root -}}
{{- include "premigrate.validate" $root -}}
{{- $V := $root.Values -}}
{{- $m := $V.migration -}}
{{- $image := dict "repository" (include "premigrate.repository" (dict "repository" $V.image.repository "root" $root)) "tag" (include "premigrate.appTag" $root) "digest" $V.image.digest -}}
{{- if $m.image.repository -}}
{{- $image = dict "repository" (include "premigrate.repository" (dict "repository" $m.image.repository "root" $root)) "tag" (toString ($m.image.tag | default (include "premigrate.appTag" $root))) "digest" $m.image.digest -}}
{{- end -}}
{{- $_ := set $image "pullPolicy" ($m.image.pullPolicy | default $V.image.pullPolicy) -}}
{{- $appOr := dict -}}
{{- range $k, $app := dict "podAnnotations" $V.podAnnotations "podLabels" $V.podLabels "nodeSelector" $V.nodeSelector "tolerations" $V.tolerations "affinity" $V.affinity "priorityClassName" $V.priorityClassName "extraVolumes" $V.extraVolumes "extraVolumeMounts" $V.extraVolumeMounts -}}
{{- $_ = set $appOr $k (ternary $app (index $m $k) (kindIs "invalid" (index $m $k))) -}}
{{- end -}}
{{- $pod := dict
  "annotations" $appOr.podAnnotations
  "labels" $appOr.podLabels
  "nodeSelector" $appOr.nodeSelector
  "tolerations" $appOr.tolerations
  "affinity" $appOr.affinity
  "priorityClassName" $appOr.priorityClassName
  "extraVolumes" $appOr.extraVolumes
  "extraVolumeMounts" $appOr.extraVolumeMounts
  "initContainers" $m.initContainers
  "sidecars" $m.sidecars
  "imagePullSecrets" $V.imagePullSecrets
  "securityContext" $V.podSecurityContext
  "containerSecurityContext" $V.securityContext -}}
{{- $gateImage := merge (dict "tag" ($V.gate.image.tag | default $root.Chart.AppVersion)) $V.gate.image -}}
{{- $gate := dict
  "mode" $V.gate.mode
  "command" ($V.gate.command | default $V.command)
  "args" $V.gate.args
  "commandImage" (dict "repository" (include "premigrate.repository" (dict "repository" $V.image.repository "root" $root)) "tag" (include "premigrate.appTag" $root) "digest" $V.image.digest "pullPolicy" $V.image.pullPolicy)
  "env" (include "premigrate.appEnv" $root | fromYamlArray)
  "envFrom" ($V.envFrom | default list)
  "image" $gateImage
  "delivery" $V.gate.delivery
  "waitIn" $V.gate.waitIn
  "timeout" $V.gate.timeout
  "progressInterval" $V.gate.progressInterval
  "resources" $V.gate.resources
  "serviceAccountName" (include "premigrate.serviceAccountName" $root) -}}
{{- /* the database the records are bound to: the embedded PostgreSQL's claim (or its pod, whose emptyDir holds
the data without persistence), or the external database's URL */ -}}
{{- $db := dict -}}
{{- if ternary true $m.bindRecordsToDatabase (kindIs "invalid" $m.bindRecordsToDatabase) -}}
{{- if $V.postgresql.enabled -}}
{{- $pg := include "premigrate.postgresqlName" $root -}}
{{- $_ := set $db "object" (ternary (printf "persistentvolumeclaim/data-%s-0" $pg) (printf "pod/%s-0" $pg) (and $V.postgresql.persistence $V.postgresql.persistence.enabled | default false)) -}}
{{- else if $V.database.existingSecret -}}
{{- $_ := set $db "urlSecretName" $V.database.existingSecret -}}
{{- $_ := set $db "urlSecretKey" $V.database.existingSecretKey -}}
{{- end -}}
{{- end -}}
{{- $values := dict
  "database" $db
  "enabled" $m.enabled
  "mode" $m.mode
  "image" $image
  "command" ($m.command | default $V.command)
  "args" (include "premigrate.migrationArgs" $root | fromJsonArray)
  "env" (concat (include "premigrate.databaseEnv" $root | fromYamlArray) $V.env $m.env)
  "envFrom" (concat $V.envFrom $m.envFrom)
  "resources" $m.resources
  "backoffLimit" $m.backoffLimit
  "activeDeadlineSeconds" $m.activeDeadlineSeconds
  "ttlSecondsAfterFinished" $m.ttlSecondsAfterFinished
  "hookWeight" $m.hookWeight
  "hookDeletePolicy" $m.hookDeletePolicy
  "hookOutputLogs" $m.hookOutputLogs
  "failFastExitCodes" (include "premigrate.failFastExitCodes" $root | fromJsonArray)
  "keepRecords" $m.keepRecords
  "runHistory" $m.runHistory
  "check" $m.check
  "identityExtra" $m.identityExtra
  "waitForPostgres" (ternary (printf "%s:5432" (include "premigrate.postgresqlName" $root)) "" $V.postgresql.enabled)
  "preInstallHook" (eq (include "premigrate.preInstallHook" $root) "true")
  "pod" $pod
  "serviceAccount" (dict "annotations" (dig "serviceAccount" "annotations" dict $m))
  "guard" $m.guard
  "gate" $gate -}}
{{- $_ = set .out "root" $root -}}
{{- $_ = set .out "values" $values -}}
{{- $_ = set .out "fullname" (include "premigrate.fullname" $root) -}}
{{- $_ = set .out "name" (include "premigrate.name" $root) -}}
{{- end }}

{{/*
One value of the library's resolved configuration. Argument: dict "root" $ "key" KEY (see premigrate-lib.value).
*/}}
{{- define "premigrate.libValue" -}}
{{- $lib := dict "key" .key -}}{{- include "premigrate.lib" (dict "root" .root "out" $lib) -}}
{{- include "premigrate-lib.value" $lib -}}
{{- end }}

{{- define "premigrate.identity" -}}
{{- include "premigrate.libValue" (dict "root" . "key" "identity") -}}
{{- end }}

{{- define "premigrate.migrationJobName" -}}
{{- include "premigrate.libValue" (dict "root" . "key" "jobName") -}}
{{- end }}

{{- define "premigrate.migrationJobKind" -}}
{{- include "premigrate.libValue" (dict "root" . "key" "jobKind") -}}
{{- end }}

{{- define "premigrate.recordsName" -}}
{{- include "premigrate.libValue" (dict "root" . "key" "recordsName") -}}
{{- end }}

{{/*
Argo CD sync wave annotation (argocd mode only). Argument: dict "root" $ "wave" "N".
*/}}
{{- define "premigrate.syncWave" -}}
{{- if eq .root.Values.migration.mode "argocd" -}}
argocd.argoproj.io/sync-wave: {{ .wave | quote }}
{{- end -}}
{{- end }}

{{/*
The Deployment's progressDeadlineSeconds: the value when set; else, while pods wait for the migration,
the migration's deadline plus two minutes (never below Kubernetes' default of 600), so a long migration
does not mark the rollout failed before the migration itself would fail.
*/}}
{{- define "premigrate.progressDeadlineSeconds" -}}
{{- if not (kindIs "invalid" .Values.progressDeadlineSeconds) -}}
{{- .Values.progressDeadlineSeconds | int -}}
{{- else if include "premigrate.gateEnabled" . -}}
{{- max 600 (add (include "premigrate.migrationDeadline" . | int) 120) -}}
{{- else -}}
600
{{- end -}}
{{- end }}

{{/*
migration.enabled and migration.activeDeadlineSeconds as the library resolves them for the chart's own
templates: null or missing (a null in the user's values, which Helm deletes; helm upgrade --reuse-values from
a chart without the key) is the library's default, true and 900. "premigrate.migrationEnabled" is non-empty
when enabled.
*/}}
{{- define "premigrate.migrationEnabled" -}}
{{- if or (kindIs "invalid" .Values.migration.enabled) .Values.migration.enabled -}}
true
{{- end -}}
{{- end }}

{{- define "premigrate.migrationDeadline" -}}
{{- ternary 900 .Values.migration.activeDeadlineSeconds (kindIs "invalid" .Values.migration.activeDeadlineSeconds) | int -}}
{{- end }}

{{/*
True (non-empty) when the app pods get the wait-for-migration init container.
*/}}
{{- define "premigrate.gateEnabled" -}}
{{- if and (include "premigrate.migrationEnabled" .) (ne .Values.gate.mode "none") -}}
true
{{- end -}}
{{- end }}

{{/*
The app container's startup probe: startupProbe when set. Otherwise, when the app container itself waits
for the migration (gate.waitIn app), the liveness probe's check (else the readiness probe's) every second
for as long as the migration may take (migration.activeDeadlineSeconds + 120, at least 600 s), so that the
liveness probe does not restart a container that is still waiting. Empty for none.
*/}}
{{- define "premigrate.startupProbe" -}}
{{- if .Values.startupProbe -}}
{{- toYaml .Values.startupProbe -}}
{{- else if and (include "premigrate.gateNeedsAPI" .) (eq .Values.gate.waitIn "app") -}}
{{- with include "premigrate.livenessProbe" . | default (include "premigrate.readinessProbe" .) | fromYaml -}}
{{- $probe := omit . "initialDelaySeconds" "periodSeconds" "successThreshold" "failureThreshold" -}}
{{- $_ := set $probe "periodSeconds" 1 -}}
{{- $_ = set $probe "failureThreshold" (max 600 (add (include "premigrate.migrationDeadline" $ | int) 120)) -}}
{{- toYaml $probe -}}
{{- end -}}
{{- end -}}
{{- end }}

{{/*
True (non-empty) when the app pods' gate watches the Job and needs the API (and so a ServiceAccount token):
not with gate.waitIn schedulingGate, where <fullname>-gate releases the pods with its own ServiceAccount.
*/}}
{{- define "premigrate.gateNeedsAPI" -}}
{{- if and (include "premigrate.migrationEnabled" .) (eq .Values.gate.mode "watch") (ne .Values.gate.waitIn "schedulingGate") -}}
true
{{- end -}}
{{- end }}

{{/*
Checks of values that the schema cannot express. Included by the Deployment, which is always rendered, and by
"premigrate.lib", so they come before the library's own checks.
*/}}
{{- define "premigrate.validate" -}}
{{- if eq (toString .Values.gate.mode) "job" -}}
{{- fail "gate.mode job is called watch since chart 0.3.0 (\"job\" now means only migration.mode job): set gate.mode: watch" -}}
{{- end -}}
{{- if and (include "premigrate.migrationEnabled" .) (not (.Values.migration.command | default .Values.command)) -}}
{{- fail "migration.command (or command) must name the migration's executable, e.g. [/app/migrate]: the gate runs it and records its success, so the image's entrypoint cannot be implied" -}}
{{- end -}}
{{- if and .Values.postgresql.enabled .Values.database.existingSecret -}}
{{- fail "database.existingSecret must be empty when postgresql.enabled is true: choose the embedded database or an external one" -}}
{{- end -}}
{{- if and (not .Values.postgresql.enabled) (not .Values.database.existingSecret) -}}
{{- fail "database.existingSecret is required when postgresql.enabled is false: the app needs a database URL" -}}
{{- end -}}
{{- if and .Values.database.existingSecret (not .Values.database.existingSecretKey) -}}
{{- fail "database.existingSecretKey is required when database.existingSecret is set" -}}
{{- end -}}
{{- if and .Values.postgresql.enabled (eq (toString .Values.migration.preInstallHook) "true") -}}
{{- fail "migration.preInstallHook: true needs a database that exists before the release (an external one: postgresql.enabled false, database.existingSecret): the embedded PostgreSQL is created by the release, after Helm's pre-install hooks ran (set it to null or false)" -}}
{{- end -}}
{{- if and (include "premigrate.gateNeedsAPI" .) (eq (include "premigrate.serviceAccountName" .) "default") -}}
{{- fail "gate.mode=watch needs the app's own ServiceAccount (serviceAccount.create=true, or serviceAccount.name naming one): the chart will not grant the namespace's default ServiceAccount, which every other pod uses, read access to the migration Job and records" -}}
{{- end -}}
{{- if and (include "premigrate.gateEnabled" .) (not (kindIs "invalid" .Values.progressDeadlineSeconds)) (lt (int .Values.progressDeadlineSeconds) (include "premigrate.migrationDeadline" . | int)) -}}
{{- fail (printf "progressDeadlineSeconds (%v) must be at least migration.activeDeadlineSeconds (%v): the app pods wait for the migration, and the Deployment must not be marked failed before the migration's own deadline" .Values.progressDeadlineSeconds (include "premigrate.migrationDeadline" .)) -}}
{{- end -}}
{{- with (dig "rollingUpdate" nil .Values.strategy) -}}
{{- if and (eq (toString (dig "maxSurge" 1 .)) "0") (eq (toString (dig "maxUnavailable" 1 .)) "0") -}}
{{- fail "strategy.rollingUpdate.maxSurge and strategy.rollingUpdate.maxUnavailable cannot both be 0: the rollout could never replace a pod" -}}
{{- end -}}
{{- end -}}
{{- if and (not (kindIs "invalid" .Values.podDisruptionBudget.minAvailable)) (not (kindIs "invalid" .Values.podDisruptionBudget.maxUnavailable)) -}}
{{- fail "podDisruptionBudget.minAvailable and podDisruptionBudget.maxUnavailable are exclusive: set one of them to null" -}}
{{- end -}}
{{- if and (include "premigrate.migrationEnabled" .) (eq .Values.gate.mode "command") (not .Values.gate.args) (not .Values.gate.command) -}}
{{- fail "gate.command or gate.args is required when gate.mode is command" -}}
{{- end -}}
{{- end }}

{{/*
The exit codes of the migration that fail its Job at once, as a JSON list: migration.failFastExitCodes, or when
null the demo's refusal to drop data (3) for the demo's image and none for any other.
*/}}
{{- define "premigrate.failFastExitCodes" -}}
{{- $codes := .Values.migration.failFastExitCodes -}}
{{- if kindIs "invalid" $codes -}}
{{- $codes = ternary (list 3) (list) (eq (include "premigrate.isDemo" .) "true") -}}
{{- end -}}
{{- toJson $codes -}}
{{- end }}
