{{/*
The migration Job (empty when the migration is disabled). Argument: dict "root" $ "values" SUBTREE
[ "fullname" NAME ] [ "name" NAME ].
*/}}
{{- define "premigrate-lib.migrationJob" -}}
{{- $c := dict -}}{{- include "premigrate-lib.config" (dict "in" . "out" $c) -}}
{{- if $c.enabled -}}
{{- /* the gate's refusal (exit 3) fails the Job at once whatever the adopter's codes: no retry changes it */ -}}
{{- $failFast := include "premigrate-lib.sortedCodes" (concat (list 3) $c.failFastExitCodes) | fromJsonArray -}}
{{- $p := $c.pod -}}
apiVersion: batch/v1
kind: Job
metadata:
  name: {{ $c.jobName }}
  labels:
    {{- include "premigrate-lib.labels" (dict "c" $c "component" "migration") | nindent 4 }}
    premigrate.io/identity: {{ $c.identity | quote }}
  {{- with include "premigrate-lib.hookOwner" $c }}
  {{- . | nindent 2 }}
  {{- end }}
  {{- with include "premigrate-lib.jobAnnotations" $c }}
  annotations:
    {{- . | nindent 4 }}
  {{- end }}
spec:
  parallelism: 1
  completions: 1
  backoffLimit: {{ $c.backoffLimit }}
  activeDeadlineSeconds: {{ $c.activeDeadlineSeconds }}
  {{- /* The TTL applies to the Jobs that would pile up: the hook Jobs, and every Job of job mode. Hook mode's
  plain Job (an install) is removed by the next upgrade anyway, and Helm 3's --wait --wait-for-jobs fails with
  "jobs.batch not found" on a release Job that a short TTL deleted while it still waited. */}}
  {{- if and (not (kindIs "invalid" $c.ttlSecondsAfterFinished)) (or (ne $c.mode "hook") (eq $c.jobKind "hook")) }}
  ttlSecondsAfterFinished: {{ $c.ttlSecondsAfterFinished }}
  {{- end }}
  podFailurePolicy:
    rules:
      - action: FailJob
        onExitCodes:
          containerName: migrate
          operator: In
          values: {{ toJson $failFast }}
      {{- /* status is written out although it defaults to "True": the rules list is atomic, and a field
      the API server fills in would make every kubectl apply of an unchanged rendering a change */}}
      - action: Ignore
        onPodConditions:
          - type: DisruptionTarget
            status: "True"
  template:
    metadata:
      {{- /* Only stable labels: the pod template of a Job is immutable, and in job mode the same Job
      name (same identity) is re-applied by every upgrade. No app.kubernetes.io/name: with it and the
      instance the pod would match the app's own selectors (helm create's Deployment, Service, HPA and PDB
      select on name and instance alone), and take the app's traffic or break its HPA while it runs. The app's
      name is part-of instead. */}}
      labels:
        {{- with $p.labels }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
        app.kubernetes.io/part-of: {{ $c.name }}
        app.kubernetes.io/instance: {{ $c.root.Release.Name }}
        app.kubernetes.io/component: migration
        premigrate.io/identity: {{ $c.identity | quote }}
      {{- with $p.annotations }}
      annotations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
    spec:
      restartPolicy: Never
      serviceAccountName: {{ $c.migrateName }}
      automountServiceAccountToken: true
      {{- with $p.priorityClassName }}
      priorityClassName: {{ . }}
      {{- end }}
      {{- with $p.imagePullSecrets }}
      imagePullSecrets:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $p.securityContext }}
      securityContext:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- /* The migration runs as the main container, so its log is the container log Helm prints when the
      hook fails (hook-output-log-policy). The gate wraps the user's command: it records the identity only
      when the command exits 0, and exits with the command's code. The gate binary reaches the container
      as an image volume of the gate image, or (gate.delivery initContainer) copied by an init container
      through an emptyDir. The values' init containers run next, then the native sidecars (restartPolicy
      Always, e.g. a database proxy), which run beside the migration and stop when it exits. */}}
      {{- if or (eq $c.gate.delivery "initContainer") $p.initContainers $p.sidecars }}
      initContainers:
        {{- if eq $c.gate.delivery "initContainer" }}
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
            - name: premigrate
              mountPath: /premigrate
          {{- with $c.gate.resources }}
          resources:
            {{- toYaml . | nindent 12 }}
          {{- end }}
          {{- with $p.containerSecurityContext }}
          securityContext:
            {{- toYaml . | nindent 12 }}
          {{- end }}
        {{- end }}
        {{- /* the values' containers get the pod's container security context unless they bring their own
        (a null one is none of their own) */}}
        {{- range $ctr := concat $p.initContainers $p.sidecars }}
        {{- if and $p.containerSecurityContext (kindIs "invalid" $ctr.securityContext) }}
        {{- $ctr = merge (dict "securityContext" $p.containerSecurityContext) $ctr }}
        {{- end }}
        {{- list $ctr | toYaml | nindent 8 }}
        {{- end }}
      {{- end }}
      containers:
        - name: migrate
          image: {{ $c.image }}
          imagePullPolicy: {{ $c.pullPolicy }}
          command:
            - /premigrate/gate
            - run
            - --identity
            - {{ $c.identity | quote }}
            - --records
            - {{ $c.recordsName }}
            - --store
            - {{ $c.storeName }}
            - --job
            - $(JOB_NAME)
            - --keep
            - {{ $c.keepRecords | toString | quote }}
            {{- with $c.failFastExitCodes }}
            - --fail-fast-exit-codes
            - {{ include "premigrate-lib.sortedCodes" . | fromJsonArray | join "," | quote }}
            {{- end }}
            {{- if gt (int $c.runHistory) 0 }}
            - --history
            - {{ $c.historyName }}
            - --history-keep
            - {{ $c.runHistory | toString | quote }}
            {{- end }}
            {{- if $c.createRecords }}
            - --create-records
            - {{ include "premigrate-lib.recordsMetadata" $c | quote }}
            {{- end }}
            {{- /* a plain Job starts with the release, the database perhaps not yet up: it waits for
            PostgreSQL. The pre-upgrade hook does not: the database is running, and when it is down the
            migration must fail the upgrade at once, not hang until Helm's timeout. */}}
            {{- if and $c.waitForPostgres (ne $c.jobKind "hook") }}
            - --wait-for-postgres
            - {{ $c.waitForPostgres | quote }}
            {{- end }}
            {{- range include "premigrate-lib.databaseArgs" $c | fromJsonArray }}
            - {{ . | quote }}
            {{- end }}
            {{- range include "premigrate-lib.guardArgs" . | fromJsonArray }}
            - {{ . | quote }}
            {{- end }}
            {{- with $c.check }}
            - --check
            - {{ toJson . | quote }}
            {{- end }}
            - --
            {{- toYaml $c.command | nindent 12 }}
          {{- with $c.args }}
          args:
            {{- toYaml . | nindent 12 }}
          {{- end }}
          env:
            {{- with $c.env }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
            - name: PREMIGRATE_IDENTITY
              value: {{ $c.identity | quote }}
            {{- with include "premigrate-lib.databaseEnv" $c }}
            {{- . | nindent 12 }}
            {{- end }}
            - name: JOB_NAME
              valueFrom:
                fieldRef:
                  fieldPath: metadata.labels['batch.kubernetes.io/job-name']
            - name: POD_NAMESPACE
              valueFrom:
                fieldRef:
                  fieldPath: metadata.namespace
          {{- with $c.envFrom }}
          envFrom:
            {{- toYaml . | nindent 12 }}
          {{- end }}
          volumeMounts:
            - name: premigrate
              mountPath: /premigrate
              readOnly: true
            {{- with $p.extraVolumeMounts }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
          {{- with $c.resources }}
          resources:
            {{- toYaml . | nindent 12 }}
          {{- end }}
          {{- with $p.containerSecurityContext }}
          securityContext:
            {{- toYaml . | nindent 12 }}
          {{- end }}
      volumes:
        - name: premigrate
          {{- if eq $c.gate.delivery "imageVolume" }}
          image:
            reference: {{ $c.gate.image }}
            pullPolicy: {{ $c.gate.pullPolicy }}
          {{- else }}
          emptyDir:
            sizeLimit: 64Mi
          {{- end }}
        {{- with $p.extraVolumes }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      {{- with $p.nodeSelector }}
      nodeSelector:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $p.affinity }}
      affinity:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $p.tolerations }}
      tolerations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $p.topologySpreadConstraints }}
      topologySpreadConstraints:
        {{- toYaml . | nindent 8 }}
      {{- end }}
{{- end }}
{{- end }}

{{/*
Annotations of the migration Job. Argument: the resolved configuration.
*/}}
{{- define "premigrate-lib.jobAnnotations" -}}
{{- if eq .jobKind "hook" -}}
helm.sh/hook: {{ include "premigrate-lib.hookEvents" . }}
helm.sh/hook-weight: {{ .hookWeight | toString | quote }}
helm.sh/hook-delete-policy: {{ .hookDeletePolicy }}
{{- if .hookOutputLogs }}
helm.sh/hook-output-log-policy: hook-failed
{{- end }}
{{- else if eq .jobKind "argocd" -}}
{{- $policies := list -}}
{{- range splitList "," .hookDeletePolicy -}}
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
Exit codes sorted ascending without duplicates (the API requires an ordered set). Argument: the list. JSON.
*/}}
{{- define "premigrate-lib.sortedCodes" -}}
{{- $padded := list -}}
{{- range . -}}
{{- $padded = append $padded (printf "%03d" (int .)) -}}
{{- end -}}
{{- $codes := list -}}
{{- range (sortAlpha $padded | uniq) -}}
{{- $codes = append $codes (atoi .) -}}
{{- end -}}
{{- toJson $codes -}}
{{- end }}

{{/*
Metadata of the records ConfigMap, as `gate run --create-records` creates it when it is missing: the labels
the chart renders and Helm's ownership annotations, so Helm adopts it as the release object it renders. JSON.
*/}}
{{- define "premigrate-lib.recordsMetadata" -}}
{{- $labels := include "premigrate-lib.labels" (dict "c" . "component" "migration") | fromYaml -}}
{{- $annotations := dict "meta.helm.sh/release-name" .root.Release.Name "meta.helm.sh/release-namespace" .root.Release.Namespace -}}
{{- toJson (dict "labels" $labels "annotations" $annotations) -}}
{{- end }}
