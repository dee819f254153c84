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

{{/*
The acceptance Job's spec, for the Job and for a CronJob's jobTemplate alike: an Indexed Job of
one pod per node, rank = completion index, rank 0 found through the headless Service.
Arguments: a (the acceptance values), chart (.Chart), root ($).
*/}}
{{- define "kube-rdma.acceptanceJobSpec" }}
{{- $a := .a }}
{{- $names := include "kube-rdma.attach" (dict "root" .root "networks" $a.networks "attachments" $a.attachments) | fromJsonArray }}
completionMode: Indexed
completions: {{ $a.nodes }}
parallelism: {{ $a.nodes }}
backoffLimit: 0
activeDeadlineSeconds: {{ $a.activeDeadlineSeconds }}
ttlSecondsAfterFinished: {{ $a.ttlSecondsAfterFinished }}
template:
  metadata:
    labels:
      app: {{ $a.name }}
    annotations:
      {{- $nets := list }}
      {{- range $i, $n := $names }}
      {{- $nets = append $nets (dict "name" $n "interface" (printf "net%d" (add1 $i))) }}
      {{- end }}
      k8s.v1.cni.cncf.io/networks: {{ toJson $nets | quote }}
  spec:
    subdomain: {{ $a.name }}
    restartPolicy: Never
    {{- with $a.nodeSelector }}
    nodeSelector:
      {{- toYaml . | nindent 6 }}
    {{- end }}
    {{- with $a.tolerations }}
    tolerations:
      {{- toYaml . | nindent 6 }}
    {{- end }}
    affinity:
      podAntiAffinity:
        requiredDuringSchedulingIgnoredDuringExecution:
          - labelSelector:
              matchLabels:
                app: {{ $a.name }}
            topologyKey: kubernetes.io/hostname
    {{- if $a.jobImage }}
    {{- if $a.pushGateway }}{{ fail "acceptance.pushGateway needs the validator image's push module: leave acceptance.jobImage empty to push" }}{{ end }}
    initContainers:
      {{- include "kube-rdma.validator-copy" (dict "root" .root) | nindent 6 }}
    {{- end }}
    containers:
      - name: rdma-validate
        {{- if $a.jobImage }}
        # rdma-validate copied from the node image, on the NCCL of the jobs' own image.
        image: {{ $a.jobImage }}
        command: ["/kube-rdma/bin/rdma-validate"]
        {{- else }}
        image: {{ include "kube-rdma.image" (dict "image" $a.image "chart" .chart) }}
        command: ["/usr/local/bin/rdma-validate"]
        {{- end }}
        {{- $args := list "--mode" "acceptance" "--transport" $a.transport "--collective" $a.collective "--size" $a.size "--iters" (toString $a.iters) "--timeout" (toString $a.timeoutSeconds) "--pairs" $a.pairs "--min-fleet-fraction" (toString $a.minFleetFraction) }}
        {{- if $a.sweep.minBytes }}
        {{- $args = concat $args (list "-b" $a.sweep.minBytes "-e" (default $a.sweep.minBytes $a.sweep.maxBytes) "-f" (toString $a.sweep.stepFactor)) }}
        {{- end }}
        {{- if $a.baseline.configMap }}
        {{- $args = concat $args (list "--baseline" "/etc/kuberdma-acceptance/baseline.json" "--baseline-tolerance" (toString $a.baseline.tolerance)) }}
        {{- end }}
        {{- if $a.pushGateway }}
        {{- $args = concat $args (list "--push-gateway" $a.pushGateway) }}
        {{- end }}
        args: {{ toJson (concat $args (list "--require-nccl" "--json" "-")) }}
        env:
          - name: WORLD_SIZE
            value: {{ $a.nodes | quote }}
          - name: JOB_NAME
            valueFrom:
              fieldRef:
                fieldPath: metadata.labels['job-name']
          - name: NCCL_COMM_ID
            value: {{ printf "$(JOB_NAME)-0.%s:%v" $a.name $a.bootstrapPort }}
          - name: NODE_NAME
            valueFrom:
              fieldRef:
                fieldPath: spec.nodeName
          {{- with $a.env }}
          {{- toYaml . | nindent 10 }}
          {{- end }}
        ports:
          - name: nccl-bootstrap
            containerPort: {{ $a.bootstrapPort }}
          - name: coordinator
            containerPort: {{ add1 $a.bootstrapPort }}
        securityContext:
          capabilities:
            add: ["IPC_LOCK"]
        resources:
          limits:
            nvidia.com/gpu: {{ $a.gpus }}
            {{ $a.rdmaResource }}: {{ len $names }}
        {{- if or $a.baseline.configMap $a.jobImage }}
        volumeMounts:
          {{- if $a.baseline.configMap }}
          - name: baseline
            mountPath: /etc/kuberdma-acceptance
            readOnly: true
          {{- end }}
          {{- if $a.jobImage }}
          - name: kube-rdma-bin
            mountPath: /kube-rdma/bin
            readOnly: true
          {{- end }}
        {{- end }}
    {{- if or $a.baseline.configMap $a.jobImage }}
    volumes:
      {{- if $a.baseline.configMap }}
      - name: baseline
        configMap:
          name: {{ $a.baseline.configMap }}
          optional: true
      {{- end }}
      {{- if $a.jobImage }}
      - name: kube-rdma-bin
        emptyDir:
          sizeLimit: 64Mi
      {{- end }}
    {{- end }}
{{- end }}

{{/*
The NetworkAttachmentDefinitions the chart defines, as a JSON list of {name, namespace,
resourceName, config}: `networks` when given, else the `fabric` preset. ib: the seed's rdma-net
as written (no IPAM), attached once per rail. roce: one NAD and one subnet per rail
(<namePrefix>1..<rails>), each with its own IPAM section, so every rail's interface has an address
and its HCA a routable RoCE v2 GID. roce.mode macvlan/ipvlan: each rail's NAD names its HCA
(roce.hcaFormat of the rail's index from 0) and gives every pod a child of that HCA's netdev.
*/}}
{{- define "kube-rdma.networks" -}}
{{- $v := .Values }}
{{- if $v.networks }}
{{- toJson $v.networks }}
{{- else if eq $v.fabric "roce" }}
{{- $r := $v.roce }}
{{- $list := list }}
{{- range $i := until (int $v.rails) }}
{{- $rail := add1 $i }}
{{- $subnet := printf $r.subnetFormat $rail }}
{{- $ipam := dict "type" "host-local" "ranges" (list (list (dict "subnet" $subnet))) }}
{{- if eq $r.ipam "whereabouts" }}{{ $ipam = dict "type" "whereabouts" "range" $subnet }}{{ end }}
{{- $conf := merge (dict "ipam" $ipam) (deepCopy $r.config) }}
{{- if ne $r.mode "move" }}
{{- /* Shared mode: a child of the rail's HCA netdev per pod; the child takes its parent's MTU. */}}
{{- if eq $r.resourceName "rdma/hca" }}{{ fail (printf "roce.mode %s shares each HCA among pods: set roce.resourceName (and trainer/acceptance rdmaResource) to a pool such as rdma/shared, not the per-HCA rdma/hca" $r.mode) }}{{ end }}
{{- $conf = merge (dict "mode" $r.mode "hca" (printf $r.hcaFormat $i)) (omit $conf "mtu") }}
{{- end }}
{{- $list = append $list (dict "name" (printf "%s%d" $r.namePrefix $rail) "namespace" $r.namespace "resourceName" $r.resourceName "config" $conf) }}
{{- end }}
{{- toJson $list }}
{{- else }}
{{- toJson (list $v.ib) }}
{{- end }}
{{- end }}

{{/*
The networks a pod attaches, in order (net1..netN), as a JSON list of names: (dict "root" $
"networks" LIST "attachments" N). An explicit list is taken as it is; otherwise ib attaches the
first network N times (the seed's eight rdma-net attachments) and roce each rail's network once.
*/}}
{{- define "kube-rdma.attach" -}}
{{- if .networks }}
{{- toJson .networks }}
{{- else }}
{{- $nets := include "kube-rdma.networks" .root | fromJsonArray }}
{{- $names := list }}
{{- if and (eq .root.Values.fabric "roce") (not .root.Values.networks) }}
{{- range $nets }}{{ $names = append $names .name }}{{ end }}
{{- else }}
{{- range $i := until (int .attachments) }}{{ $names = append $names (first $nets).name }}{{ end }}
{{- end }}
{{- toJson $names }}
{{- end }}
{{- end }}

{{/*
The init container that copies rdma-validate from the node image into the pod's kube-rdma-bin
emptyDir, so that the next container runs it from the job's own image (and its NCCL).
Args: root (the chart's $), indent.
*/}}
{{- define "kube-rdma.validator-copy" -}}
- name: rdma-validate-copy
  image: {{ include "kube-rdma.image" (dict "image" .root.Values.image "chart" .root.Chart) }}
  {{- with .root.Values.image.pullPolicy }}
  imagePullPolicy: {{ . }}
  {{- end }}
  command: ["/bin/sh", "-c"]
  args: ["cp /usr/local/bin/rdma-validate /kube-rdma/bin/rdma-validate"]
  securityContext:
    readOnlyRootFilesystem: true
    allowPrivilegeEscalation: false
    capabilities:
      drop: ["ALL"]
  volumeMounts:
    - name: kube-rdma-bin
      mountPath: /kube-rdma/bin
{{- end }}
