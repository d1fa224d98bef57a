package main

import (
	"fmt"
	"strings"

	"github.com/remedy-dev/remedy/internal/release"
)

// The chart's files that are not rendered from deploy/.

func chartYAML() []byte {
	return fmt.Appendf(nil, `%sapiVersion: v2
name: remedy
description: Kubernetes remediation on Temporal - KubernetesExecutions, RemediationRequests, approvals, config reloads and drift detection
type: application
version: %s
appVersion: %s
home: https://github.com/remedy-dev/remedy
`, generated, strings.TrimPrefix(release.Version, "v"), release.Version)
}

const helpers = generated + `{{/* The image: repository, tag (default the chart's appVersion), and digest when set. */}}
{{- define "remedy.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}{{ with .Values.image.digest }}@{{ . }}{{ end }}
{{- end -}}
`

// secrets are what README's procedure has a person create, made from values
// when they are given: the webhook client CA and the Temporal settings.
const secrets = generated + `{{- if .Values.webhookClientCA }}
apiVersion: v1
kind: Secret
metadata:
  name: remedy-webhook-client-ca
  namespace: remedy-system
  labels: {app.kubernetes.io/part-of: remedy}
data:
  ca.crt: {{ .Values.webhookClientCA | b64enc }}
{{- end }}
{{- if .Values.payloadKeys.active }}
---
apiVersion: v1
kind: Secret
metadata:
  name: remedy-payload-keys
  namespace: remedy-system
  labels: {app.kubernetes.io/part-of: remedy}
data:
  active: {{ .Values.payloadKeys.active | b64enc }}
  {{- range $id, $key := .Values.payloadKeys.keys }}
  {{ $id }}: {{ $key | quote }}
  {{- end }}
{{- end }}
{{- if or .Values.temporal.namespace .Values.temporal.tls.enabled }}
---
apiVersion: v1
kind: Secret
metadata:
  name: remedy-temporal
  namespace: remedy-system
  labels: {app.kubernetes.io/part-of: remedy}
stringData:
  {{- with .Values.temporal.namespace }}
  TEMPORAL_NAMESPACE: {{ . | quote }}
  {{- end }}
  {{- if .Values.temporal.tls.enabled }}
  TEMPORAL_TLS_CA: /etc/remedy/temporal-tls/ca.crt
  {{- if .Values.temporal.tls.clientCertificate }}
  TEMPORAL_TLS_CERT: /etc/remedy/temporal-tls/tls.crt
  TEMPORAL_TLS_KEY: /etc/remedy/temporal-tls/tls.key
  {{- end }}
  {{- with .Values.temporal.tls.serverName }}
  TEMPORAL_SERVER_NAME: {{ . | quote }}
  {{- end }}
  {{- end }}
{{- end }}
`
