{{/*
Base name of every object: fullnameOverride, else the release name when it
contains "metactl" (release "metactl" gives the kustomize install's names),
else "<release>-metactl". At most 44 characters, so that every name derived
from it, the longest being <fullname>-controller-account (19 more), has at
most 63: the metrics Service's name must be a DNS label.
*/}}
{{- define "metactl.fullname" -}}
{{- $name := "" -}}
{{- if .Values.fullnameOverride -}}
{{- $name = .Values.fullnameOverride -}}
{{- else if contains "metactl" .Release.Name -}}
{{- $name = .Release.Name -}}
{{- else -}}
{{- $name = printf "%s-metactl" .Release.Name -}}
{{- end -}}
{{- $name | trunc 44 | trimSuffix "-" -}}
{{- end -}}

{{/*
Labels of every object: app.kubernetes.io/name (always metactl: metactl
explain and the selectors use it), Helm's standard labels, commonLabels.
*/}}
{{- define "metactl.labels" -}}
{{- include "metactl.labelsWith" (list . (dict) (dict)) -}}
{{- end -}}

{{/*
The labels of one object, one map written once (no key twice), from
(list <context> <own> <extra>): <own>, the labels the chart sets on this
object (app.kubernetes.io/component), win over the labels of every
object (app.kubernetes.io/name and Helm's standard labels), which win over
<extra> (a value's labels, e.g. serviceMonitor.labels), which win over
commonLabels.
*/}}
{{- define "metactl.labelsWith" -}}
{{- $ctx := index . 0 -}}
{{- $standard := dict
  "app.kubernetes.io/name" "metactl"
  "helm.sh/chart" (printf "%s-%s" $ctx.Chart.Name $ctx.Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-")
  "app.kubernetes.io/instance" $ctx.Release.Name
  "app.kubernetes.io/managed-by" $ctx.Release.Service -}}
{{- with $ctx.Chart.AppVersion }}
{{- $_ := set $standard "app.kubernetes.io/version" (. | toString | trunc 63) -}}
{{- end -}}
{{- toYaml (merge (dict) (index . 1) $standard (index . 2 | default (dict)) ($ctx.Values.commonLabels | default (dict))) -}}
{{- end -}}

{{/*
Labels selecting metactl's Pods: those of the kustomize install, and the
ones `metactl explain` lists Pods by.
*/}}
{{- define "metactl.selectorLabels" -}}
app.kubernetes.io/name: metactl
app.kubernetes.io/component: controller
{{- end -}}

{{/* The ServiceAccount metactl runs as. */}}
{{- define "metactl.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "metactl.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/*
The container image: repository:tag, or repository@digest. A tag latest (or
none) is refused: what it pulls changes under the release, and Kubernetes
pulls it Always.
*/}}
{{- define "metactl.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- $tag := default .Chart.AppVersion .Values.image.tag | toString -}}
{{- if or (eq $tag "latest") (eq $tag "") -}}
{{- fail "image.tag latest: pin the image by image.digest (sha256:...), or a tag that names one build (v1.2.3)" -}}
{{- end -}}
{{- printf "%s:%s" .Values.image.repository $tag -}}
{{- end -}}
{{- end -}}

{{/*
One `metactl run` flag, "--name=value", from a list (name value): empty when
the value is null, "" or an empty list. Whole numbers print as integers
(Helm reads YAML numbers as float64, which would print 33554432 as
3.3554432e+07); lists are joined with commas.
*/}}
{{- define "metactl.flag" -}}
{{- $name := index . 0 -}}
{{- $v := index . 1 -}}
{{- if kindIs "slice" $v -}}
{{- if $v -}}{{ printf "--%s=%s" $name (join "," $v) }}{{- end -}}
{{- else if kindIs "float64" $v -}}
{{- if eq $v (float64 (int64 $v)) -}}{{ printf "--%s=%d" $name (int64 $v) }}{{- else -}}{{ printf "--%s=%v" $name $v }}{{- end -}}
{{- else if not (or (kindIs "invalid" $v) (and (kindIs "string" $v) (eq $v ""))) -}}
{{ printf "--%s=%v" $name $v }}
{{- end -}}
{{- end -}}

{{/*
The container's arguments: `metactl run`, the flags of the kustomize
install, then each flag set in values (in `metactl run --help`'s order),
then extraArgs.
*/}}
{{- define "metactl.args" -}}
{{- $run := .Values.run -}}
{{- $le := .Values.leaderElection -}}
{{- $args := list "run" -}}
{{- if $le.enabled -}}
{{- $args = concat $args (list "--leader-elect=true" (printf "--leader-elect-namespace=%s" .Release.Namespace)) -}}
{{- end -}}
{{- $args = concat $args (list (printf "--metrics-addr=:%d" (int .Values.metrics.port)) (printf "--health-addr=:%d" (int .Values.health.port))) -}}
{{- /* run.applyForceConflicts, deprecated, is the opposite of run.refuseApplyConflicts. */ -}}
{{- $refuseApplyConflicts := $run.refuseApplyConflicts -}}
{{- if and (kindIs "invalid" $refuseApplyConflicts) (kindIs "bool" $run.applyForceConflicts) -}}
{{- $refuseApplyConflicts = not $run.applyForceConflicts -}}
{{- end -}}
{{- $flags := list -}}
{{- if $le.enabled -}}
{{- $flags = concat $flags (list
  (list "leader-elect-lease-name" $le.leaseName)
  (list "leader-elect-lease-duration" $le.leaseDuration)
  (list "leader-elect-renew-deadline" $le.renewDeadline)
  (list "leader-elect-retry-period" $le.retryPeriod)
  (list "shard-buckets" (ternary .Values.sharding.buckets nil (gt (int .Values.sharding.buckets) 0)))) -}}
{{- end -}}
{{- $flags = concat $flags (list
  (list "log-format" $run.logFormat)
  (list "v" $run.logLevel)
  (list "workers" $run.workers)
  (list "client-qps" $run.clientQPS)
  (list "client-burst" $run.clientBurst)
  (list "apply-strategy" $run.applyStrategy)
  (list "refuse-apply-conflicts" $refuseApplyConflicts)
  (list "credential-namespaces" $run.credentialNamespaces)
  (list "require-service-account" $run.requireServiceAccount)
  (list "synced-condition" $run.syncedCondition)
  (list "cache-resync" $run.cacheResync)
  (list "discovery-interval" $run.discoveryInterval)
  (list "max-retry-delay" $run.maxRetryDelay)
  (list "stop-grace-period" $run.stopGracePeriod)
  (list "events-qps" $run.eventsQPS)
  (list "events-burst" $run.eventsBurst)
  (list "event-source-component" $run.eventSourceComponent)
  (list "explain" $run.explain)
  (list "history-max-bytes" $run.historyMaxBytes)
  (list "record" $run.record)
  (list "record-max-bytes" $run.recordMaxBytes)
  (list "record-max-calls" $run.recordMaxCalls)
  (list "max-hook-response-bytes" $run.maxHookResponseBytes)
  (list "hook-response-budget-bytes" $run.hookResponseBudgetBytes)
  (list "hook-decoded-budget-bytes" $run.hookDecodedBudgetBytes)
  (list "etag-cache-max-bytes" $run.etagCacheMaxBytes)
  (list "max-related-objects" $run.maxRelatedObjects)
  (list "pprof-addr" $run.pprofAddr)) -}}
{{- range $flags -}}
{{- with include "metactl.flag" . -}}
{{- $args = append $args . -}}
{{- end -}}
{{- end -}}
{{- toYaml (concat $args .Values.extraArgs) -}}
{{- end -}}

{{/*
The container's tracing variables (docs/tracing.md), from tracing; none
when no value is set.
*/}}
{{- define "metactl.tracingEnv" -}}
{{- $t := .Values.tracing -}}
{{- $env := list -}}
{{- with $t.otlpEndpoint -}}
{{- if not (regexMatch "^https?://" .) -}}
{{- fail (printf "tracing.otlpEndpoint %q: want the URL of the collector's OTLP/HTTP receiver, http://HOST:4318 or https://..." .) -}}
{{- end -}}
{{- if regexMatch "^https?://[^/]*:4317(/.*)?$" . -}}
{{- fail (printf "tracing.otlpEndpoint %q: port 4317 is OTLP/gRPC, which metactl does not speak: give the collector's OTLP/HTTP port, 4318 (an HTTP receiver really on 4317: set OTEL_EXPORTER_OTLP_ENDPOINT in extraEnv)" .) -}}
{{- end -}}
{{- $env = append $env (dict "name" "OTEL_EXPORTER_OTLP_ENDPOINT" "value" .) -}}
{{- end -}}
{{- /* values.schema.json refuses a sampler other than the six. */ -}}
{{- with $t.sampler -}}
{{- $env = append $env (dict "name" "OTEL_TRACES_SAMPLER" "value" .) -}}
{{- end -}}
{{- if not (or (kindIs "invalid" $t.samplerArg) (eq (toString $t.samplerArg) "")) -}}
{{- $env = append $env (dict "name" "OTEL_TRACES_SAMPLER_ARG" "value" (toString $t.samplerArg)) -}}
{{- end -}}
{{- if $env -}}{{ toYaml $env }}{{- end -}}
{{- end -}}
