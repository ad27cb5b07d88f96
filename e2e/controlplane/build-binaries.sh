#!/usr/bin/env bash
# Builds the pinned upstream control-plane binaries from the Go module proxy.
#
# No container runtime exists on our machines, so kind cannot run; instead we
# build kube-apiserver, kube-controller-manager, kube-scheduler, kubectl and etcd
# from source through small wrapper modules.  k8s.io/kubernetes replaces every
# k8s.io/* staging module with a local path, which a dependent module ignores,
# so the wrapper pins each staging module to the matching v0.x.y release.
#
# `node` builds what the real node needs beside Debian's containerd (realnode.py):
# kubelet and kube-proxy from the same pinned Kubernetes version (`kubelet`: their own
# directory, so the control plane's cache stays valid without them) and CoreDNS
# (`coredns`).
# `netpol` builds kube-router, which the real node runs in firewall-only mode as its
# NetworkPolicy engine (realnode_policy.py).
# `otelcol` builds the OpenTelemetry Collector the traces tests export to (otelcol/).
#
# Output: $AGENTCHAIN_CACHE/bin/<component>-<version>/ (default ~/.cache/agentchain).
# A present binary that reports the expected version is reused: builds happen
# once per machine.  Prints the bin directory on the last line of stdout.
# Each component builds under a lock of its own, so two builds of one component
# (concurrent test sessions) never clobber each other's half-built output, while
# different components may build at once (a demo and a test run starting together).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=versions.env
source "$here/versions.env"
cache="${AGENTCHAIN_CACHE:-$HOME/.cache/agentchain}"
# No DWARF: every binary is linked stripped (-s -w), and generating it costs the
# compiler about a tenth of a cold build (kube-router: 269 against 302 CPU seconds).
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS="-mod=mod -gcflags=all=-dwarf=false"
export GOPATH="${GOPATH:-$HOME/go}"

log() { printf '[build-binaries] %s\n' "$*" >&2; }

mkdir -p "$cache"

# Never pipe a binary into `grep -q`: grep exits at the first match, the binary
# gets SIGPIPE, and pipefail turns a correct version into a failed check.
reports() { local out; out="$("$@" 2>/dev/null || true)"; [[ "$out" == *"$REPLY_WANT"* ]]; }
has_version() { REPLY_WANT="$1"; shift; reports "$@"; }

k8s_dir="$cache/bin/kubernetes-$KUBERNETES_VERSION"
etcd_dir="$cache/bin/etcd-$ETCD_VERSION"
helm_dir="$cache/bin/helm-$HELM_VERSION"
node_dir="$cache/bin/kubernetes-node-$KUBERNETES_VERSION"
# Keyed by its main too: the plugins it is built with (coredns/main.go).
coredns_key="$(sha256sum <"$here/coredns/main.go" | cut -c1-12)"
coredns_dir="$cache/bin/coredns-$COREDNS_VERSION-$coredns_key"
kube_router_dir="$cache/bin/kube-router-$KUBE_ROUTER_VERSION"
# Keyed by the sources too: a changed main.go or go.mod builds a new binary.
otelcol_key="$(cat "$here/otelcol/main.go" "$here/otelcol/go.mod" | sha256sum | cut -c1-12)"
otelcol_dir="$cache/bin/otelcol-$OTELCOL_VERSION-$otelcol_key"

kubernetes_ok() {
  for b in kube-apiserver kube-controller-manager kube-scheduler; do
    [[ -x "$k8s_dir/$b" ]] || return 1
    has_version "Kubernetes $KUBERNETES_VERSION" "$k8s_dir/$b" --version || return 1
  done
  [[ -x "$k8s_dir/kubectl" ]] && has_version "$KUBERNETES_VERSION" "$k8s_dir/kubectl" version --client
}

kubelet_ok() {
  for b in kubelet kube-proxy; do
    [[ -x "$node_dir/$b" ]] || return 1
    has_version "Kubernetes $KUBERNETES_VERSION" "$node_dir/$b" --version || return 1
  done
}

coredns_ok() {
  [[ -x "$coredns_dir/coredns" ]] && has_version "CoreDNS-${COREDNS_VERSION#v}" "$coredns_dir/coredns" -version
}

# kube-router prints its version on stderr, so this check reads both streams.
kube_router_ok() {
  [[ -x "$kube_router_dir/kube-router" ]] || return 1
  local out; out="$("$kube_router_dir/kube-router" --version 2>&1 || true)"
  [[ "$out" == *"version $KUBE_ROUTER_VERSION,"* ]]
}

otelcol_ok() {
  [[ -x "$otelcol_dir/otelcol" ]] && has_version "otelcol version $OTELCOL_VERSION" "$otelcol_dir/otelcol" --version
}

etcd_ok() {
  [[ -x "$etcd_dir/etcd" ]] && has_version "etcd Version: ${ETCD_VERSION#v}" "$etcd_dir/etcd" --version
}

helm_ok() {
  [[ -x "$helm_dir/helm" ]] && has_version "$HELM_VERSION" "$helm_dir/helm" version --short
}

# build_k8s_commands DIR CMD...: k8s.io/kubernetes/cmd/CMD for each CMD into DIR.
build_k8s_commands() {
  local dir="$1"; shift
  local work; work="$(mktemp -d)"
  log "building Kubernetes $KUBERNETES_VERSION ($*); the first build is the long one (README)"
  local minor="${KUBERNETES_VERSION#v1.}"; minor="${minor%%.*}"
  local staging="v0.${KUBERNETES_VERSION#v1.}"
  (
    cd "$work"
    go mod init agentchain.local/k8sbuild >/dev/null 2>&1
    log "resolving k8s.io/kubernetes@$KUBERNETES_VERSION from the module proxy"
    local gomod
    gomod="$(go mod download -json "k8s.io/kubernetes@$KUBERNETES_VERSION" | sed -n 's/.*"GoMod": "\(.*\)",/\1/p')"
    {
      echo "require k8s.io/kubernetes $KUBERNETES_VERSION"
      echo "replace ("
      grep -E '^\s*k8s\.io/[a-z0-9-]+ => \./staging/' "$gomod" | awk -v v="$staging" '{print "\t" $1 " => " $1 " " v}'
      echo ")"
    } >>go.mod
    local pkg="k8s.io/component-base/version"
    local ldflags="-s -w -X $pkg.gitVersion=$KUBERNETES_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
    ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
    ldflags+=" -X k8s.io/client-go/pkg/version.gitVersion=$KUBERNETES_VERSION"
    mkdir -p "$dir.tmp"
    for cmd in "$@"; do
      log "go build $cmd ..."
      local t0=$SECONDS
      go build -trimpath -ldflags "$ldflags" -o "$dir.tmp/$cmd" "k8s.io/kubernetes/cmd/$cmd"
      log "built $cmd in $((SECONDS - t0))s"
    done
  )
  rm -rf "$dir" && mv "$dir.tmp" "$dir"
  rm -rf "$work"
}

build_kubernetes() {
  build_k8s_commands "$k8s_dir" kube-apiserver kube-controller-manager kube-scheduler kubectl
}

build_kubelet() {
  build_k8s_commands "$node_dir" kubelet kube-proxy
}

# CoreDNS from the pinned module, with the plugins coredns/main.go imports (the real
# node's Corefile's), not upstream's main, which compiles in every plugin it ships.
build_coredns() {
  local work; work="$(mktemp -d)"
  log "building CoreDNS $COREDNS_VERSION (github.com/coredns/coredns, the node's plugins)"
  cp "$here/coredns/main.go" "$work/"
  (
    cd "$work"
    go mod init agentchain.local/corednsbuild >/dev/null 2>&1
    echo "require github.com/coredns/coredns $COREDNS_VERSION" >>go.mod
    mkdir -p "$coredns_dir.tmp"
    go build -trimpath -ldflags "-s -w" -o "$coredns_dir.tmp/coredns" .
  )
  rm -rf "$coredns_dir" && mv "$coredns_dir.tmp" "$coredns_dir"
  rm -rf "$work"
}

# kube-router's main package is in cmd/kube-router; its version is a linker variable.
build_kube_router() {
  local work; work="$(mktemp -d)"
  log "building kube-router $KUBE_ROUTER_VERSION (github.com/cloudnativelabs/kube-router/v2)"
  (
    cd "$work"
    go mod init agentchain.local/kuberouterbuild >/dev/null 2>&1
    echo "require github.com/cloudnativelabs/kube-router/v2 $KUBE_ROUTER_VERSION" >>go.mod
    mkdir -p "$kube_router_dir.tmp"
    local pkg="github.com/cloudnativelabs/kube-router/v2/pkg/version"
    go build -trimpath -ldflags "-s -w -X $pkg.Version=$KUBE_ROUTER_VERSION -X $pkg.BuildDate=1970-01-01T00:00:00Z" \
      -o "$kube_router_dir.tmp/kube-router" github.com/cloudnativelabs/kube-router/v2/cmd/kube-router
  )
  rm -rf "$kube_router_dir" && mv "$kube_router_dir.tmp" "$kube_router_dir"
  rm -rf "$work"
}

# The collector's main package and its pinned go.mod/go.sum live in e2e/controlplane/otelcol;
# it is built from a copy, so the build writes nothing into the clone.
build_otelcol() {
  local work; work="$(mktemp -d)"
  log "building the OpenTelemetry Collector $OTELCOL_VERSION (OTLP receiver, file exporter)"
  cp "$here/otelcol/main.go" "$here/otelcol/go.mod" "$here/otelcol/go.sum" "$work/"
  mkdir -p "$otelcol_dir.tmp"
  (cd "$work" && go build -mod=readonly -trimpath -ldflags "-s -w" -o "$otelcol_dir.tmp/otelcol" .)
  rm -rf "$otelcol_dir" && mv "$otelcol_dir.tmp" "$otelcol_dir"
  rm -rf "$work"
}

build_etcd() {
  local work; work="$(mktemp -d)"
  log "building etcd $ETCD_VERSION (go.etcd.io/etcd/server/v3)"
  (
    cd "$work"
    go mod init agentchain.local/etcdbuild >/dev/null 2>&1
    echo "require go.etcd.io/etcd/server/v3 $ETCD_VERSION" >>go.mod
    mkdir -p "$etcd_dir.tmp"
    go build -trimpath -ldflags "-s -w" -o "$etcd_dir.tmp/etcd" go.etcd.io/etcd/server/v3
  )
  rm -rf "$etcd_dir" && mv "$etcd_dir.tmp" "$etcd_dir"
  rm -rf "$work"
}

build_helm() {
  local work; work="$(mktemp -d)"
  log "building helm $HELM_VERSION (helm.sh/helm/v3)"
  (
    cd "$work"
    go mod init agentchain.local/helmbuild >/dev/null 2>&1
    echo "require helm.sh/helm/v3 $HELM_VERSION" >>go.mod
    mkdir -p "$helm_dir.tmp"
    go build -trimpath -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION" \
      -o "$helm_dir.tmp/helm" helm.sh/helm/v3/cmd/helm
  )
  rm -rf "$helm_dir" && mv "$helm_dir.tmp" "$helm_dir"
  rm -rf "$work"
}

# ensure NAME WHAT DIR: NAME's binaries in DIR (NAME_ok says they report the pinned
# version), built by build_NAME unless present, under NAME's own lock.
ensure() {
  local name=$1 what=$2 dir=$3
  (
    exec 9>"$cache/.build-$name.lock"
    if ! flock -n 9; then
      log "another build of $what holds $cache/.build-$name.lock; waiting for it"
      flock 9
    fi
    if "${name}_ok"; then log "$what cached in $dir"; exit 0; fi
    "build_$name"
    "${name}_ok" || { log "the $what build does not report that version"; exit 1; }
  )
}

want="${1:-all}"
case "$want" in
  all)
    ensure etcd "etcd $ETCD_VERSION" "$etcd_dir"
    ensure kubernetes "Kubernetes $KUBERNETES_VERSION" "$k8s_dir"
    echo "$k8s_dir:$etcd_dir:$helm_dir" ;;
  etcd) ensure etcd "etcd $ETCD_VERSION" "$etcd_dir"; echo "$k8s_dir:$etcd_dir:$helm_dir" ;;
  kubernetes) ensure kubernetes "Kubernetes $KUBERNETES_VERSION" "$k8s_dir"; echo "$k8s_dir:$etcd_dir:$helm_dir" ;;
  helm) ensure helm "helm $HELM_VERSION" "$helm_dir"; echo "$k8s_dir:$etcd_dir:$helm_dir" ;;
  node)
    ensure kubelet "kubelet, kube-proxy $KUBERNETES_VERSION" "$node_dir"
    ensure coredns "CoreDNS $COREDNS_VERSION" "$coredns_dir"
    # The node's own line: its callers (realnode.py) read the last line.
    echo "$node_dir:$coredns_dir" ;;
  kubelet) ensure kubelet "kubelet, kube-proxy $KUBERNETES_VERSION" "$node_dir"; echo "$node_dir" ;;
  coredns) ensure coredns "CoreDNS $COREDNS_VERSION" "$coredns_dir"; echo "$coredns_dir" ;;
  otelcol) ensure otelcol "otelcol $OTELCOL_VERSION" "$otelcol_dir"; echo "$otelcol_dir" ;;
  # The policy engine's own line: realnode_policy.py reads the last line.
  netpol) ensure kube_router "kube-router $KUBE_ROUTER_VERSION" "$kube_router_dir"; echo "$kube_router_dir" ;;
  *) log "unknown target $want (all, etcd, kubernetes, helm, node, kubelet, coredns, otelcol, netpol)"; exit 2 ;;
esac
