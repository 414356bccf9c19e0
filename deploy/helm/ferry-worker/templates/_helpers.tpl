{{/* The chart's name, or nameOverride. */}}
{{- define "ferry-worker.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The objects' name: fullnameOverride, else the release name, with the chart's name appended unless it is in it. */}}
{{- define "ferry-worker.fullname" -}}
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

{{/* The labels that select the worker's pods; never change them in a release's life (a selector is immutable). */}}
{{- define "ferry-worker.selectorLabels" -}}
app.kubernetes.io/name: {{ include "ferry-worker.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* Every object's labels. */}}
{{- define "ferry-worker.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "ferry-worker.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/component: worker
app.kubernetes.io/part-of: ferry
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* The ServiceAccount the worker runs as, and the RoleBindings bind. */}}
{{- define "ferry-worker.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "ferry-worker.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name: name the existing ServiceAccount the worker runs as (serviceAccount.create is false)" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The image reference; the tag defaults to the chart's appVersion. */}}
{{- define "ferry-worker.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/* This release's build ID (Worker Versioning): versioning.buildId, else the image tag, else the appVersion. */}}
{{- define "ferry-worker.buildId" -}}
{{- default (default .Chart.AppVersion .Values.image.tag) .Values.versioning.buildId }}
{{- end }}

{{/* A build ID as a label value or a name's part: lowercase letters, digits, "-" (and at most 40 of them). */}}
{{- define "ferry-worker.labelSafe" -}}
{{- regexReplaceAll "[^a-z0-9-]" (lower .) "-" | trunc 40 | trimAll "-" }}
{{- end }}

{{/* The Deployment of one version: the objects' name and the build ID. Takes (list root buildId). */}}
{{- define "ferry-worker.versionName" -}}
{{- $root := index . 0 }}
{{- printf "%s-%s" (include "ferry-worker.fullname" $root | trunc 22 | trimSuffix "-") (include "ferry-worker.labelSafe" (index . 1)) }}
{{- end }}

{{/* Temporal's variables, for the worker and for the hook Jobs. */}}
{{- define "ferry-worker.temporalEnv" -}}
{{- $tls := .Values.temporal.tls }}
{{- $tlsDir := include "ferry-worker.tlsDir" . }}
- name: TEMPORAL_ADDRESS
  value: {{ .Values.temporal.address | quote }}
- name: TEMPORAL_NAMESPACE
  value: {{ .Values.temporal.namespace | quote }}
{{- with .Values.temporal.apiKey.secretName }}
- name: TEMPORAL_API_KEY
  valueFrom:
    secretKeyRef:
      name: {{ . }}
      key: {{ $.Values.temporal.apiKey.key }}
{{- end }}
{{- if $tls.enabled }}
- name: TEMPORAL_TLS
  value: 'true'
{{- end }}
{{- if and $tls.enabled $tls.secretName $tls.clientCertKey }}
- name: TEMPORAL_TLS_CLIENT_CERT_PATH
  value: {{ $tlsDir }}/client.crt
- name: TEMPORAL_TLS_CLIENT_KEY_PATH
  value: {{ $tlsDir }}/client.key
{{- end }}
{{- if and $tls.enabled $tls.secretName $tls.serverCAKey }}
- name: TEMPORAL_TLS_SERVER_CA_CERT_PATH
  value: {{ $tlsDir }}/ca.crt
{{- end }}
{{- with $tls.serverName }}
- name: TEMPORAL_TLS_SERVER_NAME
  value: {{ . | quote }}
{{- end }}
{{- end }}

{{/* The TLS Secret's volume: only the keys named in values, under fixed names, readable by owner and group only. */}}
{{- define "ferry-worker.tlsVolume" -}}
{{- $tls := .Values.temporal.tls }}
- name: temporal-tls
  secret:
    secretName: {{ $tls.secretName }}
    defaultMode: 288 # 0440
    items:
      {{- if $tls.clientCertKey }}
      - key: {{ $tls.clientCertKey }}
        path: client.crt
      - key: {{ $tls.clientKeyKey }}
        path: client.key
      {{- end }}
      {{- if $tls.serverCAKey }}
      - key: {{ $tls.serverCAKey }}
        path: ca.crt
      {{- end }}
{{- end }}

{{/* Where the TLS Secret's files are mounted. */}}
{{- define "ferry-worker.tlsDir" -}}
/etc/ferry/temporal-tls
{{- end }}

{{/*
Checks of values that values.schema.json cannot word clearly: combinations. Each failure names the values to change.
*/}}
{{- define "ferry-worker.validate" -}}
{{- $tls := .Values.temporal.tls }}
{{- if and $tls.secretName (not $tls.enabled) }}
{{- fail "temporal.tls.secretName is set but temporal.tls.enabled is false: set temporal.tls.enabled=true to use it" }}
{{- end }}
{{- if and $tls.secretName (ne (empty $tls.clientCertKey) (empty $tls.clientKeyKey)) }}
{{- fail "temporal.tls.clientCertKey and temporal.tls.clientKeyKey go together (mTLS): set both, or empty both for TLS without a client certificate" }}
{{- end }}
{{- if and $tls.secretName (empty $tls.clientCertKey) (empty $tls.serverCAKey) }}
{{- fail "temporal.tls.secretName is set but no key of it is used: set clientCertKey and clientKeyKey, serverCAKey, or both" }}
{{- end }}
{{- if and $tls.serverName (not $tls.enabled) (not .Values.temporal.apiKey.secretName) }}
{{- fail "temporal.tls.serverName is set but the connection is not TLS: set temporal.tls.enabled=true" }}
{{- end }}
{{- if eq (int .Values.healthPort) (int .Values.metrics.port) }}
{{- fail (printf "healthPort and metrics.port are both %d: give them different ports" (int .Values.healthPort)) }}
{{- end }}
{{- if and .Values.metrics.serviceMonitor.enabled (not .Values.metrics.service.enabled) }}
{{- fail "metrics.serviceMonitor.enabled needs metrics.service.enabled: the ServiceMonitor scrapes through that Service" }}
{{- end }}
{{- if and .Values.networkPolicy.enabled (eq .Values.endpointMode "service-proxy") }}
{{- fail "networkPolicy.enabled needs endpointMode in-cluster: through the API server's proxy the worker's requests come from the API server, which the policy does not admit" }}
{{- end }}
{{- $owned := dict
  "FERRY_CLUSTER" "cluster"
  "FERRY_ENDPOINT_MODE" "endpointMode"
  "FERRY_LOG_LEVEL" "logLevel"
  "FERRY_SHUTDOWN_GRACE" "terminationGracePeriodSeconds"
  "FERRY_HEALTH_ADDRESS" "healthPort"
  "FERRY_METRICS_ADDRESS" "metrics.port"
  "TEMPORAL_ADDRESS" "temporal.address"
  "TEMPORAL_NAMESPACE" "temporal.namespace"
  "TEMPORAL_UI_URL" "temporal.webUiUrl"
  "TEMPORAL_API_KEY" "temporal.apiKey"
  "TEMPORAL_TLS" "temporal.tls.enabled"
  "TEMPORAL_TLS_CLIENT_CERT_PATH" "temporal.tls.clientCertKey"
  "TEMPORAL_TLS_CLIENT_KEY_PATH" "temporal.tls.clientKeyKey"
  "TEMPORAL_TLS_SERVER_CA_CERT_PATH" "temporal.tls.serverCAKey"
  "TEMPORAL_TLS_SERVER_NAME" "temporal.tls.serverName"
  "FERRY_WORKER_VERSIONING" "versioning.enabled"
  "FERRY_BUILD_ID" "versioning.buildId"
  "FERRY_TENANTS_FILE" "tenants"
  "FERRY_NETWORK_POLICY" "networkPolicy.enabled"
  "FERRY_WORKER_NAMESPACE" "networkPolicy.enabled"
  "FERRY_WORKER_POD_LABELS" "networkPolicy.enabled"
  "FERRY_MAX_CACHED_WORKFLOWS" "workflowCache"
  "FERRY_WATCH_LEASE" "replicaCount" }}
{{- if .Values.heapLimitMiB }}
{{- $_ := set $owned "NODE_OPTIONS" "heapLimitMiB" }}
{{- end }}
{{- if .Values.versioning.enabled }}
{{- $current := include "ferry-worker.buildId" . }}
{{- $names := dict (include "ferry-worker.labelSafe" $current) $current }}
{{- range .Values.versioning.keep }}
{{- $safe := include "ferry-worker.labelSafe" .buildId }}
{{- if hasKey $names $safe }}
{{- fail (printf "versioning.keep: build ID %s is this release's or another kept one's (as a name: %s): keep each older version once" .buildId $safe) }}
{{- end }}
{{- $_ := set $names $safe .buildId }}
{{- end }}
{{- else if .Values.versioning.keep }}
{{- fail "versioning.keep lists versions of a Worker Deployment: it needs versioning.enabled=true" }}
{{- end }}
{{- range .Values.extraEnv }}
{{- if hasKey $owned .name }}
{{- fail (printf "extraEnv sets %s, which the chart sets from %s: set that value instead" .name (get $owned .name)) }}
{{- end }}
{{- end }}
{{- end }}
