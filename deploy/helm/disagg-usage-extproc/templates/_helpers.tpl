{{/* The release's base name: the release name, unless it already contains the chart's. */}}
{{- define "dux.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "dux.redisName" -}}
{{- printf "%s-redis" (include "dux.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Selector labels of the service's pods (never change between upgrades). */}}
{{- define "dux.selectorLabels" -}}
app.kubernetes.io/name: disagg-usage-extproc
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: extproc
{{- end -}}

{{- define "dux.redisSelectorLabels" -}}
app.kubernetes.io/name: disagg-usage-redis
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: context-usage-store
{{- end -}}

{{- define "dux.commonLabels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: disagg-usage
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end -}}

{{- define "dux.labels" -}}
{{ include "dux.selectorLabels" . }}
{{ include "dux.commonLabels" . }}
{{- end -}}

{{- define "dux.redisLabels" -}}
{{ include "dux.redisSelectorLabels" . }}
{{ include "dux.commonLabels" . }}
{{- end -}}

{{- define "dux.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "dux.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "dux.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The Redis URI comes from a Secret (external Redis given that way). */}}
{{- define "dux.redisUriFromSecret" -}}
{{- if and (not .Values.redis.bundled) .Values.redis.external.uriSecret.name -}}true{{- end -}}
{{- end -}}

{{/*
The service's configuration as mounted: config, with store.redis_uri pointing at the bundled Redis when
it is used, and the memory store for the sidecar snippet unless a Redis is named.
*/}}
{{- define "dux.config" -}}
{{- $config := deepCopy .Values.config -}}
{{- $store := default (dict) $config.store -}}
{{- $redisNamed := or (hasKey $store "redis_uri") (eq (include "dux.redisUriFromSecret" .) "true") -}}
{{- if .Values.sidecarSnippet.enabled -}}
{{-   if not $redisNamed -}}{{- $_ := set $store "type" "memory" -}}{{- end -}}
{{- else if and (eq (toString (default "memory" $store.type)) "redis") .Values.redis.bundled (not (hasKey $store "redis_uri")) -}}
{{-   $_ := set $store "redis_uri" (printf "redis://%s:6379" (include "dux.redisName" .)) -}}
{{- end -}}
{{- $_ := set $config "store" $store -}}
{{- toYaml $config -}}
{{- end -}}

{{- define "dux.grpcPort" -}}{{ default 9002 (dig "grpc" "port" 9002 .Values.config) }}{{- end -}}
{{- define "dux.adminPort" -}}{{ default 9090 (dig "admin" "port" 9090 .Values.config) }}{{- end -}}

{{/* The service's container, central or beside an orchestrator ("sidecar": true). */}}
{{- define "dux.container" -}}
{{- $root := .root -}}
{{- $sidecar := .sidecar -}}
name: extproc
image: {{ include "dux.image" $root }}
imagePullPolicy: {{ $root.Values.image.pullPolicy }}
{{- if $sidecar }}
restartPolicy: Always
{{- end }}
args: ["--config", "/etc/disagg-usage/config.yaml"]
env:
{{- if $sidecar }}
# A bad config: log it and idle, serving nothing (Envoy passes traffic through), never crash-loop.
- name: DISAGG_USAGE_ON_STARTUP_FAILURE
  value: idle
{{- end }}
- name: JAVA_TOOL_OPTIONS
  value: {{ ternary $root.Values.sidecarSnippet.javaToolOptions $root.Values.javaToolOptions $sidecar | quote }}
{{- if eq (include "dux.redisUriFromSecret" $root) "true" }}
- name: DISAGG_USAGE_STORE_REDIS_URI
  valueFrom:
    secretKeyRef:
      name: {{ $root.Values.redis.external.uriSecret.name }}
      key: {{ $root.Values.redis.external.uriSecret.key }}
{{- end }}
{{- with $root.Values.extraEnv }}
{{ toYaml . }}
{{- end }}
ports:
- name: grpc
  containerPort: {{ include "dux.grpcPort" $root }}
  protocol: TCP
- name: http-metrics
  containerPort: {{ include "dux.adminPort" $root }}
  protocol: TCP
{{- if not $sidecar }}
# The admin port answers as soon as the process is up; then gRPC health decides. /readyz is never a
# probe: it is 503 while Redis is down, which every replica survives by passing traffic through.
startupProbe:
  httpGet:
    path: /healthz
    port: http-metrics
  periodSeconds: 1
  failureThreshold: 60
readinessProbe:
  grpc:
    port: {{ include "dux.grpcPort" $root }}
    service: envoy.service.ext_proc.v3.ExternalProcessor
  periodSeconds: 5
  failureThreshold: 2
livenessProbe:
  grpc:
    port: {{ include "dux.grpcPort" $root }}
  periodSeconds: 10
  timeoutSeconds: 2
  failureThreshold: 3
lifecycle:
  preStop:
    sleep:
      seconds: {{ $root.Values.preStopSleepSeconds }}
{{- end }}
resources:
  {{- toYaml (ternary $root.Values.sidecarSnippet.resources $root.Values.resources $sidecar) | nindent 2 }}
securityContext:
  runAsNonRoot: true
  runAsUser: 65532
  runAsGroup: 65532
  allowPrivilegeEscalation: false
  readOnlyRootFilesystem: true
  capabilities:
    drop: [ALL]
  seccompProfile:
    type: RuntimeDefault
volumeMounts:
- name: disagg-usage-config
  mountPath: /etc/disagg-usage
  readOnly: true
- name: disagg-usage-tmp          # Netty unpacks its native transport library to java.io.tmpdir
  mountPath: /tmp
{{- with $root.Values.extraVolumeMounts }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* The volumes the container mounts. */}}
{{- define "dux.volumes" -}}
- name: disagg-usage-config
  configMap:
    name: {{ include "dux.fullname" . }}-config
- name: disagg-usage-tmp
  emptyDir:
    sizeLimit: 64Mi
{{- with .Values.extraVolumes }}
{{ toYaml . }}
{{- end }}
{{- end -}}
