{{/* The name prefix of every object: the release name when it already says metrics-ring. */}}
{{- define "metrics-ring.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "metrics-ring.fullname" -}}
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

{{/* The Deployment's and Service's name carries the source, as the overlays' (metrics-ring-kubelet), so the
APIServices can be swapped between two releases with one patch each. */}}
{{- define "metrics-ring.serverName" -}}
{{- printf "%s-%s" (include "metrics-ring.fullname" .) (include "metrics-ring.source" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "metrics-ring.source" -}}
{{- if not (has .Values.source (list "kubelet" "prometheus")) }}
{{- fail (printf "source %q: want kubelet or prometheus" .Values.source) }}
{{- end }}
{{- .Values.source }}
{{- end }}

{{/* tls.type, checked; metrics-server's chart calls self-signed "metrics-server". */}}
{{- define "metrics-ring.tlsType" -}}
{{- $t := .Values.tls.type }}
{{- if eq $t "metrics-server" }}{{ $t = "self-signed" }}{{ end }}
{{- if not (has $t (list "self-signed" "helm" "cert-manager" "existingSecret")) }}
{{- fail (printf "tls.type %q: want self-signed, helm, cert-manager or existingSecret" .Values.tls.type) }}
{{- end }}
{{- $t }}
{{- end }}

{{/* The Secret holding the serving certificate, for every tls.type but self-signed. */}}
{{- define "metrics-ring.tlsSecretName" -}}
{{- if eq (include "metrics-ring.tlsType" .) "existingSecret" }}
{{- required "tls.existingSecret.name is required with tls.type existingSecret" .Values.tls.existingSecret.name }}
{{- else }}
{{- printf "%s-tls" (include "metrics-ring.fullname" .) }}
{{- end }}
{{- end }}

{{- define "metrics-ring.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "metrics-ring.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "metrics-ring.selectorLabels" -}}
app.kubernetes.io/name: {{ include "metrics-ring.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: {{ include "metrics-ring.source" . }}
{{- end }}

{{- define "metrics-ring.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "metrics-ring.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "metrics-ring.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
