{{/*
Helpers of the app's own objects (scheduling, autoscaling, Ingress, HTTPRoute, extra objects).
*/}}

{{/*
topologySpreadConstraints of the app pods (YAML list, empty when there are none). A constraint without a
labelSelector gets the app pods' selector labels, so that it spreads this release's app pods.
*/}}
{{- define "premigrate.topologySpreadConstraints" -}}
{{- $out := list -}}
{{- range .Values.topologySpreadConstraints -}}
{{- $c := deepCopy . -}}
{{- if not (hasKey $c "labelSelector") -}}
{{- $_ := set $c "labelSelector" (dict "matchLabels" (include "premigrate.selectorLabels" (dict "root" $ "component" "app") | fromYaml)) -}}
{{- end -}}
{{- $out = append $out $c -}}
{{- end -}}
{{- with $out -}}
{{- toYaml . -}}
{{- end -}}
{{- end }}

{{/*
The lowest number of app pods: autoscaling.minReplicas when the autoscaler is on, else replicaCount.
*/}}
{{- define "premigrate.minReplicas" -}}
{{- if .Values.autoscaling.enabled -}}
{{- .Values.autoscaling.minReplicas | int -}}
{{- else -}}
{{- .Values.replicaCount | int -}}
{{- end -}}
{{- end }}

{{/*
Checks of the app's values that the schema cannot express. Included by the Deployment.
*/}}
{{- define "premigrate.validateApp" -}}
{{- $auth := .Values.postgresql.auth -}}
{{- if $auth.existingSecret -}}
{{- if not .Values.postgresql.enabled -}}
{{- fail "postgresql.auth.existingSecret is for the embedded database (postgresql.enabled=true); an external database takes its URL from database.existingSecret" -}}
{{- end -}}
{{- if $auth.password -}}
{{- fail "postgresql.auth.password and postgresql.auth.existingSecret are exclusive: the password is either given to the chart or read from the existing Secret" -}}
{{- end -}}
{{- end -}}
{{- range $probe := list "readinessProbe" "livenessProbe" "startupProbe" -}}
{{- $handlers := list -}}
{{- range $h := list "httpGet" "tcpSocket" "exec" "grpc" -}}
{{- if dig $h nil (get $.Values $probe | default dict) -}}
{{- $handlers = append $handlers $h -}}
{{- end -}}
{{- end -}}
{{- if gt (len $handlers) 1 -}}
{{- fail (printf "%s has %d handlers (%s), a probe takes one: values merge with the chart's defaults, so set the default's to null beside yours (e.g. %s: {httpGet: null, tcpSocket: {port: http}})" $probe (len $handlers) (join ", " $handlers) $probe) -}}
{{- end -}}
{{- end -}}
{{- $a := .Values.autoscaling -}}
{{- if $a.enabled -}}
{{- if gt (int $a.minReplicas) (int $a.maxReplicas) -}}
{{- fail (printf "autoscaling.minReplicas (%v) must not exceed autoscaling.maxReplicas (%v)" $a.minReplicas $a.maxReplicas) -}}
{{- end -}}
{{- if and (kindIs "invalid" $a.targetCPUUtilizationPercentage) (kindIs "invalid" $a.targetMemoryUtilizationPercentage) -}}
{{- fail "autoscaling.targetCPUUtilizationPercentage or autoscaling.targetMemoryUtilizationPercentage is required when autoscaling.enabled is true: the autoscaler needs a metric" -}}
{{- end -}}
{{- end -}}
{{- if and .Values.httpRoute.enabled (not .Values.httpRoute.parentRefs) -}}
{{- fail "httpRoute.parentRefs is required when httpRoute.enabled is true: name the Gateway the route attaches to" -}}
{{- end -}}
{{- range .Values.extraVolumes -}}
{{- if hasPrefix "premigrate-" (toString .name) -}}
{{- fail (printf "extraVolumes: the volume name %q is reserved (names starting with premigrate- belong to the chart)" .name) -}}
{{- end -}}
{{- end -}}
{{- end }}

{{/*
"true" when the helm test Pod is rendered: tests.enabled, or when null every mode but job (helm template |
kubectl apply would apply the test Pod as a plain Pod).
*/}}
{{- define "premigrate.testsEnabled" -}}
{{- if kindIs "invalid" .Values.tests.enabled -}}
{{- if ne .Values.migration.mode "job" }}true{{ end -}}
{{- else if .Values.tests.enabled -}}
true
{{- end -}}
{{- end }}

{{/*
The path the helm test Pod GETs: tests.path, else the readiness probe's httpGet path, else /.
*/}}
{{- define "premigrate.testPath" -}}
{{- .Values.tests.path | default (dig "httpGet" "path" "" (.Values.readinessProbe | default dict)) | default "/" -}}
{{- end }}

{{/*
"true" when the app is premigrate's demo (its image), whose migrations know SCHEMA_ACCEPT_DATA_LOSS.
*/}}
{{- define "premigrate.isDemo" -}}
{{- if eq .Values.image.repository "premigrate/demo" }}true{{ end -}}
{{- end }}

{{/*
The migration's arguments (a JSON list): migration.args, else, when null, the demo's `migrate` beside the
demo's command only: another app's command gets no argument it did not ask for.
*/}}
{{- define "premigrate.migrationArgs" -}}
{{- $m := .Values.migration -}}
{{- if not (kindIs "invalid" $m.args) -}}
{{- toJson $m.args -}}
{{- else if eq (toJson ($m.command | default .Values.command)) (toJson (list "/demo")) -}}
{{- toJson (list "migrate") -}}
{{- else -}}
[]
{{- end -}}
{{- end }}
