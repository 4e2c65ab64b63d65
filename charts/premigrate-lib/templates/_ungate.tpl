{{/*
gate.waitIn schedulingGate: the app pods wait without running anything. Their pod template carries the
scheduling gate premigrate.io/migration (premigrate-lib.schedulingGates), so Kubernetes neither schedules them
nor pulls an image nor starts a container nor reserves node resources; a small Deployment of the release,
<fullname>-gate, runs `gate ungate`, which removes that gate from each pod once the migration of the pod's
identity succeeded on this database (the same decision as the wait-for-migration init container's). A failed
migration leaves the pods Pending, with a Warning Event on each that names the migration.

What the app's pod template takes in this mode (each renders nothing in the other modes):

  metadata.labels       premigrate-lib.podLabels        premigrate.io/gated-by: the label gate ungate selects
  metadata.annotations  premigrate-lib.podAnnotations   the identity and the migration Job's name
  spec.schedulingGates  premigrate-lib.schedulingGates  the gate

The app's ServiceAccount needs no API rights: the gate's Role is bound to <fullname>-gate's own ServiceAccount.
That Role must patch pods, which RBAC cannot limit to names; a ValidatingAdmissionPolicy (cluster-scoped, like
the guard's) holds <fullname>-gate to removing that one gate from the release's pods, changing nothing else.

Each takes the same argument as premigrate-lib.migrationJob.
*/}}

{{/*
"true" when the pods wait in the scheduler's queue (gate.waitIn schedulingGate, the gate on).
*/}}
{{- define "premigrate-lib.heldByScheduler" -}}
{{- $c := dict -}}{{- include "premigrate-lib.config" (dict "in" . "out" $c) -}}
{{- if $c.heldByScheduler -}}
true
{{- end -}}
{{- end }}

{{- define "premigrate-lib.schedulingGates" -}}
{{- if include "premigrate-lib.heldByScheduler" . -}}
- name: premigrate.io/migration
{{- end -}}
{{- end }}

{{- define "premigrate-lib.podLabels" -}}
{{- $c := dict -}}{{- include "premigrate-lib.config" (dict "in" . "out" $c) -}}
{{- if $c.heldByScheduler -}}
premigrate.io/gated-by: {{ $c.gateName }}
{{- end -}}
{{- end }}

{{/*
Labels of the gate's own pods: no app.kubernetes.io/name (with it and the instance they would match the app's
selectors, like the migration's pods); its selector labels first. Argument: the config.
*/}}
{{- define "premigrate-lib.ungateSelectorLabels" -}}
app.kubernetes.io/part-of: {{ .name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: gate
{{- end }}

{{- define "premigrate-lib.ungateServiceAccount" -}}
{{- $c := dict -}}{{- include "premigrate-lib.config" (dict "in" . "out" $c) -}}
{{- if $c.heldByScheduler -}}
apiVersion: v1
kind: ServiceAccount
metadata:
  name: {{ $c.gateName }}
  labels:
    {{- include "premigrate-lib.labels" (dict "c" $c "component" "gate") | nindent 4 }}
  {{- with include "premigrate-lib.syncWaveOf" (dict "c" $c "wave" "-1") }}
  annotations:
    {{- . | nindent 4 }}
  {{- end }}
automountServiceAccountToken: true
{{- end -}}
{{- end }}

{{/*
The Deployment that releases the held pods: gate.deployment.replicas (1 by default; while none runs, new pods
wait and nothing starts unmigrated; two or more release the same pods harmlessly, each patch conditional on the
gate still being there), placed by gate.deployment (by default where the migration pod may run, which is where
the app's pods may: a tainted pool's tolerations, its node selector, affinity and priority), restricted Pod
Security (the migration pod's security contexts), the gate's image and resources. An Argo CD wave before the
migration Job, so it runs before the app's pods come.
*/}}
{{- define "premigrate-lib.ungateDeployment" -}}
{{- $c := dict -}}{{- include "premigrate-lib.config" (dict "in" . "out" $c) -}}
{{- if $c.heldByScheduler -}}
{{- $d := include "premigrate-lib.ungateDeploymentValues" (dict "in" . "c" $c) | fromJson -}}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ $c.gateName }}
  labels:
    {{- include "premigrate-lib.labels" (dict "c" $c "component" "gate") | nindent 4 }}
  {{- with include "premigrate-lib.syncWaveOf" (dict "c" $c "wave" "-1") }}
  annotations:
    {{- . | nindent 4 }}
  {{- end }}
spec:
  replicas: {{ int $d.replicas }}
  revisionHistoryLimit: 3
  selector:
    matchLabels:
      {{- include "premigrate-lib.ungateSelectorLabels" $c | nindent 6 }}
  template:
    metadata:
      labels:
        {{- include "premigrate-lib.ungateSelectorLabels" $c | nindent 8 }}
    spec:
      serviceAccountName: {{ $c.gateName }}
      {{- include "premigrate-lib.ungatePlacement" (dict "c" $c "d" $d) | nindent 6 }}
      {{- with $c.pod.imagePullSecrets }}
      imagePullSecrets:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $c.pod.securityContext }}
      securityContext:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      terminationGracePeriodSeconds: 5
      containers:
        - name: gate
          image: {{ $c.gate.image }}
          imagePullPolicy: {{ $c.gate.pullPolicy }}
          command:
            - /gate
          args:
            - ungate
            - --selector
            - {{ printf "premigrate.io/gated-by=%s" $c.gateName }}
            - --records
            - {{ $c.recordsName }}
            - --store
            - {{ $c.storeName }}
            - --progress-interval
            - {{ $c.gate.progressInterval | quote }}
            {{- range include "premigrate-lib.databaseArgs" $c | fromJsonArray }}
            - {{ . | quote }}
            {{- end }}
          env:
            - name: POD_NAMESPACE
              valueFrom:
                fieldRef:
                  fieldPath: metadata.namespace
            - name: POD_NAME
              valueFrom:
                fieldRef:
                  fieldPath: metadata.name
            {{- with include "premigrate-lib.databaseEnv" $c }}
            {{- . | nindent 12 }}
            {{- end }}
          {{- with $c.gate.resources }}
          resources:
            {{- toYaml . | nindent 12 }}
          {{- end }}
          {{- with $c.pod.containerSecurityContext }}
          securityContext:
            {{- toYaml . | nindent 12 }}
          {{- end }}
{{- end -}}
{{- end }}

{{/*
gate.deployment, where <fullname>-gate runs, resolved and checked (JSON): replicas (1 by default) and
topologySpreadConstraints (none), and the node selector, tolerations, affinity and priority class, whose
missing or null values are the migration pod's (`pod`), which runs where the app may. Neither the identity nor the
Job's spec hash. Argument: dict "in" (the usual argument) "c" (its config).
*/}}
{{- define "premigrate-lib.ungateDeploymentValues" -}}
{{- $gd := (((.in.values | default dict).gate | default dict).deployment | default dict) -}}
{{- $d := dict "replicas" (ternary 1 $gd.replicas (kindIs "invalid" $gd.replicas)) "topologySpreadConstraints" ($gd.topologySpreadConstraints | default list) -}}
{{- range $k := list "nodeSelector" "tolerations" "affinity" "priorityClassName" -}}
{{- $_ := set $d $k (ternary (index $.c.pod $k) (index $gd $k) (kindIs "invalid" (index $gd $k))) -}}
{{- end -}}
{{- $r := $d.replicas -}}
{{- if not (and (or (kindIs "int" $r) (kindIs "int64" $r) (kindIs "float64" $r)) (ge (float64 $r) 1.0) (eq (float64 $r) (float64 (int $r)))) -}}
{{- fail (printf "premigrate-lib: gate.deployment.replicas must be a whole number of at least 1, not %s %v: with no replica of <fullname>-gate no new app pod starts (two or more keep one running through a drain, with a PodDisruptionBudget)" (kindOf $r) $r) -}}
{{- end -}}
{{- range $k := list "nodeSelector" "affinity" -}}
{{- if not (kindIs "map" (index $d $k)) -}}
{{- fail (printf "premigrate-lib: gate.deployment.%s must be a map (or null: the migration pod's), not %s %v" $k (kindOf (index $d $k)) (index $d $k)) -}}
{{- end -}}
{{- end -}}
{{- range $k := list "tolerations" "topologySpreadConstraints" -}}
{{- if not (kindIs "slice" (index $d $k)) -}}
{{- fail (printf "premigrate-lib: gate.deployment.%s must be a list (or null), not %s %v" $k (kindOf (index $d $k)) (index $d $k)) -}}
{{- end -}}
{{- end -}}
{{- if not (kindIs "string" $d.priorityClassName) -}}
{{- fail (printf "premigrate-lib: gate.deployment.priorityClassName must be a string (or null: the migration pod's), not %s %v" (kindOf $d.priorityClassName) $d.priorityClassName) -}}
{{- end -}}
{{- toJson $d -}}
{{- end }}

{{/*
Where <fullname>-gate's pods may run (pod spec fields, YAML): gate.deployment's priority, node selector,
affinity, tolerations and topology spread constraints; a constraint without labelSelector spreads the gate's
own pods. Argument: dict "c" (the config) "d" (premigrate-lib.ungateDeploymentValues).
*/}}
{{- define "premigrate-lib.ungatePlacement" -}}
{{- $d := .d -}}
{{- $spread := list -}}
{{- range $d.topologySpreadConstraints -}}
{{- $t := deepCopy . -}}
{{- if not (hasKey $t "labelSelector") -}}
{{- $_ := set $t "labelSelector" (dict "matchLabels" (include "premigrate-lib.ungateSelectorLabels" $.c | fromYaml)) -}}
{{- end -}}
{{- $spread = append $spread $t -}}
{{- end -}}
{{- $out := dict -}}
{{- with $d.priorityClassName }}{{ $_ := set $out "priorityClassName" . }}{{ end -}}
{{- with $d.nodeSelector }}{{ $_ := set $out "nodeSelector" . }}{{ end -}}
{{- with $d.affinity }}{{ $_ := set $out "affinity" . }}{{ end -}}
{{- with $d.tolerations }}{{ $_ := set $out "tolerations" . }}{{ end -}}
{{- with $spread }}{{ $_ := set $out "topologySpreadConstraints" . }}{{ end -}}
{{- with $out }}{{ toYaml . }}{{ end -}}
{{- end }}

{{/*
The PodDisruptionBudget of <fullname>-gate when it has more than one replica: a drain evicts one at a time, so one
keeps releasing pods (the drained node's app pods come back held, and wait for it). One replica gets none: a
budget that allows no eviction would block every drain of its node.
*/}}
{{- define "premigrate-lib.ungatePodDisruptionBudget" -}}
{{- $c := dict -}}{{- include "premigrate-lib.config" (dict "in" . "out" $c) -}}
{{- if $c.heldByScheduler -}}
{{- $d := include "premigrate-lib.ungateDeploymentValues" (dict "in" . "c" $c) | fromJson -}}
{{- if gt (int $d.replicas) 1 -}}
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ $c.gateName }}
  labels:
    {{- include "premigrate-lib.labels" (dict "c" $c "component" "gate") | nindent 4 }}
  {{- with include "premigrate-lib.syncWaveOf" (dict "c" $c "wave" "-1") }}
  annotations:
    {{- . | nindent 4 }}
  {{- end }}
spec:
  maxUnavailable: 1
  selector:
    matchLabels:
      {{- include "premigrate-lib.ungateSelectorLabels" $c | nindent 6 }}
{{- end -}}
{{- end -}}
{{- end }}

{{- define "premigrate-lib.ungatePolicyName" -}}
{{- $c := dict -}}{{- include "premigrate-lib.config" (dict "in" . "out" $c) -}}
{{- printf "premigrate.%s.%s" $c.root.Release.Namespace $c.gateName -}}
{{- end }}

{{/*
What <fullname>-gate may do with its right to patch pods: remove the scheduling gate premigrate.io/migration
from a pod of the release (it carries premigrate.io/gated-by: <fullname>-gate), and change nothing else, neither
another gate nor an image, a label, an annotation or where the pod may run.
*/}}
{{- define "premigrate-lib.ungatePolicy" -}}
{{- $c := dict -}}{{- include "premigrate-lib.config" (dict "in" . "out" $c) -}}
{{- if $c.heldByScheduler -}}
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: {{ include "premigrate-lib.ungatePolicyName" . }}
  labels:
    {{- include "premigrate-lib.labels" (dict "c" $c "component" "gate") | nindent 4 }}
  {{- with include "premigrate-lib.syncWaveOf" (dict "c" $c "wave" "-1") }}
  annotations:
    {{- . | nindent 4 }}
  {{- end }}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
      - apiGroups: [""]
        apiVersions: ["v1"]
        operations: ["UPDATE"]
        resources: ["pods"]
  matchConditions:
    - name: from-the-gate
      expression: {{ printf "request.userInfo.username == 'system:serviceaccount:%s:%s'" $c.root.Release.Namespace $c.gateName | quote }}
  variables:
    - name: gates
      expression: "object.spec.?schedulingGates.orValue([]).map(g, g.name)"
    - name: oldGates
      expression: "oldObject.spec.?schedulingGates.orValue([]).map(g, g.name)"
  validations:
    - expression: {{ printf "oldObject.metadata.?labels[?'premigrate.io/gated-by'].orValue('') == '%s'" $c.gateName | quote }}
      reason: Forbidden
      messageExpression: {{ printf "'premigrate: %s may release only the pods of its release (label premigrate.io/gated-by: %s), not pod ' + object.metadata.name" $c.gateName $c.gateName | quote }}
    - expression: "variables.gates == variables.oldGates.filter(n, n != 'premigrate.io/migration') && object.spec.containers == oldObject.spec.containers && object.spec.?initContainers == oldObject.spec.?initContainers && object.spec.?activeDeadlineSeconds == oldObject.spec.?activeDeadlineSeconds && object.spec.?tolerations == oldObject.spec.?tolerations && object.spec.?nodeSelector == oldObject.spec.?nodeSelector && object.spec.?affinity == oldObject.spec.?affinity && object.metadata.?labels == oldObject.metadata.?labels && object.metadata.?annotations == oldObject.metadata.?annotations"
      reason: Forbidden
      messageExpression: {{ printf "'premigrate: %s may only remove the scheduling gate premigrate.io/migration from pod ' + object.metadata.name + ', nothing else'" $c.gateName | quote }}
{{- end -}}
{{- end }}

{{- define "premigrate-lib.ungatePolicyBinding" -}}
{{- $c := dict -}}{{- include "premigrate-lib.config" (dict "in" . "out" $c) -}}
{{- if $c.heldByScheduler -}}
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: {{ include "premigrate-lib.ungatePolicyName" . }}
  labels:
    {{- include "premigrate-lib.labels" (dict "c" $c "component" "gate") | nindent 4 }}
  {{- with include "premigrate-lib.syncWaveOf" (dict "c" $c "wave" "-1") }}
  annotations:
    {{- . | nindent 4 }}
  {{- end }}
spec:
  policyName: {{ include "premigrate-lib.ungatePolicyName" . }}
  validationActions: [Deny]
  matchResources:
    namespaceSelector:
      matchLabels:
        kubernetes.io/metadata.name: {{ $c.root.Release.Namespace }}
{{- end -}}
{{- end }}
