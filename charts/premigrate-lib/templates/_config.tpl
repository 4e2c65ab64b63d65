{{/*
premigrate-lib: every public template takes one argument, a dict:

  root      the chart's root context ($)
  values    the values subtree that configures the migration (any key of the chart's values; see README.md)
  fullname  optional: the prefix of the object names (default: <release>-<chart>, like `helm create`)
  name      optional: the app.kubernetes.io/name label (default: the chart's name)
  shared    optional: true when workloads of several charts of one release (a parent and its subcharts) are
            gated by one migration. Each chart passes the same values (e.g. .Values.global.premigrate) and
            computes the same names and identity (no chart's version is part of the identity or of the
            Job's spec hash), fullname defaults to the release's name, and image.tag (or digest) is required

"premigrate-lib.config" resolves that dict into the configuration every template reads: the values with
their defaults, the names, the identity and how the Job is rendered. A template cannot return a dict, so it
fills the dict given as "out":

  {{- $c := dict -}}{{- include "premigrate-lib.config" (dict "in" . "out" $c) -}}
*/}}

{{/*
The gate's version: the default tag of the gate image. It is the library's appVersion (a test keeps the two
equal): the parent chart's appVersion is the app's, not the gate's.
*/}}
{{- define "premigrate-lib.gateVersion" -}}
0.3.0
{{- end }}

{{- define "premigrate-lib.config" -}}
{{- $in := .in -}}
{{- $c := .out -}}
{{- $root := $in.root -}}
{{- $v := $in.values | default dict -}}
{{- $_ := set $c "root" $root -}}
{{- if not (or (kindIs "invalid" $in.shared) (kindIs "bool" $in.shared)) -}}
{{- fail (printf "premigrate-lib: shared must be true or false, not %s %v" (kindOf $in.shared) $in.shared) -}}
{{- end -}}
{{- $_ = set $c "shared" ($in.shared | default false) -}}
{{- /* A value that is missing or null takes its default: a null in the user's values (Helm then deletes the
key, and the chart's default does not come back), a key the chart of an older release did not have (helm upgrade
--reuse-values renders with the old chart's values), or a null passed as is. false, 0, [] and {} are kept. */ -}}
{{- $_ = set $c "enabled" (ternary true $v.enabled (kindIs "invalid" $v.enabled)) -}}
{{- $_ = set $c "mode" ($v.mode | default "hook") -}}
{{- /* names */ -}}
{{- $name := include "premigrate-lib.name" (dict "root" $root "override" $in.name) -}}
{{- $override := $in.fullname -}}
{{- if and (not $override) $c.shared -}}
{{- $override = $root.Release.Name -}}
{{- end -}}
{{- $full := include "premigrate-lib.fullname" (dict "root" $root "override" $override) -}}
{{- $_ = set $c "name" $name -}}
{{- $_ = set $c "fullname" $full -}}
{{- $_ = set $c "migrateName" (printf "%s-migrate" $full) -}}
{{- $_ = set $c "recordsName" (printf "%s-migrations" $full) -}}
{{- /* the records themselves: written by `gate run`, never by Helm (docs/design.md, "Where the records live") */ -}}
{{- $_ = set $c "storeName" (printf "%s-migration-records" $full) -}}
{{- /* the run history: written by `gate run`, never by Helm; owned by the records ConfigMap */ -}}
{{- $_ = set $c "historyName" (printf "%s-migration-runs" $full) -}}
{{- $_ = set $c "gateName" (printf "%s-gate" $full) -}}
{{- /* the migration container */ -}}
{{- $image := $v.image | default dict -}}
{{- if and $c.shared (not (or $image.tag $image.digest)) -}}
{{- fail "premigrate-lib: shared: image.tag (or image.digest) must be set: each chart of the release computes the migration's identity, and a subchart's appVersion is not its parent's" -}}
{{- end -}}
{{- $_ = set $c "image" (include "premigrate-lib.imageRef" (dict "image" $image "tag" $root.Chart.AppVersion)) -}}
{{- $_ = set $c "pullPolicy" ($image.pullPolicy | default "IfNotPresent") -}}
{{- $_ = set $c "command" ($v.command | default list) -}}
{{- $_ = set $c "args" ($v.args | default list) -}}
{{- $_ = set $c "env" ($v.env | default list) -}}
{{- $_ = set $c "envFrom" ($v.envFrom | default list) -}}
{{- /* a command that asks the database whether a recorded migration is applied (docs/design.md, "What a
record means"): gate run --check */ -}}
{{- $_ = set $c "check" ($v.check | default list) -}}
{{- $_ = set $c "resources" ($v.resources | default dict) -}}
{{- /* the Job */ -}}
{{- $_ = set $c "backoffLimit" (ternary 2 $v.backoffLimit (kindIs "invalid" $v.backoffLimit)) -}}
{{- $_ = set $c "activeDeadlineSeconds" (ternary 900 $v.activeDeadlineSeconds (kindIs "invalid" $v.activeDeadlineSeconds)) -}}
{{- $_ = set $c "ttlSecondsAfterFinished" $v.ttlSecondsAfterFinished -}}
{{- $_ = set $c "hookWeight" (ternary 0 $v.hookWeight (kindIs "invalid" $v.hookWeight)) -}}
{{- $_ = set $c "hookDeletePolicy" ($v.hookDeletePolicy | default "before-hook-creation") -}}
{{- $_ = set $c "hookOutputLogs" (ternary true $v.hookOutputLogs (kindIs "invalid" $v.hookOutputLogs)) -}}
{{- $_ = set $c "failFastExitCodes" (ternary (list) $v.failFastExitCodes (kindIs "invalid" $v.failFastExitCodes)) -}}
{{- $_ = set $c "keepRecords" (ternary 20 $v.keepRecords (kindIs "invalid" $v.keepRecords)) -}}
{{- /* the newest runs kept in <fullname>-migration-runs, each with its outcome and last output lines (0: none) */ -}}
{{- $_ = set $c "runHistory" (ternary 10 $v.runHistory (kindIs "invalid" $v.runHistory)) -}}
{{- $_ = set $c "waitForPostgres" ($v.waitForPostgres | default "") -}}
{{- /* hook mode: the install's migration is a pre-install hook too (the database exists before the release) */ -}}
{{- if not (or (kindIs "invalid" $v.preInstallHook) (kindIs "bool" $v.preInstallHook)) -}}
{{- fail (printf "premigrate-lib: preInstallHook must be true or false, not %s %v" (kindOf $v.preInstallHook) $v.preInstallHook) -}}
{{- end -}}
{{- $_ = set $c "preInstallHook" (and (eq $c.mode "hook") ($v.preInstallHook | default false)) -}}
{{- /* the database the records are bound to: the object that holds its data (its UID) and the Secret key of its
URL (a hash of it). Not part of the identity: binding the records changes what they mean, not the migration. */ -}}
{{- $db := $v.database | default dict -}}
{{- $_ = set $c "database" (dict "object" ($db.object | default "") "urlSecretName" ($db.urlSecretName | default "") "urlSecretKey" ($db.urlSecretKey | default "")) -}}
{{- /* the migration pod */ -}}
{{- $pod := $v.pod | default dict -}}
{{- $p := dict -}}
{{- range $k := list "annotations" "labels" "nodeSelector" "affinity" -}}
{{- $_ = set $p $k (get $pod $k | default dict) -}}
{{- end -}}
{{- range $k := list "tolerations" "imagePullSecrets" "extraVolumes" "extraVolumeMounts" "initContainers" "sidecars" "topologySpreadConstraints" -}}
{{- $_ = set $p $k (get $pod $k | default list) -}}
{{- end -}}
{{- $_ = set $p "priorityClassName" ($pod.priorityClassName | default "") -}}
{{- /* restricted Pod Security unless the values say otherwise ({} drops it; null is the default) */ -}}
{{- $restrictedPod := dict "runAsNonRoot" true "seccompProfile" (dict "type" "RuntimeDefault") -}}
{{- $restrictedContainer := dict "allowPrivilegeEscalation" false "readOnlyRootFilesystem" true "runAsNonRoot" true "capabilities" (dict "drop" (list "ALL")) -}}
{{- $_ = set $p "securityContext" (ternary $restrictedPod $pod.securityContext (kindIs "invalid" $pod.securityContext)) -}}
{{- $_ = set $p "containerSecurityContext" (ternary $restrictedContainer $pod.containerSecurityContext (kindIs "invalid" $pod.containerSecurityContext)) -}}
{{- $_ = set $c "pod" $p -}}
{{- $sa := $v.serviceAccount | default dict -}}
{{- $_ = set $c "serviceAccountAnnotations" ($sa.annotations | default dict) -}}
{{- /* the gate */ -}}
{{- $g := $v.gate | default dict -}}
{{- $gateImage := $g.image | default dict -}}
{{- $gate := dict -}}
{{- $_ = set $gate "mode" ($g.mode | default "watch") -}}
{{- $_ = set $gate "image" (include "premigrate-lib.imageRef" (dict "image" (merge (dict) $gateImage (dict "repository" "ghcr.io/premigrate/gate")) "tag" (include "premigrate-lib.gateVersion" .) "registry" (($root.Values.global | default dict).imageRegistry | default ""))) -}}
{{- $_ = set $gate "pullPolicy" ($gateImage.pullPolicy | default "IfNotPresent") -}}
{{- $delivery := $g.delivery | default "initContainer" -}}
{{- if eq $delivery "auto" -}}
{{- $delivery = ternary "imageVolume" "initContainer" (semverCompare ">=1.35.0-0" $root.Capabilities.KubeVersion.Version) -}}
{{- end -}}
{{- $_ = set $gate "delivery" $delivery -}}
{{- $_ = set $gate "waitIn" ($g.waitIn | default "initContainer") -}}
{{- $_ = set $gate "timeout" ($g.timeout | default "15m") -}}
{{- $_ = set $gate "progressInterval" ($g.progressInterval | default "10s") -}}
{{- $_ = set $gate "resources" ($g.resources | default dict) -}}
{{- $_ = set $gate "serviceAccountName" ($g.serviceAccountName | default "") -}}
{{- /* gate.mode command: the pods ask the database themselves, with a command of the app's (image, command,
args, env and envFrom default to the migration's); no API access, no RBAC */ -}}
{{- if and (eq $gate.mode "command") (not $g.command) (not $g.args) -}}
{{- fail "premigrate-lib: gate.mode command needs gate.command or gate.args: a command of the app's that exits 0 once the database has this version's migrations, never the migration itself (e.g. args [migrate, status] after the migration's command)" -}}
{{- end -}}
{{- $_ = set $gate "command" ($g.command | default $c.command) -}}
{{- $_ = set $gate "args" ($g.args | default list) -}}
{{- $_ = set $gate "commandImage" $c.image -}}
{{- with $g.commandImage -}}
{{- $_ = set $gate "commandImage" (include "premigrate-lib.imageRef" (dict "image" . "tag" $root.Chart.AppVersion)) -}}
{{- end -}}
{{- $_ = set $gate "commandPullPolicy" (($g.commandImage | default dict).pullPolicy | default $c.pullPolicy) -}}
{{- $_ = set $gate "env" (ternary $c.env $g.env (kindIs "invalid" $g.env)) -}}
{{- $_ = set $gate "envFrom" (ternary $c.envFrom $g.envFrom (kindIs "invalid" $g.envFrom)) -}}
{{- $_ = set $gate "extraServiceAccountNames" ($g.extraServiceAccountNames | default list) -}}
{{- $_ = set $c "gate" $gate -}}
{{- $_ = set $c "identityExtra" ($v.identityExtra | default dict) -}}
{{- include "premigrate-lib.validate" $c -}}
{{- /* derived */ -}}
{{- $_ = set $c "identity" (include "premigrate-lib.computeIdentity" $c) -}}
{{- $_ = set $c "jobHash" (include "premigrate-lib.computeJobHash" $c) -}}
{{- $_ = set $c "recordsState" (include "premigrate-lib.recordsState" $c) -}}
{{- /* hook mode: a pre-upgrade hook, or, on an install or an upgrade that finds no records ConfigMap, a plain
Job that the gate holds the pods for (the embedded database does not exist before the release), unless
preInstallHook: then always the hook, pre-install and pre-upgrade (docs/design.md, "The migration Job") */ -}}
{{- $kind := "hook" -}}
{{- if eq $c.mode "job" -}}
{{- $kind = "plain" -}}
{{- else if eq $c.mode "argocd" -}}
{{- $kind = "argocd" -}}
{{- else if and (or $root.Release.IsInstall (eq $c.recordsState "missing")) (not $c.preInstallHook) -}}
{{- $kind = "plain" -}}
{{- end -}}
{{- $_ = set $c "jobKind" $kind -}}
{{- $_ = set $c "recordsUID" "" -}}
{{- if eq $kind "hook" -}}
{{- $_ = set $c "recordsUID" (dig "metadata" "uid" "" (lookup "v1" "ConfigMap" $root.Release.Namespace $c.recordsName)) -}}
{{- end -}}
{{- /* `gate run --create-records` creates the release's ConfigMap when it is missing, for Helm to adopt; a hook
that finds none (a pre-install hook, helm template) must not: Helm's install creates the release's objects
after its hooks and fails on one that already exists. The store keeps the records either way. */ -}}
{{- $_ = set $c "createRecords" (not (and (eq $kind "hook") (eq $c.recordsState "missing"))) -}}
{{- $_ = set $c "jobName" (ternary (printf "%s-%s" $c.migrateName $c.jobHash) $c.migrateName (eq $kind "plain")) -}}
{{- /* the migration's Role and RoleBinding beside a plain Job carry its name: they live as long as that Job
(Helm and Argo CD delete them together; `kubectl apply` keeps both), so a Job still running, or retried, after
a later deploy can still read itself; beside a hook, the hook's name */ -}}
{{- $_ = set $c "migrateRoleName" (ternary $c.jobName $c.migrateName (eq $kind "plain")) -}}
{{- $_ = set $c "gateEnabled" (and $c.enabled (eq $gate.mode "watch")) -}}
{{- $_ = set $c "commandGate" (and $c.enabled (eq $gate.mode "command")) -}}
{{- /* the pods wait in the scheduler's queue, released by <fullname>-gate (_ungate.tpl) */ -}}
{{- $_ = set $c "heldByScheduler" (and $c.gateEnabled (eq $gate.waitIn "schedulingGate")) -}}
{{- end }}

{{/*
The migration identity: the first 10 hex characters of the sha256 of the migration's inputs, what decides
which migration runs: the migration's image, command, args, env and envFrom, its check when set, and
identityExtra. Nothing else about the Job (resources, retries, deadline, TTL, fail-fast codes, kept records,
the gate's image and delivery, the pod's scheduling, security contexts, volumes and sidecars) nor the chart's or
the library's version is part of it: a change of those migrates nothing again and holds no pod. It is the Job's
premigrate.io/identity label, the app pods' premigrate.io/identity annotation and the gate's --identity.
*/}}
{{- define "premigrate-lib.computeIdentity" -}}
{{- $migration := dict "image" .image "command" .command "args" .args "env" .env "envFrom" .envFrom -}}
{{- if .check -}}
{{- $_ := set $migration "check" .check -}}
{{- end -}}
{{- toJson (dict "migration" $migration "extra" .identityExtra) | sha256sum | trunc 10 -}}
{{- end }}

{{/*
The Job's spec hash: the first 10 hex characters of the sha256 of everything the migration Job's pod template
is made of, the identity included: the rest of the Job (pull policy, resources, retries, deadline, TTL,
fail-fast codes, kept records, the database it waits for), the pod (the gate image and how it is delivered,
security contexts, pull secrets, annotations, labels, scheduling, priority, volumes, init containers and
sidecars, the ServiceAccount's annotations) and the library's version. A plain Job (job mode, an install's Job)
is named by it: a changed pod template is always a new Job, never a patch of an immutable one.
*/}}
{{- define "premigrate-lib.computeJobHash" -}}
{{- $job := dict "pullPolicy" .pullPolicy "resources" .resources "backoffLimit" .backoffLimit "activeDeadlineSeconds" .activeDeadlineSeconds "ttl" .ttlSecondsAfterFinished "failFast" .failFastExitCodes "keepRecords" .keepRecords "waitForPostgres" .waitForPostgres "runHistory" .runHistory -}}
{{- $pod := dict "gateImage" .gate.image "gatePullPolicy" .gate.pullPolicy "gateResources" .gate.resources "gateDelivery" .gate.delivery "pod" .pod "serviceAccountAnnotations" .serviceAccountAnnotations -}}
{{- toJson (dict "identity" .identity "job" $job "pod" $pod "library" (include "premigrate-lib.gateVersion" .)) | sha256sum | trunc 10 -}}
{{- end }}

{{/*
The records ConfigMap as the cluster has it (`lookup`): "missing", "owned" (it carries this release's Helm
ownership, so Helm adopts or keeps it), "foreign" (it exists without it: the pre-install hook of premigrate
before 0.2.0, or one made by hand), or "unknown" for an upgrade rendered without the cluster (premigrate-lib.offline):
an upgrade rendered so (helm upgrade --dry-run=client, helm diff upgrade, helm template --is-upgrade) shows the
pre-upgrade hook that an upgrade of a release whose records exist runs, not a plain Job.
*/}}
{{- define "premigrate-lib.recordsState" -}}
{{- $cm := lookup "v1" "ConfigMap" .root.Release.Namespace .recordsName -}}
{{- if and (not $cm) .root.Release.IsUpgrade (include "premigrate-lib.offline" .root) -}}
unknown
{{- else if not $cm -}}
missing
{{- else if eq (dig "metadata" "annotations" "meta.helm.sh/release-name" "" $cm) .root.Release.Name -}}
owned
{{- else -}}
foreign
{{- end -}}
{{- end }}

{{/*
"true" when the render cannot read the cluster (helm template, --dry-run=client, helm diff, Argo CD): every
lookup finds nothing, even what every cluster has (the namespace's kube-root-ca.crt, the default namespace).
Argument: the root context.
*/}}
{{- define "premigrate-lib.offline" -}}
{{- if not (or (lookup "v1" "ConfigMap" .Release.Namespace "kube-root-ca.crt") (lookup "v1" "Namespace" "" "default")) -}}
true
{{- end -}}
{{- end }}

{{/*
Checks of the values. Argument: the resolved configuration.
*/}}
{{- define "premigrate-lib.validate" -}}
{{- if not (has .mode (list "hook" "job" "argocd")) -}}
{{- fail (printf "premigrate-lib: mode %q is not one of hook, job, argocd" .mode) -}}
{{- end -}}
{{- if not (kindIs "slice" .check) -}}
{{- fail (printf "premigrate-lib: check must be a list (a command and its arguments, e.g. [migrate, status]), not %s %v" (kindOf .check) .check) -}}
{{- end -}}
{{- range .check -}}
{{- if not (kindIs "string" .) -}}
{{- fail (printf "premigrate-lib: check must be a list of strings (a command and its arguments); %v is a %s" . (kindOf .)) -}}
{{- end -}}
{{- end -}}
{{- if not (has .gate.mode (list "watch" "command" "none")) -}}
{{- fail (printf "premigrate-lib: gate.mode %q is not one of watch, command, none" .gate.mode) -}}
{{- end -}}
{{- if not (has .gate.delivery (list "initContainer" "imageVolume")) -}}
{{- fail (printf "premigrate-lib: gate.delivery %q is not one of initContainer, imageVolume, auto" .gate.delivery) -}}
{{- end -}}
{{- if not (has .gate.waitIn (list "initContainer" "app" "schedulingGate")) -}}
{{- fail (printf "premigrate-lib: gate.waitIn %q is not one of initContainer, app, schedulingGate" .gate.waitIn) -}}
{{- end -}}
{{- if and .enabled (not .command) -}}
{{- fail "premigrate-lib: command must name the migration's executable, e.g. [/app/migrate]: the gate runs it and records its success, so the image's entrypoint cannot be implied" -}}
{{- end -}}
{{- if and .enabled (eq .gate.mode "watch") (ne .gate.waitIn "schedulingGate") (has .gate.serviceAccountName (list "" "default")) -}}
{{- fail "premigrate-lib: gate.serviceAccountName must name the app pods' own ServiceAccount (not empty, not default): the gate reads the migration Job and records with its token, and the chart will not grant the namespace's default ServiceAccount, which every other pod uses, that access" -}}
{{- end -}}
{{- if not (kindIs "slice" .gate.extraServiceAccountNames) -}}
{{- fail (printf "premigrate-lib: gate.extraServiceAccountNames must be a list of the ServiceAccounts of the other workloads the gate holds (a worker, a CronJob), not %s %v" (kindOf .gate.extraServiceAccountNames) .gate.extraServiceAccountNames) -}}
{{- end -}}
{{- range .gate.extraServiceAccountNames -}}
{{- if or (not (kindIs "string" .)) (has . (list "" "default")) -}}
{{- fail (printf "premigrate-lib: gate.extraServiceAccountNames has %v: each must name a workload's own ServiceAccount (not empty, not default, which every other pod of the namespace uses)" .) -}}
{{- end -}}
{{- end -}}
{{- with .database.object -}}
{{- if not (regexMatch "^(pod|persistentvolumeclaim)/[a-z0-9]([-a-z0-9.]*[a-z0-9])?$" .) -}}
{{- fail (printf "premigrate-lib: database.object %q must be pod/NAME or persistentvolumeclaim/NAME: the object in the release's namespace that holds the database's data, whose UID names the database the records are bound to" .) -}}
{{- end -}}
{{- end -}}
{{- if ne (empty .database.urlSecretName) (empty .database.urlSecretKey) -}}
{{- fail (printf "premigrate-lib: database.urlSecretName (%q) and database.urlSecretKey (%q) go together: the key of the database URL in that Secret, whose hash names the database the records are bound to" .database.urlSecretName .database.urlSecretKey) -}}
{{- end -}}
{{- if not (and (or (kindIs "int" .runHistory) (kindIs "int64" .runHistory) (kindIs "float64" .runHistory)) (ge (float64 .runHistory) 0.0) (le (float64 .runHistory) 100.0) (eq (float64 .runHistory) (float64 (int .runHistory)))) -}}
{{- fail (printf "premigrate-lib: runHistory must be a whole number from 0 (no history) to 100, not %s %v: the newest runs kept in ConfigMap %s" (kindOf .runHistory) .runHistory .historyName) -}}
{{- end -}}
{{- if le (int .hookWeight) -10 -}}
{{- fail (printf "premigrate-lib: hookWeight %v must be above -10: the migration's ServiceAccount, Role and RoleBinding hooks have weight -10 and must be created before the Job (a Job created first has no ServiceAccount for its pod, and every upgrade hangs until --timeout)" .hookWeight) -}}
{{- end -}}
{{- range .pod.sidecars -}}
{{- if ne (toString .restartPolicy) "Always" -}}
{{- fail (printf "premigrate-lib: pod.sidecars[%s] needs restartPolicy: Always (a native sidecar): the Job completes when the migrate container exits, and a sidecar without it would keep the pod running" (toString .name)) -}}
{{- end -}}
{{- end -}}
{{- end }}

{{/*
Labels. Argument: dict "c" CONFIG "component" NAME.
*/}}
{{- define "premigrate-lib.selectorLabels" -}}
{{- include "premigrate-lib.matchLabels" (dict "root" .c.root "name" .c.name "component" .component) -}}
{{- end }}

{{- define "premigrate-lib.labels" -}}
{{- include "premigrate-lib.standardLabels" (dict "root" .c.root "name" .c.name "component" .component) -}}
{{- end }}

{{/*
Argo CD sync wave annotation (argocd mode only). Argument: dict "c" CONFIG "wave" "N".
*/}}
{{- define "premigrate-lib.syncWaveOf" -}}
{{- if eq .c.mode "argocd" -}}
argocd.argoproj.io/sync-wave: {{ .wave | quote }}
{{- end -}}
{{- end }}

{{/*
Annotations of the migration's ServiceAccount, Role and RoleBinding. When the Job is a Helm hook they are
hooks too (a hook runs before the release's objects are updated), replaced by the next upgrade's hooks
(`before-hook-creation`) but never deleted once the hooks ran: Helm deletes hooks with `hook-succeeded` or
`hook-failed` when its --timeout expires on the Job (it gives up, the Job runs on), and a migration that
finishes after that could not record itself. They carry Helm's ownership annotations, so a rollback to a
revision where they are release objects adopts them, and the records ConfigMap owns them (hookOwner), so
helm uninstall takes them with it. Else release objects; argocd: wave -1.
*/}}
{{- define "premigrate-lib.supportAnnotations" -}}
{{- if eq .jobKind "hook" -}}
helm.sh/hook: {{ include "premigrate-lib.hookEvents" . }}
helm.sh/hook-weight: "-10"
helm.sh/hook-delete-policy: before-hook-creation
meta.helm.sh/release-name: {{ .root.Release.Name }}
meta.helm.sh/release-namespace: {{ .root.Release.Namespace }}
{{- else -}}
{{- include "premigrate-lib.syncWaveOf" (dict "c" . "wave" "-1") -}}
{{- end -}}
{{- end }}

{{/*
The Helm hook events of the migration Job and the objects beside it: pre-upgrade, and pre-install with
preInstallHook. Argument: the resolved configuration.
*/}}
{{- define "premigrate-lib.hookEvents" -}}
{{- ternary "pre-install,pre-upgrade" "pre-upgrade" .preInstallHook -}}
{{- end }}

{{/*
The owner of the hook objects (the Job, and the migration's ServiceAccount, Role and RoleBinding beside it):
the release's records ConfigMap, as the cluster has it (only an upgrade renders hooks, and it finds the
ConfigMap), so that helm uninstall, which deletes it, garbage-collects the hooks that Helm itself never
deletes, whether or not the Job's pod ever ran. Nothing when the objects are not hooks.
*/}}
{{- define "premigrate-lib.hookOwner" -}}
{{- if and (eq .jobKind "hook") .recordsUID -}}
ownerReferences:
  - apiVersion: v1
    kind: ConfigMap
    name: {{ .recordsName }}
    uid: {{ .recordsUID }}
{{- end -}}
{{- end }}
