{{/*
The embedded database's password, made in the cluster ("true" or empty). When postgresql.auth.password and
postgresql.auth.existingSecret are empty, helm install and helm upgrade generate the password at render time and
read it back with lookup on every later render. A render that cannot read the cluster (helm template, Argo CD,
--dry-run=client: every lookup finds nothing) cannot: each render would make another password while the database
keeps the first. Such a render of an install carries the Secret without data and a Job that fills it once, in
the cluster (`gate secret`): the same render every time, a password that exists only in the cluster and is never
replaced. A render that reads the cluster and finds that Secret still without data renders it the same way; one
that finds a password reads it back, however it was made. A render of an upgrade without a cluster (helm upgrade
--dry-run=client, helm diff upgrade) is refused: it cannot show the Secret the upgrade keeps. A cluster is told by
objects that always exist: the namespace's kube-root-ca.crt, or, on a first install with --create-namespace
(Helm renders before it creates the namespace), the namespace default.
*/}}
{{- define "premigrate.passwordInCluster" -}}
{{- $pg := .Values.postgresql -}}
{{- if and $pg.enabled (not $pg.auth.password) (not $pg.auth.existingSecret) -}}
{{- $existing := lookup "v1" "Secret" .Release.Namespace (include "premigrate.postgresqlName" .) -}}
{{- if $existing -}}
{{- if and (not (dig "data" "password" "" $existing)) (eq (dig "metadata" "annotations" "premigrate.io/password" "" $existing) "generated-in-cluster") -}}
true
{{- end -}}
{{- else if not (or (lookup "v1" "ConfigMap" .Release.Namespace "kube-root-ca.crt") (lookup "v1" "Namespace" "" "default")) -}}
{{- if .Release.IsUpgrade -}}
{{- fail "postgresql.auth.password is required when the chart is rendered without a cluster for an upgrade (helm upgrade --dry-run=client, helm diff upgrade) with the embedded database: such a render cannot read back the password the release keeps, so it cannot show the Secret the upgrade applies. Render against the cluster (helm upgrade --dry-run=server), or set postgresql.auth.password (or postgresql.auth.existingSecret). An install rendered without a cluster (helm template, Argo CD) needs none: its Secret is filled in the cluster" -}}
{{- end -}}
true
{{- end -}}
{{- end -}}
{{- end }}

{{/*
The name of the Job that fills the Secret, its ServiceAccount, Role and RoleBinding: <fullname>-password.
*/}}
{{- define "premigrate.passwordName" -}}
{{- include "premigrate.fullname" . }}-password
{{- end }}

{{/*
The database URL the Job writes, with {password} where the password goes (gate secret --url).
*/}}
{{- define "premigrate.passwordURL" -}}
{{- $auth := .Values.postgresql.auth -}}
{{- printf "postgres://%s:{password}@%s:5432/%s?sslmode=disable" (urlquery $auth.username | replace "+" "%20") (include "premigrate.postgresqlName" .) $auth.database -}}
{{- end }}
