{{/*
The library's argument for the contract step's objects (contract-*.yaml): premigrate.lib's, with the values'
migration.contract. Argument: dict "root" $ "out" DICT.
*/}}
{{- define "premigrate.libContract" -}}
{{- include "premigrate.lib" . -}}
{{- $_ := set .out.values "contract" (.root.Values.migration.contract | default dict) -}}
{{- end }}

{{/*
The library's argument for the check of migration.requirePreviousContract (require-contract-job.yaml):
premigrate.lib's, with that value. Argument: dict "root" $ "out" DICT.
*/}}
{{- define "premigrate.libRequireContract" -}}
{{- $m := .root.Values.migration -}}
{{- if and $m.requirePreviousContract (ne ($m.mode | default "hook") "hook") -}}
{{- fail (printf "migration.requirePreviousContract needs migration.mode hook, not %s: its check is a pre-upgrade hook that runs before the migration's; in job mode the migration Job starts with the apply, and argocd mode has no such check yet. Deploy the previous version until its contract ran (its contract Job complete), then this one, with migration.requirePreviousContract false" $m.mode) -}}
{{- end -}}
{{- include "premigrate.lib" . -}}
{{- $_ := set .out.values "requirePreviousContract" .root.Values.migration.requirePreviousContract -}}
{{- end }}
