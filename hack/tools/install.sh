#!/usr/bin/env bash
# Builds, or reuses, the pinned binaries that tests and `remedy-dev` need.
# They live outside the repository, keyed by version, so every clone on this
# machine shares one build. Usage: install.sh [tool ...] (default: all).
# Tools: kubernetes temporal controller-gen workflowcheck prometheus kube-state-metrics
# alertmanager node (promtool is an alias of prometheus: both come from one build).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=versions.env
source "$here/versions.env"
cache=${REMEDY_TOOLS_CACHE:-$HOME/.cache/remedy/tools}
export GOTOOLCHAIN=local GOFLAGS=-mod=mod

log() { printf 'tools: %s\n' "$*"; }

# build NAME DIR BIN... -- COMMAND: runs COMMAND unless every BIN is in DIR.
build() {
	local name=$1 dir=$2; shift 2
	local bins=()
	while [ "$1" != "--" ]; do bins+=("$1"); shift; done
	shift
	local missing=0 b
	for b in "${bins[@]}"; do [ -x "$dir/$b" ] || missing=1; done
	if [ $missing = 0 ]; then
		log "$name: reusing $dir"
		return
	fi
	log "$name: building into $dir (first build on 2 cores can take 15 minutes)"
	local start=$SECONDS tmp="$dir.tmp.$$"
	rm -rf "$tmp"; mkdir -p "$tmp"
	# Build into a temp dir and rename, so an interrupted build is never reused.
	if ! (cd "$here" && OUT="$tmp" "$@"); then
		rm -rf "$tmp"
		log "$name: build FAILED"
		exit 1
	fi
	rm -rf "$dir"; mv "$tmp" "$dir"
	log "$name: built in $((SECONDS - start))s"
}

all=("$@")
sel() { [ ${#all[@]} -eq 0 ] && return 0; local t; for t in "${all[@]}"; do [ "$t" = "$1" ] && return 0; done; return 1; }

if sel kubernetes; then
	# Without these stamps every binary reports v0.0.0-master (kubectl version, /version, node info).
	kv=${KUBERNETES_VERSION#v} stamp=""
	for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
		stamp+=" -X $p.gitVersion=$KUBERNETES_VERSION -X $p.gitMajor=${kv%%.*} -X $p.gitMinor=$(cut -d. -f2 <<<"$kv") -X $p.gitTreeState=clean"
	done
	export KUBE_LDFLAGS="-s$stamp"
	build "kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kubectl $KUBERNETES_VERSION + etcd $ETCD_VERSION" \
		"$cache/kubernetes-$KUBERNETES_VERSION-$KUBERNETES_BUILD" kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl etcd -- \
		sh -c 'go build -trimpath -ldflags="$KUBE_LDFLAGS" -o "$OUT/" k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kubectl && go build -trimpath -ldflags=-s -o "$OUT/etcd" ./etcd'
fi
if sel node; then
	# containerd's shim and ctr come from the same module; CGO_ENABLED=0 needs no C toolchain.
	build "containerd $CONTAINERD_VERSION" "$cache/containerd-$CONTAINERD_VERSION" containerd containerd-shim-runc-v2 ctr -- \
		sh -c 'cd / && CGO_ENABLED=0 GOBIN="$OUT" go install -trimpath -ldflags="-s -X github.com/containerd/containerd/v2/version.Version='"$CONTAINERD_VERSION"'" github.com/containerd/containerd/v2/cmd/containerd@'"$CONTAINERD_VERSION"' github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2@'"$CONTAINERD_VERSION"' github.com/containerd/containerd/v2/cmd/ctr@'"$CONTAINERD_VERSION"
	# The rest of the node comes from the distribution: the OCI runtime, the CNI plugins, iptables.
	pkgs=()
	[ -x /usr/sbin/runc ] || pkgs+=(runc)
	[ -x /usr/lib/cni/bridge ] || pkgs+=(containernetworking-plugins)
	command -v iptables >/dev/null || pkgs+=(iptables)
	if [ ${#pkgs[@]} -gt 0 ]; then
		log "node: installing Debian packages: ${pkgs[*]}"
		if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${pkgs[@]}"; } >&2; then
			log "node: apt-get install ${pkgs[*]} FAILED (root needed)"
			exit 1
		fi
	else
		log "node: reusing runc, containernetworking-plugins, iptables"
	fi
fi
if sel temporal; then
	build "temporal CLI $TEMPORAL_CLI_VERSION" "$cache/temporal-$TEMPORAL_CLI_VERSION" temporal -- \
		sh -c 'cd / && GOBIN="$OUT" go install -trimpath -ldflags=-s github.com/temporalio/cli/cmd/temporal@'"$TEMPORAL_CLI_VERSION"
fi
if sel controller-gen; then
	build "controller-gen $CONTROLLER_GEN_VERSION" "$cache/controller-gen-$CONTROLLER_GEN_VERSION" controller-gen -- \
		sh -c 'cd / && GOBIN="$OUT" go install sigs.k8s.io/controller-tools/cmd/controller-gen@'"$CONTROLLER_GEN_VERSION"
fi
if sel workflowcheck; then
	build "workflowcheck $WORKFLOWCHECK_VERSION" "$cache/workflowcheck-$WORKFLOWCHECK_VERSION" workflowcheck -- \
		sh -c 'cd / && GOBIN="$OUT" go install go.temporal.io/sdk/contrib/tools/workflowcheck@'"$WORKFLOWCHECK_VERSION"
fi
if sel prometheus || sel promtool; then
	# One build of both binaries. remove_all_sd,enable_kubernetes_sd are Prometheus's own tags:
	# they drop the cloud service discoveries (about 240 packages) and keep Kubernetes'. No
	# builtinassets tag: the module ships no UI assets, so the server runs headless (API only).
	pv=${PROMETHEUS_VERSION#v0.} # v0.316.0 is Prometheus 3.16.0
	pv="${pv:0:1}.${pv:1:2}.${pv#*.}"
	export PROM_LDFLAGS="-s -X github.com/prometheus/common/version.Version=$pv -X github.com/prometheus/common/version.Revision=$PROMETHEUS_VERSION -X github.com/prometheus/common/version.Branch=HEAD -X github.com/prometheus/common/version.BuildUser=remedy-tools"
	build "prometheus, promtool $pv ($PROMETHEUS_VERSION)" "$cache/prometheus-$PROMETHEUS_VERSION-$PROMETHEUS_BUILD" prometheus promtool -- \
		sh -c 'cd / && GOBIN="$OUT" go install -trimpath -tags remove_all_sd,enable_kubernetes_sd -ldflags="$PROM_LDFLAGS" github.com/prometheus/prometheus/cmd/prometheus@'"$PROMETHEUS_VERSION"' github.com/prometheus/prometheus/cmd/promtool@'"$PROMETHEUS_VERSION"
fi
if sel kube-state-metrics; then
	# The proxy serves no version list for kube-state-metrics, so `go install @version` fails;
	# hack/tools/ksm is a wrapper module that pins it and builds its main package.
	export KSM_LDFLAGS="-s -X github.com/prometheus/common/version.Version=$KUBE_STATE_METRICS_VERSION -X github.com/prometheus/common/version.Branch=HEAD -X github.com/prometheus/common/version.BuildUser=remedy-tools -X k8s.io/kube-state-metrics/v2/pkg/app.ClientGoVersion=v0.${KUBERNETES_VERSION#v1.}"
	build "kube-state-metrics $KUBE_STATE_METRICS_VERSION" "$cache/kube-state-metrics-$KUBE_STATE_METRICS_VERSION" kube-state-metrics -- \
		sh -c 'cd ksm && CGO_ENABLED=0 go build -trimpath -ldflags="$KSM_LDFLAGS" -o "$OUT/kube-state-metrics" k8s.io/kube-state-metrics/v2'
fi
if sel alertmanager; then
	build "alertmanager, amtool $ALERTMANAGER_VERSION" "$cache/alertmanager-$ALERTMANAGER_VERSION" alertmanager amtool -- \
		sh -c 'cd / && GOBIN="$OUT" go install -trimpath -ldflags=-s github.com/prometheus/alertmanager/cmd/alertmanager@'"$ALERTMANAGER_VERSION"' github.com/prometheus/alertmanager/cmd/amtool@'"$ALERTMANAGER_VERSION"
fi
log "done"
