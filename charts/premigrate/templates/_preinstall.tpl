{{/*
"true" when the install's migration is a pre-install hook too (hook mode: Helm then runs it before it creates
any object of the release, and a failed first install fails at once, naming the Job). migration.preInstallHook
when it is set. null: only with an external database whose URL Secret (database.existingSecret) exists before
the release: found in the namespace, or taken for granted by a render that cannot see the cluster (helm
template, --dry-run=client), which previews an install onto an existing Secret. A Secret that the release brings
itself (extraObjects, an ExternalSecret, an operator's cluster) exists only after Helm's pre-install hooks,
which would wait for it until --timeout: the install's migration is then the plain Job, created beside the
release's objects, and the gate holds the pods for it; every upgrade's is the hook.
*/}}
{{- define "premigrate.preInstallHook" -}}
{{- $m := .Values.migration -}}
{{- if not (kindIs "invalid" $m.preInstallHook) -}}
{{- ternary "true" "false" (eq (toString $m.preInstallHook) "true") -}}
{{- else if .Values.postgresql.enabled -}}
false
{{- else if or (include "premigrate-lib.offline" .) (lookup "v1" "Secret" .Release.Namespace .Values.database.existingSecret) -}}
true
{{- else -}}
false
{{- end -}}
{{- end }}
