{{/* Chart name, truncated to the 63 characters a label value allows. */}}
{{- define "agentchain.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Fully qualified name: the release name alone when it already contains the chart's. */}}
{{- define "agentchain.fullname" -}}
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

{{- define "agentchain.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "agentchain.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: agentchain
{{- end }}

{{- define "agentchain.selectorLabels" -}}
app.kubernetes.io/name: {{ include "agentchain.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: operator
{{- end }}

{{- define "agentchain.redis.fullname" -}}
{{- printf "%s-redis" (include "agentchain.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "agentchain.redis.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "agentchain.redis.selectorLabels" . }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: agentchain
{{- end }}

{{- define "agentchain.redis.selectorLabels" -}}
app.kubernetes.io/name: {{ include "agentchain.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: redis
{{- end }}

{{- define "agentchain.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "agentchain.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "agentchain.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/* The Secret holding webhook secrets, or "" when none is configured (fail closed). */}}
{{- define "agentchain.webhookSecretName" -}}
{{- if .Values.webhook.existingSecret }}
{{- .Values.webhook.existingSecret }}
{{- else if .Values.webhook.secrets }}
{{- printf "%s-webhook" (include "agentchain.fullname" .) }}
{{- end }}
{{- end }}

{{/* The Secret holding admin tokens, or "" when none is configured. */}}
{{- define "agentchain.adminTokensSecretName" -}}
{{- if .Values.adminTokens.existingSecret }}
{{- .Values.adminTokens.existingSecret }}
{{- else if .Values.adminTokens.tokens }}
{{- printf "%s-admin-tokens" (include "agentchain.fullname" .) }}
{{- end }}
{{- end }}

{{- define "agentchain.apiUrl" -}}
{{- default (printf "http://%s.%s.svc:%v" (include "agentchain.fullname" .) .Release.Namespace .Values.service.port) .Values.operator.apiUrl }}
{{- end }}

{{/* Checks that fail the render with a clear message instead of a broken install. */}}
{{- define "agentchain.validate" -}}
{{- if and (not .Values.redis.enabled) (not .Values.externalRedis.url) (not .Values.externalRedis.existingSecret) }}
{{- fail "redis.enabled is false: set externalRedis.url or externalRedis.existingSecret" }}
{{- end }}
{{- if and .Values.redis.enabled (or .Values.externalRedis.url .Values.externalRedis.existingSecret) }}
{{- fail "set either redis.enabled or externalRedis, not both" }}
{{- end }}
{{- if and (gt (int .Values.replicas) 1) (not .Values.leaderElection.enabled) }}
{{- fail "replicas > 1 needs leaderElection.enabled: without it every replica would run the engine" }}
{{- end }}
{{- if and .Values.redis.sentinel.enabled (gt (int .Values.redis.sentinel.quorum) (int .Values.redis.sentinel.replicas)) }}
{{- fail "redis.sentinel.quorum must not exceed redis.sentinel.replicas: no failover could ever be agreed" }}
{{- end }}
{{- range .Values.agents.defaultCommand }}
{{- if contains "," . }}
{{- fail (printf "agents.defaultCommand item %q contains a comma; the operator splits the list on commas" .) }}
{{- end }}
{{- end }}
{{- end }}

{{/* The Secret holding the bundled Redis's password: existing, or chart-owned. */}}
{{- define "agentchain.redisAuthSecretName" -}}
{{- default (printf "%s-redis" (include "agentchain.fullname" .)) .Values.redis.auth.existingSecret }}
{{- end }}

{{/* The Secret holding the operator key: existing, or chart-owned. */}}
{{- define "agentchain.operatorKeySecretName" -}}
{{- default (printf "%s-operator-key" (include "agentchain.fullname" .)) .Values.operatorKey.existingSecret }}
{{- end }}

{{/*
A generated secret value, base64-encoded: the one already in the release's Secret when
there is one (so upgrades keep it), else 48 fresh random characters.
Call with (dict "ctx" . "name" <Secret name> "key" <data key>).
*/}}
{{- define "agentchain.generatedValue" -}}
{{- $existing := lookup "v1" "Secret" .ctx.Release.Namespace .name }}
{{- if and $existing $existing.data (hasKey $existing.data .key) }}
{{- index $existing.data .key }}
{{- else }}
{{- randAlphaNum 48 | b64enc }}
{{- end }}
{{- end }}

{{/* The Secret holding the GitHub App's private key, or "" when none is configured. */}}
{{- define "agentchain.githubSecretName" -}}
{{- if .Values.github.existingSecret }}
{{- .Values.github.existingSecret }}
{{- else if .Values.github.privateKey }}
{{- printf "%s-github" (include "agentchain.fullname" .) }}
{{- end }}
{{- end }}

{{/* The bundled Sentinel mode's headless Service (pod DNS names) and a pod's name in it. */}}
{{- define "agentchain.redis.headless" -}}
{{- printf "%s-headless" (include "agentchain.redis.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The operator's URL for the bundled Sentinels: every pod's Sentinel, the master name,
db 0; the password is the separate file, for the primary and the Sentinels alike. */}}
{{- define "agentchain.redis.sentinelUrl" -}}
{{- $hosts := list }}
{{- range $i := until (int .Values.redis.sentinel.replicas) }}
{{- $hosts = append $hosts (printf "%s-%d.%s.%s.svc:26379" (include "agentchain.redis.fullname" $) $i (include "agentchain.redis.headless" $) $.Release.Namespace) }}
{{- end }}
{{- printf "redis+sentinel://agentchain@%s/%s/0?sentinel_username=default" (join "," $hosts) .Values.redis.sentinel.masterName }}
{{- end }}

{{- /* A label map as the operator's settings take it: key=value pairs, comma-separated. */}}
{{- define "agentchain.labelPairs" -}}
{{- $pairs := list }}
{{- range $key, $value := . }}
{{- $pairs = append $pairs (printf "%s=%s" $key $value) }}
{{- end }}
{{- join "," $pairs }}
{{- end }}
