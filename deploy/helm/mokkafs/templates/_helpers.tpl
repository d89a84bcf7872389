{{- define "mokkafs.fullname" -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "mokkafs.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "mokkafs.selector" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "mokkafs.profile" -}}
{{- if .Values.profile.inline -}}
{{ .Values.profile.inline }}
{{- else -}}
{{- $file := printf "profiles/%s.yaml" .Values.profile.name -}}
{{- $text := .Files.Get $file -}}
{{- if not $text -}}
{{- fail (printf "profile.name %q is not a shipped profile (a100 h100 h200 b200 gb200 gb300 l40s t4); or set profile.inline" .Values.profile.name) -}}
{{- end -}}
{{ $text }}
{{- end -}}
{{- end -}}
