{{- define "ledger.fullname" -}}
{{- printf "%s-ledger" .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- end }}

{{/*
The app's labels. app.kubernetes.io/component keeps the Service and the Deployment from selecting the
migration pod, which carries the same name and instance (component: migration).
*/}}
{{- define "ledger.labels" -}}
app.kubernetes.io/name: ledger
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: server
{{- end }}

{{- define "ledger.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{- define "ledger.databaseEnv" -}}
- name: LEDGER_DATABASE_URL
  valueFrom:
    secretKeyRef:
      name: {{ .Values.database.secretName }}
      key: {{ .Values.database.secretKey }}
{{- end }}

{{/*
The argument of every premigrate-lib template: the migrations values, with the migration's image, command
and env taken from the app's, the records bound to the database URL the app uses, and (contract: true) the
ledger's contract command.
*/}}
{{- define "ledger.premigrate" -}}
{{- $app := dict
  "image" (dict "repository" .root.Values.image.repository "tag" (.root.Values.image.tag | default .root.Chart.AppVersion) "pullPolicy" .root.Values.image.pullPolicy)
  "command" (list "/ledger" "migrate")
  "args" (list "--to" (toString .root.Values.schemaVersion))
  "env" (concat (include "ledger.databaseEnv" .root | fromYamlArray) (.root.Values.migrations.env | default list))
  "gate" (merge (dict "serviceAccountName" (include "ledger.fullname" .root)) (.root.Values.migrations.gate | default dict))
  "database" (.root.Values.migrations.database | default (dict "urlSecretName" .root.Values.database.secretName "urlSecretKey" .root.Values.database.secretKey)) -}}
{{- if .root.Values.contract -}}
{{- $_ := set $app "contract" (dict "command" (list "/ledger" "contract") "args" (list "--to" (toString .root.Values.schemaVersion))) -}}
{{- end -}}
{{- $_ := set .out "root" .root -}}
{{- $_ = set .out "values" (merge $app (omit .root.Values.migrations "env" "gate")) -}}
{{- $_ = set .out "fullname" (include "ledger.fullname" .root) -}}
{{- end }}
