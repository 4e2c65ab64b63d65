{{/*
What the app's pod template takes from the library. Each takes the same argument as
premigrate-lib.migrationJob and renders nothing when the migration (or the gate) is off, so a chart can
include them unconditionally:

  metadata.annotations   premigrate-lib.podAnnotations     the identity the pod waits for (and, with gate.waitIn
                                                           schedulingGate, its Job's name)
  metadata.labels        premigrate-lib.podLabels          gate.waitIn schedulingGate only (_ungate.tpl)
  spec.schedulingGates   premigrate-lib.schedulingGates    gate.waitIn schedulingGate only (_ungate.tpl)
  initContainers         premigrate-lib.gateInitContainer  wait-for-migration, first of the list (with
                                                           gate.waitIn app: install-gate, or nothing)
  containers[].env       premigrate-lib.identityEnv        PREMIGRATE_IDENTITY, for the app's own checks
  volumes                premigrate-lib.gateVolume         the gate's projected API token (and its binary)
  Deployment annotations premigrate-lib.deploymentAnnotations   argocd: sync wave 1 (after the Job); with
                                                           guard.enabled the guard's (premigrate-lib.guardAnnotations)

With gate.waitIn app the app container itself waits: its command and volume mounts also come from here:

  containers[].command      premigrate-lib.gateCommand       gate wait ... -- the app's command
  containers[].volumeMounts premigrate-lib.gateVolumeMounts  the gate's binary and API token
*/}}

{{- define "premigrate-lib.identity" -}}
{{- $c := dict -}}{{- include "premigrate-lib.config" (dict "in" . "out" $c) -}}
{{- $c.identity -}}
{{- end }}

{{- define "premigrate-lib.podAnnotations" -}}
{{- $c := dict -}}{{- include "premigrate-lib.config" (dict "in" . "out" $c) -}}
{{- if $c.enabled -}}
premigrate.io/identity: {{ $c.identity | quote }}
{{- end -}}
{{- if $c.heldByScheduler }}
premigrate.io/migration-job: {{ $c.jobName | quote }}
{{- end -}}
{{- end }}

{{- define "premigrate-lib.deploymentAnnotations" -}}
{{- $c := dict -}}{{- include "premigrate-lib.config" (dict "in" . "out" $c) -}}
{{- $a := list (include "premigrate-lib.syncWaveOf" (dict "c" $c "wave" "1")) (include "premigrate-lib.guardAnnotations" .) -}}
{{- $a | compact | join "\n" -}}
{{- end }}

{{- define "premigrate-lib.identityEnv" -}}
{{- $c := dict -}}{{- include "premigrate-lib.config" (dict "in" . "out" $c) -}}
{{- if $c.enabled -}}
- name: PREMIGRATE_IDENTITY
  valueFrom:
    fieldRef:
      fieldPath: metadata.annotations['premigrate.io/identity']
{{- if and $c.gateEnabled (eq $c.gate.waitIn "app") }}
{{- with include "premigrate-lib.databaseEnv" $c }}
{{ . }}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end }}

{{/*
The gate's flags that name the database the records are bound to (gate wait, gate run). Argument: the config.
A list of strings.
*/}}
{{- define "premigrate-lib.databaseArgs" -}}
{{- $args := list -}}
{{- with .database.object -}}
{{- $args = concat $args (list "--database-object" .) -}}
{{- end -}}
{{- if .database.urlSecretName -}}
{{- $args = concat $args (list "--database-url-env" "PREMIGRATE_DATABASE_URL") -}}
{{- end -}}
{{- toJson $args -}}
{{- end }}

{{/*
The environment variable the gate hashes to name an external database (database.urlSecretName): list items,
nothing when the records are not bound to a URL. Argument: the config.
*/}}
{{- define "premigrate-lib.databaseEnv" -}}
{{- if .database.urlSecretName -}}
- name: PREMIGRATE_DATABASE_URL
  valueFrom:
    secretKeyRef:
      name: {{ .database.urlSecretName }}
      key: {{ .database.urlSecretKey }}
{{- end -}}
{{- end }}

{{/*
The init container that holds the pod until the migration of its identity has succeeded: it watches the
Job rendered for this release (by exact name) and the records ConfigMap, with the API token of the volume
premigrate-lib.gateVolume (the app's containers get none). A list item.
*/}}
{{- define "premigrate-lib.gateInitContainer" -}}
{{- $c := dict -}}{{- include "premigrate-lib.config" (dict "in" . "out" $c) -}}
{{- if and $c.gateEnabled (eq $c.gate.waitIn "app") -}}
{{- if eq $c.gate.delivery "initContainer" -}}
- name: install-gate
  image: {{ $c.gate.image }}
  imagePullPolicy: {{ $c.gate.pullPolicy }}
  command:
    - /gate
  args:
    - copy
    - --to
    - /premigrate/gate
  volumeMounts:
    - name: premigrate-gate
      mountPath: /premigrate
  {{- with $c.gate.resources }}
  resources:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $c.pod.containerSecurityContext }}
  securityContext:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end -}}
{{- else if and $c.gateEnabled (not $c.heldByScheduler) -}}
- name: wait-for-migration
  image: {{ $c.gate.image }}
  imagePullPolicy: {{ $c.gate.pullPolicy }}
  command:
    - /gate
  args:
    - wait
    - --identity
    - {{ $c.identity | quote }}
    - --records
    - {{ $c.recordsName }}
    - --store
    - {{ $c.storeName }}
    - --job
    - {{ $c.jobName | quote }}
    - --timeout
    - {{ $c.gate.timeout | quote }}
    - --progress-interval
    - {{ $c.gate.progressInterval | quote }}
    {{- range include "premigrate-lib.databaseArgs" $c | fromJsonArray }}
    - {{ . | quote }}
    {{- end }}
  env:
    - name: POD_NAMESPACE
      valueFrom:
        fieldRef:
          fieldPath: metadata.namespace
    {{- with include "premigrate-lib.databaseEnv" $c }}
    {{- . | nindent 4 }}
    {{- end }}
  volumeMounts:
    - name: premigrate-gate-token
      mountPath: /var/run/secrets/kubernetes.io/serviceaccount
      readOnly: true
  {{- with $c.gate.resources }}
  resources:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $c.pod.containerSecurityContext }}
  securityContext:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- else if $c.commandGate -}}
{{- /* gate.mode command: the app's own check, in the pod, with no API access; the pod's status names why it
waits (the end of the failed check's log) */ -}}
- name: wait-for-migration
  image: {{ $c.gate.commandImage }}
  imagePullPolicy: {{ $c.gate.commandPullPolicy }}
  {{- with $c.gate.command }}
  command:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $c.gate.args }}
  args:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  terminationMessagePolicy: FallbackToLogsOnError
  {{- with $c.gate.env }}
  env:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $c.gate.envFrom }}
  envFrom:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $c.gate.resources }}
  resources:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $c.pod.containerSecurityContext }}
  securityContext:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end -}}
{{- end }}

{{/*
The gate's API token, CA and namespace as a projected volume; with gate.waitIn app also the gate's binary
(the gate image as an image volume, or an emptyDir install-gate copies it to). List items.
*/}}
{{- define "premigrate-lib.gateVolume" -}}
{{- $c := dict -}}{{- include "premigrate-lib.config" (dict "in" . "out" $c) -}}
{{- if and $c.gateEnabled (not $c.heldByScheduler) -}}
{{- if eq $c.gate.waitIn "app" -}}
- name: premigrate-gate
  {{- if eq $c.gate.delivery "imageVolume" }}
  image:
    reference: {{ $c.gate.image }}
    pullPolicy: {{ $c.gate.pullPolicy }}
  {{- else }}
  emptyDir:
    sizeLimit: 64Mi
  {{- end }}
{{ end -}}
- name: premigrate-gate-token
  projected:
    defaultMode: 0444
    sources:
      - serviceAccountToken:
          path: token
          expirationSeconds: 3607
      - configMap:
          name: kube-root-ca.crt
          items:
            - key: ca.crt
              path: ca.crt
      - downwardAPI:
          items:
            - path: namespace
              fieldRef:
                apiVersion: v1
                fieldPath: metadata.namespace
{{- end -}}
{{- end }}

{{/*
With gate.waitIn app, the mounts of the app container that waits: the gate's binary at /premigrate and
its API token at /var/run/secrets/premigrate.io/gate (not the service account's usual path, so the app's
own Kubernetes clients do not pick it up). List items; nothing otherwise.
*/}}
{{- define "premigrate-lib.gateVolumeMounts" -}}
{{- $c := dict -}}{{- include "premigrate-lib.config" (dict "in" . "out" $c) -}}
{{- if and $c.gateEnabled (eq $c.gate.waitIn "app") -}}
- name: premigrate-gate
  mountPath: /premigrate
  readOnly: true
- name: premigrate-gate-token
  mountPath: /var/run/secrets/premigrate.io/gate
  readOnly: true
{{- end -}}
{{- end }}

{{/*
The command of the app container. With gate.waitIn app: the gate waits for the migration of the pod's
identity, then replaces itself with the app's command (execve: the app keeps PID 1 of the container and
gets the kubelet's signals); the container's args follow the app's command as usual. Otherwise the app's
command as given. Argument: the usual dict plus "command" (a list: the app's command; it must be set with
gate.waitIn app, because the chart cannot read an image's entrypoint). A YAML list, empty for none.
*/}}
{{- define "premigrate-lib.gateCommand" -}}
{{- $c := dict -}}{{- include "premigrate-lib.config" (dict "in" . "out" $c) -}}
{{- if and $c.gateEnabled (eq $c.gate.waitIn "app") -}}
{{- if not .command -}}
{{- fail "premigrate-lib: gate.waitIn app needs the app container's command (e.g. [/app/server]): the gate runs it once the migration succeeded, and the chart cannot read the image's entrypoint" -}}
{{- end -}}
{{- $gate := concat (list "/premigrate/gate" "wait" "--identity" $c.identity "--records" $c.recordsName "--store" $c.storeName "--job" $c.jobName "--timeout" $c.gate.timeout "--progress-interval" $c.gate.progressInterval "--token-dir" "/var/run/secrets/premigrate.io/gate") (include "premigrate-lib.databaseArgs" $c | fromJsonArray) (list "--") -}}
{{- toYaml (concat $gate .command) -}}
{{- else if .command -}}
{{- toYaml .command -}}
{{- end -}}
{{- end }}

{{/*
The least progressDeadlineSeconds of a Deployment whose pods wait for the migration: the migration's
deadline plus two minutes, never below Kubernetes' default of 600, so a long migration does not mark the
rollout failed before the migration itself would fail.
*/}}
{{- define "premigrate-lib.progressDeadlineSeconds" -}}
{{- $c := dict -}}{{- include "premigrate-lib.config" (dict "in" . "out" $c) -}}
{{- if or $c.gateEnabled $c.commandGate -}}
{{- max 600 (add (int $c.activeDeadlineSeconds) 120) -}}
{{- else -}}
600
{{- end -}}
{{- end }}

{{/*
One value of the resolved configuration, as a string: "identity", "jobName", "jobKind" (hook, plain or
argocd), "recordsName", "migrateName", "gateName", "fullname". Argument: the usual dict plus "key".
*/}}
{{- define "premigrate-lib.value" -}}
{{- $c := dict -}}{{- include "premigrate-lib.config" (dict "in" . "out" $c) -}}
{{- index $c .key | toString -}}
{{- end }}
