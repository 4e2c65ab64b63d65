#!/usr/bin/env bash
# argocd-manifest.sh CORE_INSTALL_YAML ARGOCD_IMAGE REDIS_IMAGE: prints Argo CD's core install
# (manifests/core-install.yaml of the argo-cd module) adapted to the offline kind cluster:
#  - the argocd and redis images are ours (loaded into kind, never pulled: imagePullPolicy IfNotPresent);
#  - without the ApplicationSet controller (its Deployment, ServiceAccount, RBAC, Service, NetworkPolicy):
#    the smoke tests and scenarios use plain Applications. Its CRD stays, as Argo CD's own RBAC names it.
# Everything else (CRDs, the application controller, the repo server, redis, NetworkPolicies) is upstream's.
set -euo pipefail
in=$1 argocd_image=$2 redis_image=$3
awk -v drop='^  name: argocd-applicationset-controller(-network-policy)?$' '
  function flush() { if (doc != "" && !skip) printf "%s", doc; doc = ""; skip = 0 }
  /^---$/ { flush(); doc = "---\n"; next }
  { if ($0 ~ drop) skip = 1; doc = doc $0 "\n" }
  END { flush() }
' "$in" | sed -E \
  -e "s#^( +image: )quay\.io/argoproj/argocd:v[^ ]+\$#\1$argocd_image#" \
  -e "s#^( +image: )[^ ]*/redis:[^ ]+\$#\1$redis_image#" \
  -e 's#^( +imagePullPolicy: )Always$#\1IfNotPresent#'
