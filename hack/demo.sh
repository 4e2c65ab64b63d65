#!/usr/bin/env bash
# The demo: install the chart with its defaults (the demo app and its embedded PostgreSQL) on the kind cluster
# of `make cluster`, upgrade it to the next app version (a new migration), and show it working:
# the migration's log, the gate's log, the schema, and a record written and read back through the Service.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
export PATH=$REPO_ROOT/bin:$PATH
export KUBECONFIG=${KUBECONFIG_DEMO:-$PREMIGRATE_CACHE/kubeconfig}
apt_install curl
NS=premigrate-demo REL=demo CHART=$REPO_ROOT/charts/premigrate
LOCAL_PORT=${DEMO_PORT:-18080}

kubectl get ns "$NS" >/dev/null 2>&1 || kubectl create ns "$NS" >/dev/null
kubectl label ns "$NS" pod-security.kubernetes.io/enforce=restricted --overwrite >/dev/null
if helm status "$REL" -n "$NS" >/dev/null 2>&1; then
  say "release $REL exists in $NS: uninstalling it to start the demo afresh"
  helm uninstall "$REL" -n "$NS" --wait >/dev/null
  kubectl delete job,pvc,configmap,serviceaccount,role,rolebinding -n "$NS" -l app.kubernetes.io/instance="$REL" --ignore-not-found >/dev/null
fi

say "1/4 helm install $REL (defaults: demo app v1 + embedded PostgreSQL), --wait"
step demo-install helm install "$REL" "$CHART" -n "$NS" --wait --timeout 5m
helm status "$REL" -n "$NS" | sed -n '/NOTES:/,$p' | head -20
kubectl get pods -n "$NS" -o wide

say "2/4 helm upgrade $REL --set image.tag=v2 (a new migration: records.author), --wait"
step demo-upgrade helm upgrade "$REL" "$CHART" -n "$NS" --reuse-values --set image.tag=v2 --wait --timeout 5m
say "the migration's log (kubectl logs -n $NS job/$REL-premigrate-migrate -c migrate):"
kubectl logs -n "$NS" "job/$REL-premigrate-migrate" -c migrate | sed 's/^/    /'
pod=$(kubectl get pods -n "$NS" -l app.kubernetes.io/instance="$REL",app.kubernetes.io/component=app -o jsonpath='{.items[0].metadata.name}')
say "the gate's log on $pod:"
kubectl logs -n "$NS" "$pod" -c wait-for-migration | sed 's/^/    /'

say "3/4 the schema, read from the embedded PostgreSQL:"
kubectl exec -n "$NS" "$REL-premigrate-postgresql-0" -- psql -U premigrate -d premigrate -c \
  'select version, applied_at, duration_ms from schema_migrations order by version' | sed 's/^/    /'

say "4/4 the app through its Service (kubectl port-forward on 127.0.0.1:$LOCAL_PORT):"
kubectl port-forward -n "$NS" "svc/$REL-premigrate" "$LOCAL_PORT:80" >"$LOGS/demo-port-forward.log" 2>&1 &
pf=$!; trap 'kill $pf 2>/dev/null || true' EXIT
for _ in $(seq 1 30); do curl -fsS "http://127.0.0.1:$LOCAL_PORT/readyz" >/dev/null 2>&1 && break; sleep 0.5; done
echo "    POST /records -> $(curl -fsS -X POST -H 'content-type: application/json' -d '{"body":"hello from the demo"}' "http://127.0.0.1:$LOCAL_PORT/records")"
id=$(curl -fsS -X POST -H 'content-type: application/json' -d '{"body":"second"}' "http://127.0.0.1:$LOCAL_PORT/records" | sed 's/[^0-9]//g')
echo "    GET /records/$id -> $(curl -fsS "http://127.0.0.1:$LOCAL_PORT/records/$id")"
echo "    GET /readyz -> $(curl -fsS "http://127.0.0.1:$LOCAL_PORT/readyz")"
say "demo done: release $REL in namespace $NS (KUBECONFIG=$KUBECONFIG); make cluster-down removes the cluster"
