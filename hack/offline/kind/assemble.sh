#!/usr/bin/env bash
# Assembles the kind node image by hand, following kind's images/base/Dockerfile and its node-image builder
# (`kind build node-image` fetches etcd, coredns, pause and kindnetd from registries, so it cannot run here):
# the same files, units and containerd config, with the control-plane images pre-imported into containerd.
# Usage: assemble.sh ROOTFS_TAR IMAGE
. "$(dirname "${BASH_SOURCE[0]}")/../../lib.sh"; . "$HACK_DIR/offline/kind/env.sh"
ROOTFS_TAR=$1 NODE_IMAGE=$2
PROVISIONER_IMAGE=$(cat "$KO_IMAGES/hostpath-provisioner.ref")
KIND_SRC=$(go env GOMODCACHE)/sigs.k8s.io/kind@$KIND_VERSION
[ -d "$KIND_SRC" ] || go mod download sigs.k8s.io/kind@$KIND_VERSION
F=$KIND_SRC/images/base/files
R=$KO_BUILD/node-rootfs; rm -rf "$R"; mkdir -p "$R"
tar -C "$R" -xf "$ROOTFS_TAR"
# kind's files, with the Dockerfile's modes
install -m 0755 "$F"/usr/local/bin/* "$R/usr/local/bin/"
mkdir -p "$R/kind/bin"; cp -r "$F/kind/." "$R/kind/"; chmod 0644 "$R/kind/README.txt"; chmod 0755 "$R/kind" "$R/kind/bin" "$R"/kind/bin/*
mkdir -p "$R/LICENSES"; cp "$F"/LICENSES/* "$R/LICENSES/"
install -m 0644 "$F/etc/crictl.yaml" "$R/etc/"
mkdir -p "$R/etc/containerd" "$R/etc/default" "$R/etc/sysctl.d" "$R/etc/systemd/system/kubelet.service.d"
install -m 0644 "$F/etc/containerd/config.toml" "$R/etc/containerd/"
install -m 0644 "$F/etc/default/kubelet" "$R/etc/default/"
install -m 0644 "$F"/etc/sysctl.d/* "$R/etc/sysctl.d/"
install -m 0644 "$F"/etc/systemd/system/*.service "$F"/etc/systemd/system/*.slice "$R/etc/systemd/system/"
install -m 0644 "$F"/etc/systemd/system/kubelet.service.d/* "$R/etc/systemd/system/kubelet.service.d/"
# binaries: containerd 2.x and crictl built here; Debian's runc and CNI plugins; Kubernetes
install -m 0755 "$KO_BIN"/{containerd,ctr,containerd-shim-runc-v2,crictl} "$R/usr/local/bin/"
ln -sf /usr/sbin/runc "$R/usr/local/sbin/runc"
mkdir -p "$R/opt/cni"; rm -rf "$R/opt/cni/bin"; ln -s /usr/lib/cni "$R/opt/cni/bin"
install -m 0755 "$KO_BIN"/{kubeadm,kubelet,kubectl} "$R/usr/bin/"
chroot "$R" /bin/sh -c 'systemctl enable kubelet.service containerd.service undo-mount-hacks.service && systemctl mask systemd-binfmt.service'
[ -e "$R/sbin/init" ] || ln -s /usr/lib/systemd/systemd "$R/sbin/init"
mkdir -p "$R/etc/kubernetes/manifests"
chroot "$R" /bin/sh -c 'ctr oci spec | jq ".hooks.createContainer[.hooks.createContainer| length] |= . + {\"path\": \"/kind/bin/mount-product-files.sh\"}" | jq "del(.process.rlimits)" > /etc/containerd/cri-base.json'
sed -i "s#sandbox_image = .*#sandbox_image = \"registry.k8s.io/pause:$PAUSE_TAG\"#" "$R/etc/containerd/config.toml"
# On a host whose capability bounding set lacks CAP_SYS_RESOURCE nothing may lower oom_score_adj below 0:
# containerd must clamp what kubelet asks for (-998/-997 for pause and critical pods), or runc init dies
# ("can't get final child's PID from pipe: EOF"). It is harmless where the capability exists.
sed -i 's/restrict_oom_score_adj = false/restrict_oom_score_adj = true/' "$R/etc/containerd/config.toml"
grep -q 'restrict_oom_score_adj = true' "$R/etc/containerd/config.toml"
printf '%s' "$K8S_VERSION" >"$R/kind/version"
mkdir -p "$R/kind/manifests" "$R/etc/cni/net.d"
# Pod network: kindnetd's module is not served by the Go module proxy, so a static bridge conflist for a
# single-node cluster (10.244.0.0/24 is the first node CIDR of kind's default pod subnet).
cat >"$R/etc/cni/net.d/10-premigrate-bridge.conflist" <<'EOC'
{
  "cniVersion": "1.0.0",
  "name": "premigrate-bridge",
  "plugins": [
    { "type": "bridge", "bridge": "kbr0", "isGateway": true, "ipMasq": true, "hairpinMode": true,
      "ipam": { "type": "host-local", "ranges": [[{ "subnet": "10.244.0.0/24" }]], "routes": [{ "dst": "0.0.0.0/0" }] } },
    { "type": "portmap", "capabilities": { "portMappings": true } }
  ]
}
EOC
# kind applies /kind/manifests/default-cni.yaml unless the default CNI is disabled: make it a record only
cat >"$R/kind/manifests/default-cni.yaml" <<'EOC'
apiVersion: v1
kind: ConfigMap
metadata:
  name: premigrate-node-cni
  namespace: kube-system
data:
  cni: "static bridge + host-local 10.244.0.0/24, baked into the node image (single node)"
EOC
# storage: kind applies this file at cluster creation. kind's local-path-provisioner is not served by the Go
# module proxy, so the default class is served by hack/offline/hostpath-provisioner, pre-imported below.
cat >"$R/kind/manifests/default-storage.yaml" <<EOC
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: standard
  annotations:
    storageclass.kubernetes.io/is-default-class: "true"
provisioner: premigrate.io/hostpath-provisioner
reclaimPolicy: Delete
volumeBindingMode: Immediate
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: hostpath-provisioner
  namespace: kube-system
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: premigrate:hostpath-provisioner
rules:
  - apiGroups: [""]
    resources: [persistentvolumeclaims]
    verbs: [get, list]
  - apiGroups: [""]
    resources: [persistentvolumes]
    verbs: [get, list, create, delete]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: premigrate:hostpath-provisioner
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: premigrate:hostpath-provisioner
subjects:
  - kind: ServiceAccount
    name: hostpath-provisioner
    namespace: kube-system
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: hostpath-provisioner
  namespace: kube-system
spec:
  replicas: 1
  selector:
    matchLabels: {app: hostpath-provisioner}
  template:
    metadata:
      labels: {app: hostpath-provisioner}
    spec:
      serviceAccountName: hostpath-provisioner
      tolerations:
        - operator: Exists
      containers:
        - name: provisioner
          image: $PROVISIONER_IMAGE
          imagePullPolicy: IfNotPresent
          args: [--storage-class=standard, --root=/var/local-path]
          volumeMounts:
            - {name: volumes, mountPath: /var/local-path}
      volumes:
        - name: volumes
          hostPath: {path: /var/local-path, type: DirectoryOrCreate}
EOC
# pre-import the control-plane images into the node's containerd (namespace k8s.io), as kind's builder does,
# with a temporary containerd on the host whose root is the node's /var/lib/containerd
ST=$KO_BUILD/ctrd-import; rm -rf "$ST"; mkdir -p "$ST"
cat >"$ST/config.toml" <<EOC
version = 3
root = "$R/var/lib/containerd"
state = "$ST/state"
disabled_plugins = ["io.containerd.grpc.v1.cri", "io.containerd.cri.v1.runtime", "io.containerd.cri.v1.images", "io.containerd.podsandbox.controller.v1.podsandbox", "io.containerd.shim.v1.manager"]
[grpc]
  address = "$ST/containerd.sock"
EOC
"$KO_BIN/containerd" --config "$ST/config.toml" >"$ST/containerd.log" 2>&1 &
CPID=$!
trap 'kill $CPID 2>/dev/null || true' EXIT
for _ in $(seq 1 30); do [ -S "$ST/containerd.sock" ] && break; sleep 0.5; done
for img in "$KO_IMAGES"/{kube-apiserver,kube-controller-manager,kube-scheduler,kube-proxy,etcd,coredns,pause,hostpath-provisioner}.tar; do
  "$KO_BIN/ctr" --address "$ST/containerd.sock" -n k8s.io images import --label=io.cri-containerd.pinned=pinned \
    --all-platforms --no-unpack "$img"
done
"$KO_BIN/ctr" --address "$ST/containerd.sock" -n k8s.io images ls -q
kill $CPID; wait $CPID || true; trap - EXIT
tar -C "$R" --numeric-owner -c . | docker import --change 'ENV container=docker' \
  --change 'ENTRYPOINT [ "/usr/local/bin/entrypoint", "/sbin/init" ]' - "$NODE_IMAGE-nostop"
# dockerd 20.10 refuses STOPSIGNAL in `docker import --change`: add it with a metadata-only legacy build
printf 'FROM %s-nostop\nSTOPSIGNAL SIGRTMIN+3\n' "$NODE_IMAGE" | DOCKER_BUILDKIT=0 docker build -q -t "$NODE_IMAGE" -
docker rmi "$NODE_IMAGE-nostop" >/dev/null || true
rm -rf "$R" "$ST"
docker image ls "$NODE_IMAGE"
