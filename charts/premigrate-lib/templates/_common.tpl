{{/*
Names, labels and image references, exported for the charts that take the library: an adopter's chart (and
charts/premigrate) includes these instead of copying them, so its objects and the library's are named and
labelled one way. Each takes a dict with "root" ($) and says what else.
*/}}

{{/*
The app.kubernetes.io/name label: "override" (nameOverride) or the chart's name, at most 63 characters.
Argument: dict "root" $ ["override" NAME].
*/}}
{{- define "premigrate-lib.name" -}}
{{- .override | default .root.Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end }}

{{/*
The prefix of every object's name: "override" (fullnameOverride), else <release>-<chart> (the release's name
alone when it contains the chart's), like `helm create`. At most 40 characters: the longest derived name,
<fullname>-migrate-<spec hash>, is also the value of the Job's batch.kubernetes.io/job-name label (at most 63). A
longer name keeps 33 characters and gets a dash and 6 hex characters of its sha256, so two long names that share
a prefix never collide. Argument: dict "root" $ ["chart" NAME (default the chart's name)] ["override" FULLNAME].
*/}}
{{- define "premigrate-lib.fullname" -}}
{{- $root := .root -}}
{{- $full := .override -}}
{{- if not $full -}}
{{- $chart := .chart | default $root.Chart.Name -}}
{{- $full = ternary $root.Release.Name (printf "%s-%s" $root.Release.Name $chart) (contains $chart $root.Release.Name) -}}
{{- end -}}
{{- if gt (len $full) 40 -}}
{{- printf "%s-%s" ($full | trunc 33 | trimSuffix "-") ($full | sha256sum | trunc 6) -}}
{{- else -}}
{{- $full | trimSuffix "-" -}}
{{- end -}}
{{- end }}

{{/*
The helm.sh/chart label. Argument: dict "root" $.
*/}}
{{- define "premigrate-lib.chartLabel" -}}
{{- printf "%s-%s" .root.Chart.Name .root.Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end }}

{{/*
Selector labels, and the recommended labels around them. Argument: dict "root" $ "name" NAME "component" COMPONENT.
*/}}
{{- define "premigrate-lib.matchLabels" -}}
app.kubernetes.io/name: {{ .name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "premigrate-lib.standardLabels" -}}
helm.sh/chart: {{ include "premigrate-lib.chartLabel" . }}
{{ include "premigrate-lib.matchLabels" . }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
{{- end }}

{{/*
An image reference: repository@digest when a digest is set, else repository:tag. With a registry (a chart's
global.imageRegistry), the repository's own registry (its first path element when that has a dot or a colon or
is localhost, as for docker and containerd) is replaced by it, else it is put in front: ghcr.io/premigrate/gate
with registry.example.com is registry.example.com/premigrate/gate.
Argument: dict "image" IMAGE_VALUES "tag" DEFAULT_TAG ["registry" REGISTRY].
*/}}
{{- define "premigrate-lib.imageRef" -}}
{{- if not .image.repository -}}
{{- fail "premigrate-lib: an image's repository is required (for the migration: usually the app's image)" -}}
{{- end -}}
{{- $repository := include "premigrate-lib.repository" (dict "repository" .image.repository "registry" .registry) -}}
{{- if .image.digest -}}
{{- printf "%s@%s" $repository .image.digest -}}
{{- else -}}
{{- printf "%s:%s" $repository (toString (default .tag .image.tag)) -}}
{{- end -}}
{{- end }}

{{/*
A repository in the registry "registry" names, when it names one (else the repository as it is): its own
registry replaced, or the registry put in front. Argument: dict "repository" REPOSITORY ["registry" REGISTRY].
*/}}
{{- define "premigrate-lib.repository" -}}
{{- with trimSuffix "/" (toString (.registry | default "")) -}}
{{- printf "%s/%s" . (include "premigrate-lib.repositoryPath" $.repository) -}}
{{- else -}}
{{- .repository -}}
{{- end -}}
{{- end }}

{{/*
A repository without its registry (its first path element, when that has a dot or a colon or is localhost):
premigrate/gate for ghcr.io/premigrate/gate, localhost:5000/premigrate/gate and premigrate/gate. Argument: the
repository.
*/}}
{{- define "premigrate-lib.repositoryPath" -}}
{{- $parts := splitList "/" . -}}
{{- $first := first $parts -}}
{{- if and (gt (len $parts) 1) (or (contains "." $first) (contains ":" $first) (eq $first "localhost")) -}}
{{- join "/" (rest $parts) -}}
{{- else -}}
{{- . -}}
{{- end -}}
{{- end }}
