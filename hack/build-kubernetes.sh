#!/usr/bin/env bash
# Builds kube-apiserver, kube-scheduler and kubectl 1.20.2 from Debian's kubernetes source package
# and caches them outside the checkout, so only a fresh machine pays the ~8 minute build.
# Prints the directory holding the binaries.
set -euo pipefail

K8S_VERSION=1.20.2
# Changes when the build changes, so that a cache built the old way is rebuilt.
BUILD_ID="$K8S_VERSION+reflect2-1.0.2"
CACHE_DIR=${KUBESCHED_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kubesched}
OUT=$CACHE_DIR/kubernetes-$K8S_VERSION/bin
WANT=(kube-apiserver kube-scheduler kubectl)

have_all() {
  local b
  for b in "${WANT[@]}"; do [ -x "$OUT/$b" ] || return 1; done
  [ "$(cat "$OUT/BUILD_ID" 2>/dev/null)" = "$BUILD_ID" ]
}

if have_all; then echo "$OUT"; exit 0; fi

log() { echo "build-kubernetes: $*" >&2; }
SUDO=""
[ "$(id -u)" = 0 ] || SUDO=sudo

# Source entries mirror the machine's own binary ones, so no archive host is named here.
if ! grep -rqs '^Types:.*deb-src' /etc/apt/sources.list.d/ && ! grep -qs '^deb-src' /etc/apt/sources.list; then
  log "adding deb-src entries beside the deb ones"
  if [ -f /etc/apt/sources.list.d/debian.sources ]; then
    sed 's/^Types: deb$/Types: deb-src/' /etc/apt/sources.list.d/debian.sources \
      | $SUDO tee /etc/apt/sources.list.d/kubesched-src.sources >/dev/null
  else
    sed -n 's/^deb /deb-src /p' /etc/apt/sources.list | $SUDO tee /etc/apt/sources.list.d/kubesched-src.list >/dev/null
  fi
fi
log "apt-get update and install (golang-go etcd-server rsync openssl dpkg-dev reflect2)"
$SUDO apt-get update -qq >&2
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq golang-go etcd-server rsync openssl dpkg-dev make \
  golang-github-modern-go-reflect2-dev >&2

WORK=$(mktemp -d "${TMPDIR:-/tmp}/kubesched-k8s-build.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"
log "fetching the kubernetes source package into $WORK"
apt-get source --download-only kubernetes >&2
ORIG=$(ls kubernetes_*.orig.tar.gz | head -n 1)
mkdir src
tar -xzf "$ORIG" -C src --strip-components=1
cd src
[ -f CHANGELOG/CHANGELOG-1.20.md ] || { log "unexpected source layout"; exit 1; }

# The vendored reflect2 1.0.1 breaks on Go >= 1.18: kube-apiserver panics in reflect.makemap as
# soon as a CRD's OpenAPI schema is published (modern-go/reflect2 issue 23). 1.0.2 fixes it and
# keeps the API; Debian packages it.
REFLECT2=/usr/share/gocode/src/github.com/modern-go/reflect2
[ -f "$REFLECT2/go_above_118.go" ] || { log "reflect2 >= 1.0.2 not found in $REFLECT2"; exit 1; }
rm -rf vendor/github.com/modern-go/reflect2
cp -r "$REFLECT2" vendor/github.com/modern-go/reflect2
rm -f vendor/github.com/modern-go/reflect2/go.mod

# GOPATH mode, as Debian builds it; the version is stamped so `--version` tells the truth.
mkdir -p .go/src/k8s.io
ln -s ../../.. .go/src/k8s.io/kubernetes
cd .go/src/k8s.io/kubernetes
log "building ${WANT[*]} (about 8 minutes on 2 cores)"
env GOPATH="$WORK/src/.go" GO111MODULE=off CGO_ENABLED=0 GOFLAGS= \
  KUBE_GIT_VERSION="v$K8S_VERSION" KUBE_GIT_TREE_STATE=clean KUBE_GIT_MAJOR=1 KUBE_GIT_MINOR=20 \
  make WHAT="cmd/kube-apiserver cmd/kube-scheduler cmd/kubectl" >&2

mkdir -p "$OUT.tmp"
for b in "${WANT[@]}"; do cp "_output/bin/$b" "$OUT.tmp/"; done
echo "$BUILD_ID" >"$OUT.tmp/BUILD_ID"
rm -rf "$OUT"
mv "$OUT.tmp" "$OUT"
have_all
log "cached in $OUT"
echo "$OUT"
