{{/*
Names. Kubernetes object names (and label values) are limited to 63 characters, so
every name is truncated there, without a trailing "-".
*/}}

{{/* The chart name, or nameOverride. */}}
{{- define "ddpjob-operator.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The prefix of every object: fullnameOverride, else "<release>-<name>", else just the
release name when it already contains the chart name (helm install ddpjob-operator ...).
*/}}
{{- define "ddpjob-operator.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* "<chart>-<version>" for the helm.sh/chart label ("+" is not allowed in label values). */}}
{{- define "ddpjob-operator.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels on every object. */}}
{{- define "ddpjob-operator.labels" -}}
helm.sh/chart: {{ include "ddpjob-operator.chart" . }}
{{ include "ddpjob-operator.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: ddpjob
{{- end }}

{{/* Labels the Deployment selects its Pods by; never change them (selectors are immutable). */}}
{{- define "ddpjob-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "ddpjob-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: operator
{{- end }}

{{- define "ddpjob-operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "ddpjob-operator.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The namespace whose DDPJobs the operator handles with watch.scope=namespace. */}}
{{- define "ddpjob-operator.watchNamespace" -}}
{{- default .Release.Namespace .Values.watch.namespace }}
{{- end }}

{{- define "ddpjob-operator.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/* The flags of `ddpjob operator` (kopf run + metrics): scope, standalone, liveness, metrics. */}}
{{- define "ddpjob-operator.args" -}}
{{- if eq .Values.watch.scope "cluster" }}
- --all-namespaces
{{- else }}
- --namespace={{ include "ddpjob-operator.watchNamespace" . }}
{{- end }}
{{- if not .Values.leaderElection.enabled }}
- --standalone
{{- end }}
- --liveness=http://0.0.0.0:{{ .Values.probes.port }}/healthz
{{- if .Values.metrics.enabled }}
- --metrics-port={{ .Values.metrics.port }}
{{- end }}
{{- range .Values.extraArgs }}
- {{ . | quote }}
{{- end }}
{{- end }}

{{/* The metrics Service: the full name leaves room for the "-metrics" suffix. */}}
{{- define "ddpjob-operator.metricsServiceName" -}}
{{- printf "%s-metrics" (include "ddpjob-operator.fullname" . | trunc 55 | trimSuffix "-") }}
{{- end }}

{{/* The notice key's Secret (notice-key.yaml): the full name, cut so the suffix fits in 63. */}}
{{- define "ddpjob-operator.noticeKeySecret" -}}
{{- printf "%s-notice-key" (include "ddpjob-operator.fullname" . | trunc 52 | trimSuffix "-") }}
{{- end }}

{{/* The Lease the replicas elect their leader in: named like the Deployment, in its namespace. */}}
{{- define "ddpjob-operator.leaseName" -}}
{{- include "ddpjob-operator.fullname" . }}
{{- end }}

{{/* The leader election's Role and RoleBinding: the full name, cut so the suffix fits in 63. */}}
{{- define "ddpjob-operator.leaderElectionRole" -}}
{{- printf "%s-leader-election" (include "ddpjob-operator.fullname" . | trunc 47 | trimSuffix "-") }}
{{- end }}

{{/* The election's timings, checked together (the schema checks each): as the operator does at start. */}}
{{- define "ddpjob-operator.checkLeaderElection" -}}
{{- $e := .Values.leaderElection }}
{{- if and $e.enabled (not (lt (float64 $e.renewDeadline) (float64 $e.leaseDuration))) }}
{{- fail "leaderElection.renewDeadline must be below leaderElection.leaseDuration" }}
{{- end }}
{{- if and $e.enabled (not (lt (mulf $e.retryPeriod 1.2) (float64 $e.renewDeadline))) }}
{{- fail "leaderElection.retryPeriod: 1.2 x it must be below leaderElection.renewDeadline" }}
{{- end }}
{{- end }}
