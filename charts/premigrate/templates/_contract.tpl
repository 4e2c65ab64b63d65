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
{{- include "premigrate.lib" . -}}
{{- $_ := set .out.values "requirePreviousContract" .root.Values.migration.requirePreviousContract -}}
{{- end }}
