#!/usr/bin/env bash
# Mints a development CA and a serving certificate for trainenv, then prints the caBundle.
#
#   certs/mint.sh [--force] [--days N] [--namespace NS] [--static-overlay OVERLAY] [DIR]
#
# DIR defaults to the directory of this script.
# Writes DIR/ca.crt, DIR/ca.key, DIR/tls.crt, DIR/tls.key (ECDSA P-256). Existing files are
# kept unless --force is given. The serving certificate's names cover a local run and the
# in-cluster Service: localhost, 127.0.0.1, ::1, trainenv.NS.svc and trainenv.NS.svc.cluster.local,
# NS being --namespace (default trainenv-system: the namespace your kustomization installs
# trainenv into). Private keys are git-ignored; never commit them.
# Keys are written 0600 for the user who runs this: the image's uid 65532 cannot read them
# mounted as they are. A Secret volume (0644 by default) can; for a container run by hand,
# mount a 0644 copy (docs/deploy.md, "The key and uid 65532"; scripts/image.sh does so).
# --static-overlay also writes tls.crt, tls.key and ca-bundle.yaml (the webhook's caBundle)
# into OVERLAY, normally manifests/overlays/static-certs.
set -euo pipefail

force=0
days=365
overlay=""
namespace=trainenv-system
dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
while [ $# -gt 0 ]; do
  case "$1" in
    --force) force=1 ;;
    --days) days="$2"; shift ;;
    --static-overlay) overlay="$(cd "$2" && pwd)"; shift ;;
    --namespace) namespace="$2"; shift ;;
    -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "mint.sh: unknown flag $1" >&2; exit 2 ;;
    *) dir="$1" ;;
  esac
  shift
done
mkdir -p "$dir"
cd "$dir"

if [ "$force" = 0 ] && [ -s ca.crt ] && [ -s tls.crt ] && [ -s tls.key ]; then
  echo "certs: keeping the existing certificates in $dir (--force mints new ones)" >&2
else
  umask 077
  service=trainenv
  openssl req -x509 -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 \
    -keyout ca.key -out ca.crt -days "$days" -subj "/CN=trainenv development CA" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
  openssl req -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 \
    -keyout tls.key -out tls.csr -subj "/CN=${service}.${namespace}.svc" 2>/dev/null
  cat > tls.cnf <<CNF
basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature
extendedKeyUsage=serverAuth
subjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1,DNS:${service},DNS:${service}.${namespace},DNS:${service}.${namespace}.svc,DNS:${service}.${namespace}.svc.cluster.local
CNF
  openssl x509 -req -in tls.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days "$days" \
    -extfile tls.cnf -out tls.crt 2>/dev/null
  rm -f tls.csr tls.cnf ca.srl
  chmod 0644 ca.crt tls.crt
  echo "certs: minted a development CA and serving certificate in $dir" >&2
fi
bundle="$(base64 -w0 < ca.crt)"
if [ -n "$overlay" ]; then
  cp tls.crt tls.key "$overlay/"
  cat > "$overlay/ca-bundle.yaml" <<YAML
- op: add
  path: /webhooks/0/clientConfig/caBundle
  value: $bundle
- op: add
  path: /webhooks/1/clientConfig/caBundle
  value: $bundle
YAML
  echo "certs: filled $overlay (tls.crt, tls.key, ca-bundle.yaml)" >&2
fi
echo "caBundle: $bundle"
