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
{{- fail (printf "%s has %d handlers (%s), a probe takes one: keep one, set the others to null (e.g. %s: {httpGet: null, tcpSocket: {port: http}})" $probe (len $handlers) (join ", " $handlers) $probe) -}}
{{- end -}}
{{- if and (get $.Values $probe) (eq (len $handlers) 0) -}}
{{- fail (printf "%s has no handler (httpGet, tcpSocket, exec or grpc): a probe you set is taken whole, not merged with the chart's default, so give its check too (e.g. %s: {httpGet: {path: /readyz, port: http}, periodSeconds: 5}), or {} for no probe" $probe $probe) -}}
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
{{- $get := get (include "premigrate.readinessProbe" . | fromYaml) "httpGet" | default dict -}}
{{- .Values.tests.path | default $get.path | default "/" -}}
{{- end }}

{{/*
The app container's readiness probe (YAML, empty for none): readinessProbe, taken whole ({} for none); when
null, the demo's GET /readyz for the demo's image, else a TCP connect to port http (any server passes it, no
path is guessed), both every second and unready after 3 failures of 2 s.
*/}}
{{- define "premigrate.readinessProbe" -}}
{{- $p := .Values.readinessProbe -}}
{{- if kindIs "invalid" $p -}}
{{- $check := dict "tcpSocket" (dict "port" "http") -}}
{{- if include "premigrate.isDemo" . -}}
{{- $check = dict "httpGet" (dict "path" "/readyz" "port" "http") -}}
{{- end -}}
{{- $p = merge $check (dict "periodSeconds" 1 "timeoutSeconds" 2 "successThreshold" 1 "failureThreshold" 3) -}}
{{- end -}}
{{- include "premigrate.probeYaml" $p -}}
{{- end }}

{{/*
The app container's liveness probe (YAML, empty for none): livenessProbe, taken whole ({} for none); when
null, the demo's GET /healthz every 10 s for the demo's image, else none: only the app's authors know what
proves it alive, and a wrong guess restarts healthy pods.
*/}}
{{- define "premigrate.livenessProbe" -}}
{{- $p := .Values.livenessProbe -}}
{{- if and (kindIs "invalid" $p) (include "premigrate.isDemo" .) -}}
{{- $p = dict "httpGet" (dict "path" "/healthz" "port" "http") "periodSeconds" 10 "timeoutSeconds" 2 "failureThreshold" 3 -}}
{{- end -}}
{{- include "premigrate.probeYaml" $p -}}
{{- end }}

{{/*
A probe as YAML without its null fields (a handler set to null beside another), empty for none.
*/}}
{{- define "premigrate.probeYaml" -}}
{{- $out := dict -}}
{{- range $k, $v := . -}}
{{- if not (kindIs "invalid" $v) -}}
{{- $_ := set $out $k $v -}}
{{- end -}}
{{- end -}}
{{- with $out }}{{ toYaml . }}{{ end -}}
{{- end }}

{{/*
"true" when the app is premigrate's demo (its image, from any registry), whose migrations know SCHEMA_ACCEPT_DATA_LOSS.
*/}}
{{- define "premigrate.isDemo" -}}
{{- if eq (include "premigrate.repositoryPath" .Values.image.repository) "premigrate/demo" }}true{{ end -}}
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
