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

{{/*
repository:tag[@digest], the tag defaulting to the chart's appVersion. Refused without a
repository: the project publishes no image, so a default would only ever be ImagePullBackOff.
Args: image, chart, and optionally what (the value's name in the message).
*/}}
{{- define "kube-rdma.image" -}}
{{- if not .image.repository }}
{{- fail (printf "%s.repository is empty: kube-rdma publishes no image a cluster could pull. Build the node image and push it to a registry your nodes pull from: `make push REGISTRY=registry.example.com/kube-rdma` (deploy/images/push.sh), then install with `-f build/images/image-values.yaml` (docs/install.md#the-node-image)" (.what | default "image")) }}
{{- end }}
{{- $tag := .image.tag | default .chart.AppVersion -}}
{{- if .image.digest }}
{{- printf "%s:%s@%s" .image.repository $tag .image.digest }}
{{- else }}
{{- printf "%s:%s" .image.repository $tag }}
{{- end }}
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
    # rdma-validate needs no API access: no ServiceAccount token in the pods.
    automountServiceAccountToken: false
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
    {{- /* Without a validator image, rdma-validate runs copied into the trainer's image (NCCL's). */}}
    {{- $jobImage := $a.jobImage | default (ternary "" .root.Values.trainer.image (not (empty $a.image.repository))) }}
    {{- if $jobImage }}
    {{- if $a.pushGateway }}{{ fail "acceptance.pushGateway needs the validator image's push module: set acceptance.image.repository to a validator image (deploy/images/Dockerfile.validator) and leave acceptance.jobImage empty" }}{{ end }}
    initContainers:
      {{- include "kube-rdma.validator-copy" (dict "root" .root) | nindent 6 }}
    {{- end }}
    containers:
      - name: rdma-validate
        {{- if $jobImage }}
        # rdma-validate copied from the node image, on the NCCL of the jobs' own image.
        image: {{ $jobImage }}
        command: ["/kube-rdma/bin/rdma-validate"]
        {{- else }}
        image: {{ include "kube-rdma.image" (dict "image" $a.image "chart" .chart "what" "acceptance.image") }}
        command: ["/usr/local/bin/rdma-validate"]
        {{- end }}
        {{- $args := list "--mode" "acceptance" "--transport" $a.transport "--collective" $a.collective "--size" $a.size "--iters" (toString $a.iters) "--timeout" (toString $a.timeoutSeconds) "--pairs" $a.pairs "--min-fleet-fraction" (toString $a.minFleetFraction) "--min-line-rate" (toString $a.minLineRate) }}
        {{- if $a.allowNoGdr }}
        {{- $args = concat $args (list "--allow-no-gdr") }}
        {{- end }}
        {{- if $a.sweep.minBytes }}
        {{- $args = concat $args (list "-b" $a.sweep.minBytes "-e" (default $a.sweep.minBytes $a.sweep.maxBytes) "-f" (toString $a.sweep.stepFactor)) }}
        {{- end }}
        {{- if $a.baseline.configMap }}
        {{- $args = concat $args (list "--baseline" "/etc/kuberdma-acceptance/baseline.json" "--baseline-tolerance" (toString $a.baseline.tolerance)) }}
        {{- end }}
        {{- if $a.taintDevices }}
        {{- if not .root.Values.dra.enabled }}{{ fail "acceptance.taintDevices taints through the DRA driver: set dra.enabled" }}{{ end }}
        {{- $args = concat $args (list "--taint-dir" "/run/kube-rdma/allocations" "--taint-effect" $a.taintEffect) }}
        {{- end }}
        {{- if $a.pushGateway }}
        {{- $args = concat $args (list "--push-gateway" $a.pushGateway) }}
        {{- end }}
        {{- $cabling := or .root.Values.cabling.lldp .root.Values.cabling.nodeLabels .root.Values.cabling.infiniband }}
        {{- if $cabling }}
        {{- $args = concat $args (list "--cabling" "/run/kube-rdma/cabling") }}
        {{- end }}
        {{- if ne $a.transport "verbs" }}
        {{- $args = concat $args (list "--require-nccl") }}
        {{- end }}
        args: {{ toJson (concat $args (list "--json" "-")) }}
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
            {{- if and (eq (int $a.gpus) 0) (ne $a.transport "verbs") }}{{ fail "acceptance.gpus is 0: only the verbs rail sweep (acceptance.transport: verbs) runs without GPUs" }}{{ end }}
            {{- if gt (int $a.gpus) 0 }}
            nvidia.com/gpu: {{ $a.gpus }}
            {{- end }}
            {{- range $res, $n := include "kube-rdma.podResources" (dict "root" .root "names" $names "fallback" $a.rdmaResource) | fromJson }}
            {{ $res }}: {{ $n }}
            {{- end }}
        {{- if or $a.baseline.configMap $a.jobImage $a.taintDevices $cabling }}
        volumeMounts:
          {{- if $a.baseline.configMap }}
          - name: baseline
            mountPath: /etc/kuberdma-acceptance
            readOnly: true
          {{- end }}
          {{- if $a.taintDevices }}
          # This node's verdict file, which the node's DRA driver reads on every scan.
          - name: allocations
            mountPath: /run/kube-rdma/allocations
          {{- end }}
          {{- if $a.jobImage }}
          - name: kube-rdma-bin
            mountPath: /kube-rdma/bin
            readOnly: true
          {{- end }}
          {{- if $cabling }}
          # The node's rails' LLDP neighbours (rdma-device-plugin --lldp): rank 0 names a rail
          # cabled to another rail's leaf. Only this file of the allocations directory.
          - name: cabling
            mountPath: /run/kube-rdma/cabling/cabling.json
            readOnly: true
          {{- end }}
        {{- end }}
    {{- if or $a.baseline.configMap $a.jobImage $a.taintDevices .root.Values.cabling.lldp .root.Values.cabling.nodeLabels .root.Values.cabling.infiniband }}
    volumes:
      {{- if $a.baseline.configMap }}
      - name: baseline
        configMap:
          name: {{ $a.baseline.configMap }}
          optional: true
      {{- end }}
      {{- if $a.taintDevices }}
      - name: allocations
        hostPath:
          path: /run/kube-rdma/allocations
          type: Directory
      {{- end }}
      {{- if $a.jobImage }}
      - name: kube-rdma-bin
        emptyDir:
          sizeLimit: 64Mi
      {{- end }}
      {{- if or .root.Values.cabling.lldp .root.Values.cabling.nodeLabels .root.Values.cabling.infiniband }}
      # FileOrCreate: before the device plugin's first round the file is empty (nothing heard).
      - name: cabling
        hostPath:
          path: /run/kube-rdma/allocations/cabling.json
          type: FileOrCreate
      {{- end }}
    {{- end }}
{{- end }}

{{/*
The NetworkAttachmentDefinitions the chart defines, as a JSON list of {name, namespace,
resourceName, config}: `networks` when given, else the `fabric` preset. ib: the InfiniBand kube-rdma-ib
(no IPAM), attached once per rail. roce: one NAD per rail (<namePrefix>1..<rails>), each with its
rail's addresses (docs/cni.md#rails):
  - roce.pinRails (move mode): NAD i says "rail": i, so it gets the pod's HCA on physical rail i
    whatever order the kubelet allocated them in (the device plugin records each allocation, the
    CNI picks rail i out of it), and rail i's subnet is on rail i's leaf on every node;
  - without it, NAD i gets whichever allocated HCA Multus passes, and its addresses follow that
    HCA's physical rail: "{rail}" in the IPAM range, or the rail's own addresses (roce.ipam node):
    for pods on a subset of the rails (two 4-GPU pods per 8-rail node, one per NUMA node);
  - roce.ipam: whereabouts or nv-ipam (cluster-wide), node (routed rails: the node's own rail
    addresses, declared in nodeConfig.rails), host-local (one node only: roce.singleNode).
roce.mode macvlan/ipvlan: rail i's NAD says "rail": i (or names an HCA by roce.hcaFormat of the
rail's index from 0) and gives every pod a child of that HCA's netdev.
*/}}
{{- define "kube-rdma.networks" -}}
{{- $v := .Values }}
{{- if $v.networks }}
{{- toJson $v.networks }}
{{- else if eq $v.fabric "roce" }}
{{- $r := $v.roce }}
{{- $perRail := and $r.pinRails (eq $r.mode "move") }}
{{- include "kube-rdma.checkAddresses" . }}
{{- $list := list }}
{{- range $i := until (int $v.rails) }}
{{- $rail := add1 $i }}
{{- /* A pool's NAD i may get any rail's HCA: its range names the rail the CNI finds. */}}
{{- $pooled := and (not $perRail) (eq $r.mode "move") }}
{{- $subnet := printf $r.subnetFormat $rail }}
{{- $pool := printf "%s%d" $r.nvIpamPoolPrefix $rail }}
{{- /* host-local keeps a store per network: on one node, a subnet per network keeps them apart. */}}
{{- if and $pooled (ne $r.ipam "host-local") }}
{{- $subnet = replace "%d" "{rail}" $r.subnetFormat }}
{{- $pool = printf "%s{rail}" $r.nvIpamPoolPrefix }}
{{- end }}
{{- $ipam := dict "type" "host-local" "ranges" (list (list (dict "subnet" $subnet))) }}
{{- if eq $r.ipam "whereabouts" }}{{ $ipam = dict "type" "whereabouts" "range" $subnet }}{{ end }}
{{- if eq $r.ipam "nv-ipam" }}{{ $ipam = dict "type" "nv-ipam" "poolName" $pool }}{{ end }}
{{- $conf := merge (dict "ipam" $ipam) (deepCopy $r.config) }}
{{- if eq $r.ipam "node" }}{{ $conf = merge (dict "addresses" "node") (omit $conf "ipam") }}{{ end }}
{{- if $perRail }}{{ $conf = merge (dict "rail" $rail) $conf }}{{ end }}
{{- if ne $r.mode "move" }}
{{- /* Shared mode: a child of the rail's HCA netdev per pod; the child takes its parent's MTU. */}}
{{- if eq $r.resourceName "rdma/hca" }}{{ fail (printf "roce.mode %s shares each HCA among pods: set roce.resourceName (and trainer/acceptance rdmaResource) to a pool such as rdma/shared, not the per-HCA rdma/hca" $r.mode) }}{{ end }}
{{- $conf = merge (dict "mode" $r.mode) (omit $conf "mtu") }}
{{- if $r.hcaFormat }}{{ $conf = merge (dict "hca" (printf $r.hcaFormat $i)) $conf }}{{ else }}{{ $conf = merge (dict "rail" $rail) $conf }}{{ end }}
{{- end }}
{{- $list = append $list (dict "name" (printf "%s%d" $r.namePrefix $rail) "namespace" $r.namespace "resourceName" $r.resourceName "config" $conf) }}
{{- end }}
{{- toJson $list }}
{{- else }}
{{- toJson (list $v.ib) }}
{{- end }}
{{- end }}

{{/*
Refuses a RoCE rendering whose addresses would repeat across nodes: host-local allocates from a
range on each node alone, so the first pod of every node gets the same address and GID.
*/}}
{{- define "kube-rdma.checkAddresses" -}}
{{- $r := .Values.roce }}
{{- if not (has $r.ipam (list "host-local" "whereabouts" "nv-ipam" "node")) }}{{ fail (printf "roce.ipam %q: whereabouts or nv-ipam (cluster-wide ranges), node (routed rails: each node's own rail addresses) or host-local (one node only)" $r.ipam) }}{{ end }}
{{- if and (eq $r.ipam "host-local") (not $r.singleNode) }}{{ fail "roce.ipam host-local allocates from each node's own copy of the range: the first pod on every node gets the same address (and RoCE GID) on every rail, so two nodes cannot talk. Use whereabouts or nv-ipam (cluster-wide), or node (routed rails), or set roce.singleNode=true if every pod runs on one node (docs/install.md#before-you-install)" }}{{ end }}
{{- if and (eq $r.ipam "node") (not .Values.nodeConfig.rails) (not .Values.nodeConfig.nodes) }}{{ fail "roce.ipam node moves each rail's own addresses, configured on the host, into the pod: declare the rails in nodeConfig.rails (a netdev whose address no declared rail has is the node's own and is never moved)" }}{{ end }}
{{- if and (eq $r.ipam "node") (ne $r.mode "move") }}{{ fail (printf "roce.ipam node moves the netdev's addresses with it; roce.mode %s leaves the netdev on the node: use whereabouts or nv-ipam" $r.mode) }}{{ end }}
{{- end }}

{{/*
What a pod attaching `names` asks the device plugin for, as JSON {resource: count}: each network's
resourceName once per attachment (a rail's own resource per rail), `fallback` for networks
without one. Args: root, names, fallback.
*/}}
{{- define "kube-rdma.podResources" -}}
{{- $byName := dict }}
{{- range (include "kube-rdma.networks" .root | fromJsonArray) }}{{ $_ := set $byName .name (.resourceName | default "") }}{{ end }}
{{- $counts := dict }}
{{- range .names }}
{{- $res := get $byName . | default $.fallback }}
{{- $_ := set $counts $res (add1 (get $counts $res | default 0)) }}
{{- end }}
{{- toJson $counts }}
{{- end }}


{{/*
The networks a pod attaches, in order (net1..netN), as a JSON list of names: (dict "root" $
"networks" LIST "attachments" N). An explicit list is taken as it is; otherwise ib attaches the
first network N times (eight kube-rdma-ib attachments) and roce each rail's network once.
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
emptyDir (with its probe modules), so that the next container runs it from the job's own image
(and its NCCL, UCX and MPI).
Args: root (the chart's $), indent.
*/}}
{{- define "kube-rdma.validator-copy" -}}
- name: rdma-validate-copy
  image: {{ include "kube-rdma.image" (dict "image" .root.Values.image "chart" .root.Chart) }}
  {{- with .root.Values.image.pullPolicy }}
  imagePullPolicy: {{ . }}
  {{- end }}
  command: ["/bin/sh", "-c"]
  args: ["cp /usr/local/bin/rdma-validate /usr/local/bin/rdma-validate-*.so /kube-rdma/bin/"]
  securityContext:
    readOnlyRootFilesystem: true
    allowPrivilegeEscalation: false
    capabilities:
      drop: ["ALL"]
  volumeMounts:
    - name: kube-rdma-bin
      mountPath: /kube-rdma/bin
{{- end }}

{{/*
The node's name and Kubernetes address, from the downward API: the node config's per-node entry
and the address the node is known by (never moved into a pod).
*/}}
{{- define "kube-rdma.nodeEnv" -}}
- name: NODE_NAME
  valueFrom:
    fieldRef:
      fieldPath: spec.nodeName
- name: NODE_IP
  valueFrom:
    fieldRef:
      fieldPath: status.hostIP
{{- end }}

{{/*
rdma-device-plugin's config: devicePlugin.config, and with sriov.enabled a per-VF resource
(rdma/<sriov.resourceName>, one slot per VF) beside it; its PF-only resources never hold a VF.
*/}}
{{- define "kube-rdma.devicePluginConfig" -}}
{{- $cfg := deepCopy .Values.devicePlugin.config -}}
{{- if .Values.sriov.enabled -}}
{{- $vf := dict "resourceName" .Values.sriov.resourceName "resourcePrefix" "rdma" "rdmaHcaMax" 1 "policy" "per-hca" "selectors" (dict "vendors" (list "15b3") "drivers" (list "mlx5_core") "functions" (list "vf")) -}}
{{- $_ := set $cfg "configList" (append ($cfg.configList | default list) $vf) -}}
{{- end -}}
{{- toJson $cfg -}}
{{- end }}
