{{/* SPDX-License-Identifier: Apache-2.0 */}}

{{/* The chart's name, shortened to a DNS label. */}}
{{- define "kube-rdma.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The prefix of every object name: the release name when it already contains the chart's name
(`helm install kube-rdma ...` gives kube-rdma-node, as in deploy/manifests), else release-chart.
*/}}
{{- define "kube-rdma.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 50 | trimSuffix "-" }}
{{- else }}
{{- $name := include "kube-rdma.name" . }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 50 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 50 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/*
Labels of every object the chart owns. app.kubernetes.io/part-of is what deploy/manifests carries;
the rest say which release manages the object (check_renders.py ignores exactly these).
*/}}
{{- define "kube-rdma.labels" -}}
app.kubernetes.io/part-of: kube-rdma
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end }}

{{/* The node DaemonSet's selector: never change it, a DaemonSet's selector is immutable. */}}
{{- define "kube-rdma.nodeSelectorLabels" -}}
app.kubernetes.io/name: {{ include "kube-rdma.fullname" . }}-node
{{- end }}

{{/* repository:tag, the tag defaulting to the chart's appVersion. */}}
{{- define "kube-rdma.image" -}}
{{- $tag := .image.tag | default .chart.AppVersion -}}
{{- printf "%s:%s" .image.repository $tag }}
{{- end }}
