{{/*
The library's argument for <fullname>-gate (gate.waitIn schedulingGate): premigrate.lib's, with the null fields
of gate.deployment set to where the app's pods run (their node selector, tolerations, affinity and priority
class), not the migration pod's values: no new app pod starts while none of <fullname>-gate runs. Argument: dict
"root" $ "out" dict.
*/}}
{{- define "premigrate.libUngate" -}}
{{- include "premigrate.lib" . -}}
{{- $V := .root.Values -}}
{{- $gd := $V.gate.deployment | default dict -}}
{{- $d := dict "replicas" $gd.replicas "topologySpreadConstraints" $gd.topologySpreadConstraints -}}
{{- range $k, $app := dict "nodeSelector" $V.nodeSelector "tolerations" $V.tolerations "affinity" $V.affinity "priorityClassName" $V.priorityClassName -}}
{{- $_ := set $d $k (ternary $app (index $gd $k) (kindIs "invalid" (index $gd $k))) -}}
{{- end -}}
{{- $_ := set .out.values.gate "deployment" $d -}}
{{- end }}
