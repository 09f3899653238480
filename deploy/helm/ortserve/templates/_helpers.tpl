{{- define "ortserve.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "ortserve.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "ortserve.selectorLabels" -}}
app.kubernetes.io/name: {{ include "ortserve.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "ortserve.labels" -}}
{{ include "ortserve.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "ortserve.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "ortserve.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "ortserve.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository .Values.image.tag -}}
{{- end -}}
{{- end -}}

{{/*
Whole CPUs from a Kubernetes quantity ("2", "1.5", "1500m"), rounded down,
at least 1; "" when there is none. The limit wins over the request: it is
the quota the container's cgroup gets.
*/}}
{{- define "ortserve.cpuQuantity" -}}
{{- $q := toString . -}}
{{- $cpus := 0 -}}
{{- if hasSuffix "m" $q -}}
{{- $cpus = div (atoi (trimSuffix "m" $q)) 1000 -}}
{{- else -}}
{{- $cpus = int (floor (float64 $q)) -}}
{{- end -}}
{{- max 1 $cpus -}}
{{- end -}}

{{- define "ortserve.threadBudget" -}}
{{- $r := .Values.resources | default dict -}}
{{- $limits := $r.limits | default dict -}}
{{- $requests := $r.requests | default dict -}}
{{- if gt (int .Values.threadBudget) 0 -}}
{{- .Values.threadBudget -}}
{{- else if $limits.cpu -}}
{{- include "ortserve.cpuQuantity" $limits.cpu -}}
{{- else if $requests.cpu -}}
{{- include "ortserve.cpuQuantity" $requests.cpu -}}
{{- end -}}
{{- end -}}

{{- define "ortserve.terminationGracePeriodSeconds" -}}
{{- add .Values.preStopSleepSecs .Values.server.exitTimeoutSecs .Values.terminationGraceMarginSecs -}}
{{- end -}}

{{/* Secret key files of the restricted APIs: /etc/ortserve/keys/<protocol>-<index>/<key>. */}}
{{- define "ortserve.keyDir" -}}
{{- printf "/etc/ortserve/keys/%s-%d" .protocol .index -}}
{{- end -}}

{{/* routing.mode=model-hash: an HAProxy routes by model name (templates/router.yaml). */}}
{{- define "ortserve.modelHash" -}}
{{- if eq (toString .Values.routing.mode) "model-hash" }}true{{ end -}}
{{- end -}}

{{- define "ortserve.routerName" -}}
{{- printf "%s-router" (include "ortserve.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The router's pods: a name of their own, so that the replicas' selectors never match them. */}}
{{- define "ortserve.routerSelectorLabels" -}}
app.kubernetes.io/name: {{ include "ortserve.name" . }}-router
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "ortserve.routerImage" -}}
{{- $i := .Values.routing.haproxy.image -}}
{{- if $i.digest -}}
{{- printf "%s@%s" $i.repository $i.digest -}}
{{- else -}}
{{- printf "%s:%s" $i.repository (toString $i.tag) -}}
{{- end -}}
{{- end -}}

{{/* The headless Service that gives each replica of the StatefulSet its DNS name. */}}
{{- define "ortserve.replicasService" -}}
{{- printf "%s-replicas" (include "ortserve.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Server slots on the router's hash ring: the most replicas there will be. */}}
{{- define "ortserve.replicaSlots" -}}
{{- $n := int .Values.replicaCount -}}
{{- if .Values.autoscaling.enabled -}}
{{- $n = max $n (int .Values.autoscaling.maxReplicas) -}}
{{- end -}}
{{- if gt (int .Values.routing.maxReplicas) 0 -}}
{{- $n = int .Values.routing.maxReplicas -}}
{{- end -}}
{{- $n -}}
{{- end -}}

{{/* Where the router's ConfigMap is mounted: haproxy.cfg and its Lua converter. */}}
{{- define "ortserve.routerConfigDir" -}}
/usr/local/etc/haproxy
{{- end -}}
