{{/*
Chart name, used in the app.kubernetes.io/name label.
*/}}
{{- define "premigrate.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Prefix of every resource name, at most 40 characters: the longest derived name,
<fullname>-migrate-<identity>, is also the value of the Job's batch.kubernetes.io/job-name label,
which must stay within 63 characters. A longer name is cut to 33 characters and given a dash and the
first 6 hex characters of its sha256, so two long release names that share a prefix never collide.
*/}}
{{- define "premigrate.fullname" -}}
{{- $name := "" -}}
{{- if .Values.fullnameOverride -}}
{{- $name = .Values.fullnameOverride -}}
{{- else -}}
{{- $chart := default .Chart.Name .Values.nameOverride -}}
{{- $name = ternary .Release.Name (printf "%s-%s" .Release.Name $chart) (contains $chart .Release.Name) -}}
{{- end -}}
{{- if gt (len $name) 40 -}}
{{- printf "%s-%s" ($name | trunc 33 | trimSuffix "-") ($name | sha256sum | trunc 6) -}}
{{- else -}}
{{- $name | trimSuffix "-" -}}
{{- end -}}
{{- end }}

{{/*
helm.sh/chart label value.
*/}}
{{- define "premigrate.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Selector labels. Argument: dict "root" $ "component" NAME.
*/}}
{{- define "premigrate.selectorLabels" -}}
app.kubernetes.io/name: {{ include "premigrate.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{/*
Recommended labels. Argument: dict "root" $ "component" NAME.
*/}}
{{- define "premigrate.labels" -}}
helm.sh/chart: {{ include "premigrate.chart" .root }}
{{ include "premigrate.selectorLabels" . }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
{{- end }}

{{/*
An image reference: repository@digest when a digest is set, else repository:tag.
Argument: dict "image" IMAGE_VALUES "tag" DEFAULT_TAG.
*/}}
{{- define "premigrate.imageRef" -}}
{{- if .image.digest -}}
{{- printf "%s@%s" .image.repository .image.digest -}}
{{- else -}}
{{- printf "%s:%s" .image.repository (toString (default .tag .image.tag)) -}}
{{- end -}}
{{- end }}

{{- define "premigrate.appTag" -}}
{{- default .Chart.AppVersion .Values.image.tag | toString -}}
{{- end }}

{{- define "premigrate.image" -}}
{{- include "premigrate.imageRef" (dict "image" .Values.image "tag" (include "premigrate.appTag" .)) -}}
{{- end }}

{{/*
The migration image: migration.image when its repository is set, else the app image (tag or digest).
*/}}
{{- define "premigrate.migrationImage" -}}
{{- if .Values.migration.image.repository -}}
{{- include "premigrate.imageRef" (dict "image" .Values.migration.image "tag" (include "premigrate.appTag" .)) -}}
{{- else -}}
{{- include "premigrate.image" . -}}
{{- end -}}
{{- end }}

{{- define "premigrate.migrationPullPolicy" -}}
{{- default .Values.image.pullPolicy .Values.migration.image.pullPolicy -}}
{{- end }}

{{- define "premigrate.gateImage" -}}
{{- include "premigrate.imageRef" (dict "image" .Values.gate.image "tag" .Chart.AppVersion) -}}
{{- end }}

{{/*
How the gate binary reaches the migration container: "initContainer" (the default: copied through an
emptyDir by an init container, works on every cluster and runtime) or "imageVolume" (the gate image mounted
as an image volume: no extra container, but it needs a runtime with image volumes, which the chart cannot
see). "auto" picks imageVolume where image volumes are on by default (Kubernetes 1.35 and later).
*/}}
{{- define "premigrate.gateDelivery" -}}
{{- $d := .Values.gate.delivery | default "initContainer" -}}
{{- if eq $d "auto" -}}
{{- if semverCompare ">=1.35.0-0" .Capabilities.KubeVersion.Version -}}
imageVolume
{{- else -}}
initContainer
{{- end -}}
{{- else -}}
{{- $d -}}
{{- end -}}
{{- end }}

{{- define "premigrate.postgresqlImage" -}}
{{- include "premigrate.imageRef" (dict "image" .Values.postgresql.image "tag" "15") -}}
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

{{- define "premigrate.migrateName" -}}
{{- include "premigrate.fullname" . }}-migrate
{{- end }}

{{- define "premigrate.recordsName" -}}
{{- include "premigrate.fullname" . }}-migrations
{{- end }}

{{- define "premigrate.gateName" -}}
{{- include "premigrate.fullname" . }}-gate
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
The migration identity: the first 10 hex characters of the sha256 of everything the migration Job's pod
template is made of: what determines the migration (image, command, args, app env + migration env, envFrom,
the database secret) and the rest of the Job's spec (resources, the record step's image, retries, deadline,
security contexts, the chart version). So a changed Job spec is always a new identity, and in job mode a new
Job name: never a patch of an immutable pod template. It is the Job's premigrate.io/identity label, the app
pods' premigrate.io/identity annotation and the gate's --identity.
*/}}
{{- define "premigrate.identity" -}}
{{- $m := .Values.migration -}}
{{- $database := dict "name" (include "premigrate.databaseSecretName" .) "key" (include "premigrate.databaseSecretKey" .) "env" .Values.database.urlEnvName -}}
{{- $migration := dict "image" (include "premigrate.migrationImage" .) "pullPolicy" (include "premigrate.migrationPullPolicy" .) "command" ($m.command | default .Values.command) "args" $m.args "env" (concat .Values.env $m.env) "envFrom" (concat .Values.envFrom $m.envFrom) "database" $database -}}
{{- $job := dict "resources" $m.resources "backoffLimit" $m.backoffLimit "activeDeadlineSeconds" $m.activeDeadlineSeconds "ttl" $m.ttlSecondsAfterFinished "failFast" $m.failFastExitCodes "keepRecords" $m.keepRecords -}}
{{- $pod := dict "gateImage" (include "premigrate.gateImage" .) "gatePullPolicy" .Values.gate.image.pullPolicy "gateResources" .Values.gate.resources "gateDelivery" (include "premigrate.gateDelivery" .) "podSecurityContext" .Values.podSecurityContext "securityContext" .Values.securityContext "imagePullSecrets" .Values.imagePullSecrets "chart" .Chart.Version -}}
{{- toJson (dict "migration" $migration "job" $job "pod" $pod) | sha256sum | trunc 10 -}}
{{- end }}

{{/*
The records ConfigMap as the cluster has it (`lookup`; nothing under helm template): "missing", "owned"
(carries this release's Helm ownership, so Helm adopts or keeps it) or "foreign" (it exists without it: the
pre-install hook of a chart before 0.2.0, or one made by hand).
*/}}
{{- define "premigrate.recordsState" -}}
{{- $cm := lookup "v1" "ConfigMap" .Release.Namespace (include "premigrate.recordsName" .) -}}
{{- if not $cm -}}
missing
{{- else if eq (dig "metadata" "annotations" "meta.helm.sh/release-name" "" $cm) .Release.Name -}}
owned
{{- else -}}
foreign
{{- end -}}
{{- end }}

{{/*
True (non-empty) when the chart renders the records ConfigMap. Always, except in hook mode on an upgrade
that finds a ConfigMap without this release's ownership: Helm would refuse to import it before any hook ran.
`gate run` gives it the ownership metadata, and the next upgrade renders it.
*/}}
{{- define "premigrate.renderRecords" -}}
{{- if and .Values.migration.enabled (or (ne .Values.migration.mode "hook") .Release.IsInstall (ne (include "premigrate.recordsState" .) "foreign")) -}}
true
{{- end -}}
{{- end }}

{{/*
How the migration Job is rendered: "hook" (Helm hook), "plain" (release object named by the identity)
or "argocd" (Argo CD Sync hook). In hook mode an install, and an upgrade that finds no records ConfigMap
(migrations enabled on an installed release, the ConfigMap deleted by hand), render a plain Job: Helm then
creates the records ConfigMap, the migration's RBAC and the Job together with the release (a pre-install
hook would run before any of them exist, before the embedded database too), and the gate holds the app
pods until the Job recorded its success. Every other upgrade runs the pre-upgrade hook.
*/}}
{{- define "premigrate.migrationJobKind" -}}
{{- if eq .Values.migration.mode "job" -}}
plain
{{- else if eq .Values.migration.mode "argocd" -}}
argocd
{{- else if or .Release.IsInstall (eq (include "premigrate.recordsState" .) "missing") -}}
plain
{{- else -}}
hook
{{- end -}}
{{- end }}

{{- define "premigrate.migrationJobName" -}}
{{- if eq (include "premigrate.migrationJobKind" .) "plain" -}}
{{- include "premigrate.migrateName" . }}-{{ include "premigrate.identity" . }}
{{- else -}}
{{- include "premigrate.migrateName" . -}}
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
{{- max 600 (add (int .Values.migration.activeDeadlineSeconds) 120) -}}
{{- else -}}
600
{{- end -}}
{{- end }}

{{/*
True (non-empty) when the app pods get the wait-for-migration init container.
*/}}
{{- define "premigrate.gateEnabled" -}}
{{- if and .Values.migration.enabled (ne .Values.gate.mode "none") -}}
true
{{- end -}}
{{- end }}

{{/*
True (non-empty) when the gate watches the Job and needs the API (and so a ServiceAccount token).
*/}}
{{- define "premigrate.gateNeedsAPI" -}}
{{- if and .Values.migration.enabled (eq .Values.gate.mode "job") -}}
true
{{- end -}}
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
Annotations of the migration's support objects (ServiceAccount, Role, RoleBinding). When the migration Job
is a Helm hook they are hooks too (a hook runs before the release's objects are updated), deleted once the
hooks ran, whether they succeeded or failed, so that nothing of them outlives the release. When the Job
is a release object they are release objects; argocd mode: sync wave -1.
*/}}
{{- define "premigrate.supportAnnotations" -}}
{{- if eq (include "premigrate.migrationJobKind" .) "hook" -}}
helm.sh/hook: pre-upgrade
helm.sh/hook-weight: "-10"
helm.sh/hook-delete-policy: before-hook-creation,hook-succeeded,hook-failed
{{- else -}}
{{- include "premigrate.syncWave" (dict "root" . "wave" "-1") -}}
{{- end -}}
{{- end }}

{{/*
Metadata of the records ConfigMap, as `gate run --create-records` creates it when it is missing (a
pre-install hook runs before the release's objects exist; migrations enabled on an installed release; a
ConfigMap deleted by hand): the labels the chart renders and Helm's ownership annotations, so Helm adopts
it as the release object it renders. JSON.
*/}}
{{- define "premigrate.recordsMetadata" -}}
{{- $labels := include "premigrate.labels" (dict "root" . "component" "migration") | fromYaml -}}
{{- $annotations := dict "meta.helm.sh/release-name" .Release.Name "meta.helm.sh/release-namespace" .Release.Namespace -}}
{{- toJson (dict "labels" $labels "annotations" $annotations) -}}
{{- end }}

{{/*
Annotations of the migration Job.
*/}}
{{- define "premigrate.migrationJobAnnotations" -}}
{{- $kind := include "premigrate.migrationJobKind" . -}}
{{- if eq $kind "hook" -}}
helm.sh/hook: pre-upgrade
helm.sh/hook-weight: {{ .Values.migration.hookWeight | toString | quote }}
helm.sh/hook-delete-policy: {{ .Values.migration.hookDeletePolicy }}
helm.sh/hook-output-log-policy: hook-failed
{{- else if eq $kind "argocd" -}}
{{- $policies := list -}}
{{- range splitList "," .Values.migration.hookDeletePolicy -}}
{{- $p := trim . -}}
{{- if eq $p "before-hook-creation" -}}{{- $policies = append $policies "BeforeHookCreation" -}}{{- end -}}
{{- if eq $p "hook-succeeded" -}}{{- $policies = append $policies "HookSucceeded" -}}{{- end -}}
{{- if eq $p "hook-failed" -}}{{- $policies = append $policies "HookFailed" -}}{{- end -}}
{{- end -}}
argocd.argoproj.io/hook: Sync
argocd.argoproj.io/hook-delete-policy: {{ join "," $policies }}
argocd.argoproj.io/sync-wave: "0"
{{- end -}}
{{- end }}

{{/*
The failFastExitCodes, sorted ascending (the API requires an ordered set).
*/}}
{{- define "premigrate.failFastExitCodes" -}}
{{- $padded := list -}}
{{- range .Values.migration.failFastExitCodes -}}
{{- $padded = append $padded (printf "%03d" (int .)) -}}
{{- end -}}
{{- $codes := list -}}
{{- range (sortAlpha $padded | uniq) -}}
{{- $codes = append $codes (atoi .) -}}
{{- end -}}
{{- toJson $codes -}}
{{- end }}

{{/*
Checks of values that the schema cannot express. Included by the Deployment, which is always rendered.
*/}}
{{- define "premigrate.validate" -}}
{{- if and .Values.postgresql.enabled .Values.database.existingSecret -}}
{{- fail "database.existingSecret must be empty when postgresql.enabled is true: choose the embedded database or an external one" -}}
{{- end -}}
{{- if and (not .Values.postgresql.enabled) (not .Values.database.existingSecret) -}}
{{- fail "database.existingSecret is required when postgresql.enabled is false: the app needs a database URL" -}}
{{- end -}}
{{- if and .Values.database.existingSecret (not .Values.database.existingSecretKey) -}}
{{- fail "database.existingSecretKey is required when database.existingSecret is set" -}}
{{- end -}}
{{- if and (eq .Values.migration.mode "job") .Values.postgresql.enabled (not .Values.postgresql.auth.password) (not .Values.postgresql.auth.existingSecret) -}}
{{- fail "postgresql.auth.password is required with migration.mode=job and the embedded database: job mode is made for helm template and kubectl apply, which render without lookup, so a generated password would change on every render while the database keeps the first one (or keep the password in a Secret of your own: postgresql.auth.existingSecret)" -}}
{{- end -}}
{{- if and (include "premigrate.gateNeedsAPI" .) (eq (include "premigrate.serviceAccountName" .) "default") -}}
{{- fail "gate.mode=job needs the app's own ServiceAccount (serviceAccount.create=true, or serviceAccount.name naming one): the chart will not grant the namespace's default ServiceAccount, which every other pod uses, read access to the migration Job and records" -}}
{{- end -}}
{{- if and (include "premigrate.gateEnabled" .) (not (kindIs "invalid" .Values.progressDeadlineSeconds)) (lt (int .Values.progressDeadlineSeconds) (int .Values.migration.activeDeadlineSeconds)) -}}
{{- fail (printf "progressDeadlineSeconds (%v) must be at least migration.activeDeadlineSeconds (%v): the app pods wait for the migration, and the Deployment must not be marked failed before the migration's own deadline" .Values.progressDeadlineSeconds .Values.migration.activeDeadlineSeconds) -}}
{{- end -}}
{{- with (dig "rollingUpdate" nil .Values.strategy) -}}
{{- if and (eq (toString (dig "maxSurge" 1 .)) "0") (eq (toString (dig "maxUnavailable" 1 .)) "0") -}}
{{- fail "strategy.rollingUpdate.maxSurge and strategy.rollingUpdate.maxUnavailable cannot both be 0: the rollout could never replace a pod" -}}
{{- end -}}
{{- end -}}
{{- if and (eq .Values.migration.mode "argocd") .Values.postgresql.enabled (not .Values.postgresql.auth.password) (not .Values.postgresql.auth.existingSecret) -}}
{{- fail "postgresql.auth.password is required with migration.mode=argocd and the embedded database: Argo CD renders without lookup, so a generated password would change on every sync (or keep the password in a Secret of your own: postgresql.auth.existingSecret)" -}}
{{- end -}}
{{- if and (not (kindIs "invalid" .Values.podDisruptionBudget.minAvailable)) (not (kindIs "invalid" .Values.podDisruptionBudget.maxUnavailable)) -}}
{{- fail "podDisruptionBudget.minAvailable and podDisruptionBudget.maxUnavailable are exclusive: set one of them to null" -}}
{{- end -}}
{{- if and .Values.migration.enabled (eq .Values.gate.mode "command") (not .Values.gate.args) (not .Values.gate.command) -}}
{{- fail "gate.command or gate.args is required when gate.mode is command" -}}
{{- end -}}
{{- end }}
