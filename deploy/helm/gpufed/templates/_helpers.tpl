{{- define "gpufed.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "gpufed.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains (include "gpufed.name" .) .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name (include "gpufed.name" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "gpufed.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/part-of: gpufed
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end -}}

{{- define "gpufed.selector" -}}
app.kubernetes.io/name: {{ .name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
{{- end -}}

{{- define "gpufed.etcdName" -}}{{ include "gpufed.fullname" . }}-etcd{{- end -}}
{{- define "gpufed.hubName" -}}{{ include "gpufed.fullname" . }}-hub{{- end -}}
{{- define "gpufed.agentName" -}}{{ include "gpufed.fullname" . }}-agent{{- end -}}

{{- define "gpufed.etcdEndpoints" -}}
{{- if .Values.hub.etcdEndpoints -}}
{{- join "," .Values.hub.etcdEndpoints -}}
{{- else -}}
{{- printf "https://%s.%s.svc:2379" (include "gpufed.etcdName" .) .Release.Namespace -}}
{{- end -}}
{{- end -}}

{{- define "gpufed.restrictedContainer" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: ["ALL"]
{{- end -}}

{{- define "gpufed.restrictedPod" -}}
runAsNonRoot: true
runAsUser: 10001
runAsGroup: 10001
fsGroup: 10001
seccompProfile:
  type: RuntimeDefault
{{- end -}}
