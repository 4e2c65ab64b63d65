#!/usr/bin/env bash
# make test-mutants: breaks the chart and the gate on purpose, one mutant at a time, in a worktree of HEAD, and
# runs the tests that must catch it: first the unit and render tests named for it, then, when they do not, its
# cluster scenarios on the kind cluster (images built from the mutant). Every mutant must be caught. Writes
# the table to results/mutants-<time>.md and MUTANTS.md. Not part of make test (it takes long).
#   MUTANTS=<regexp>   run only the mutants whose id matches
#   MUTANTS_LEVEL=cluster   skip the unit/render tests: every mutant goes to its cluster scenarios
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$REPO_ROOT"
export PATH=$REPO_ROOT/bin:$PATH

# id ¦ what it breaks ¦ file ¦ text ¦ replacement ¦ unit/render tests (package:regexp) ¦ cluster scenarios (-run regexp)
# A mutant of several edits names its files separated by "," and its texts and replacements separated by "§".
MUTANTS_TABLE=$(cat <<'EOF'
hook-annotation¦the migration Job is no Helm hook on upgrades¦charts/premigrate/templates/_helpers.tpl¦helm.sh/hook: pre-upgrade
helm.sh/hook-weight: {{ .Values.migration.hookWeight¦helm.sh/hook-weight: {{ .Values.migration.hookWeight¦./test/render:TestTheMigrationJobMatchesTheDesign¦TestRepeatedUpgrades
before-hook-creation¦the default delete policy drops before-hook-creation¦charts/premigrate/values.yaml¦hookDeletePolicy: before-hook-creation¦hookDeletePolicy: hook-succeeded¦./test/render:TestTheMigrationJobMatchesTheDesign¦TestAFailedMigration
identity-constant¦the identity no longer depends on the Job spec¦charts/premigrate/templates/_helpers.tpl¦| sha256sum | trunc 10 -}}¦| sha256sum | trunc 0 | printf "%s0000000000" -}}¦./test/render:TestTheIdentityChangesWithTheMigrationJobSpecOnly¦TestTemplateAndKubectl
record-before-exit¦gate run records the identity before the command exits¦cmd/gate/run.go¦	code := runChild(ctx, o.argv, e.Streams, log)¦	_ = r.write(ctx, e); code := runChild(ctx, o.argv, e.Streams, log)¦./cmd/gate:TestRunRecordsTheIdentityOnlyWhenTheMigrationCommandSucceeds¦TestAFailedMigration
failed-is-success¦the gate takes a Failed Job for a success¦internal/gate/state.go¦			return verdict{outcome: Failed, job: j, cond: c}¦			return verdict{outcome: Succeeded, job: j, cond: c}¦./internal/gate:TestWaitDecidesFromTheStateItFinds¦TestWithTTLNoPodStartsAfterAFailedJobIsGone
record-ignored¦the gate ignores the records (pods wait forever once a Job is gone after its TTL)¦internal/gate/state.go¦	if v.configMap != nil {
		if e, found¦	if false {
		if e, found¦./internal/gate:TestWaitDecidesFromTheStateItFinds¦TestWithTTLPodsRestart
stale-job-evidence¦the gate accepts any Job of its identity, whatever its name¦internal/gate/source.go¦return j.Name == name && j.Labels[IdentityLabel] == identity¦return j.Labels[IdentityLabel] == identity¦./internal/gate:TestWaitDecidesFromTheStateItFinds¦TestAReinstall
old-gate-rule¦the rule before 0.2.0: the gate lists every Job of its identity by label and may read them all¦internal/gate/source.go,charts/premigrate/templates/gate-role.yaml¦		opts:    metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()},
		match:   func(j *batchv1.Job) bool { return j.Name == name && j.Labels[IdentityLabel] == identity },§    resourceNames:
      - {{ include "premigrate.migrationJobName" . }}
¦		opts:    metav1.ListOptions{FieldSelector: fields.Everything().String(), LabelSelector: IdentityLabel + "=" + identity},
		match:   func(j *batchv1.Job) bool { return j.Labels[IdentityLabel] == identity },§¦./internal/gate:TestWaitDecidesFromTheStateItFinds¦TestAReinstall
rbac-widened¦the gate's Role reads every Job of the namespace¦charts/premigrate/templates/gate-role.yaml¦    resourceNames:
      - {{ include "premigrate.migrationJobName" . }}
¦¦./test/render:TestTheGateHoldsTheAppPodsUntilTheMigrationSucceeded¦TestTheGateServiceAccountMayReadExactlyWhatItNeeds
readiness-dropped¦the app has no readiness probe¦charts/premigrate/templates/deployment.yaml¦          {{- with .Values.readinessProbe }}¦          {{- with .Values.readinessProbeRemoved }}¦./test/render:TestTheAppRunsAsADeploymentWithItsServiceBudgetAndServiceAccount¦TestRepeatedUpgrades
pod-failure-policy¦a refused migration is retried instead of failing the Job at once¦charts/premigrate/templates/migration-job.yaml¦      - action: FailJob¦      - action: Count¦./test/render:TestTheMigrationJobMatchesTheDesign¦TestADestructiveMigration
recorded-rerun¦gate run runs an identity that is already recorded¦cmd/gate/run.go¦	entry, found, decodeErr := record.Lookup(cm.Data, r.o.identity)
	if !found {¦	entry, found, decodeErr := record.Lookup(cm.Data, r.o.identity)
	if found || !found {¦./cmd/gate:TestRunNeverRunsAnIdentityThatIsAlreadyRecorded¦TestAJobModeRollback
token-in-app¦the app container holds the API token¦charts/premigrate/templates/deployment.yaml¦      automountServiceAccountToken: false¦      automountServiceAccountToken: true¦./test/render:TestTheAppRunsAsADeploymentWithItsServiceBudgetAndServiceAccount¦TestTheGateServiceAccountMayReadExactlyWhatItNeeds
no-postgres-wait¦the migration does not wait for PostgreSQL¦charts/premigrate/templates/migration-job.yaml¦            - --wait-for-postgres
¦            - --wait-for-postgres-timeout=1ms
            - --wait-for-postgres
¦./test/render:TestTheMigrationJobMatchesTheDesign¦TestTheFirstInstallWaits
job-owner¦the hook Job is not owned by the records (helm uninstall leaves it)¦charts/premigrate/templates/migration-job.yaml¦            - --own-job
¦¦./test/render:TestTheMigrationJobMatchesTheDesign¦TestAReinstall
EOF
)

stamp=$(date -u +%Y%m%d-%H%M%S)
mkdir -p results
report=results/mutants-$stamp.md
work=$PREMIGRATE_CACHE/mutants; rm -rf "$work"; mkdir -p "$work"
node_image=$("$HACK_DIR/kind/node-image.sh")
{
  echo "# Mutation run $stamp"
  echo
  echo "Each mutant breaks one protection in a copy of the tree (\`hack/mutants.sh\`); the first test that fails catches it."
  echo
  echo "| mutant | what it breaks | caught by | level |"
  echo "|---|---|---|---|"
} >"$report"

# split the table: a record starts with a line "id¦..."; fields are separated by ¦
python3 - "$work/table" <<PY
import re, sys, json
text = '''$MUTANTS_TABLE'''
records, cur = [], None
for line in text.split('\n'):
    if re.match(r'^[a-z][a-z0-9-]*¦', line):
        if cur is not None: records.append(cur)
        cur = line
    else:
        cur += '\n' + line
records.append(cur)
out = []
for r in records:
    f = r.split('¦')
    if len(f) != 7:
        sys.exit(f"mutant record has {len(f)} fields, want 7: {r[:60]}")
    out.append(dict(zip(["id","what","file","from","to","unit","cluster"], f)))
json.dump(out, open(sys.argv[1], "w"))
PY

n=$(python3 -c "import json,sys; print(len(json.load(open('$work/table'))))")
missed=0
for i in $(seq 0 $((n - 1))); do
  get() { python3 -c "import json; print(json.load(open('$work/table'))[$i]['$1'], end='')"; }
  id=$(get id); what=$(get what)
  if [ -n "${MUTANTS:-}" ] && ! [[ $id =~ $MUTANTS ]]; then continue; fi
  dir=$work/$id
  git worktree add --detach --force "$dir" HEAD >/dev/null 2>&1 # HEAD: commit what the mutants should see
  ln -s "$REPO_ROOT/bin" "$dir/bin"
  python3 - "$work/table" "$i" "$dir" <<'PY' || { say "mutant $id: its text is not in the tree any more: fix the table"; exit 1; }
import json, sys
m = json.load(open(sys.argv[1]))[int(sys.argv[2])]
files, froms, tos = m["file"].split(","), m["from"].split("§"), m["to"].split("§")
if not len(files) == len(froms) == len(tos):
    sys.exit(1)
for f, a, b in zip(files, froms, tos):
    path = sys.argv[3] + "/" + f
    src = open(path).read()
    if a not in src:
        sys.exit(1)
    open(path, "w").write(src.replace(a, b, 1))
PY
  caught="" level=""
  pkg=$(get unit); pkg_dir=${pkg%%:*}; pkg_run=${pkg#*:}
  [ "${MUTANTS_LEVEL:-}" = cluster ] || say "mutant $id ($what): unit/render tests $pkg_run"
  if [ "${MUTANTS_LEVEL:-}" != cluster ] && ! (cd "$dir" && go test -count=1 "$pkg_dir" -run "$pkg_run" >"$LOGS/mutant-$id-unit.log" 2>&1); then
    caught="$pkg_run ($pkg_dir)"; level=unit/render
  else
    run=$(get cluster)
    if [ "${MUTANTS_LEVEL:-}" = cluster ]; then
      say "mutant $id: cluster scenarios $run (log: $LOGS/mutant-$id-e2e.log)"
    else
      say "mutant $id: not caught by $pkg_run; cluster scenarios $run (log: $LOGS/mutant-$id-e2e.log)"
    fi
    mcache=$work/cache-$id; mkdir -p "$mcache"
    ln -sfn "$PREMIGRATE_CACHE/logs" "$mcache/logs" 2>/dev/null || true
    if (cd "$dir" && PREMIGRATE_CACHE=$mcache hack/images.sh >"$LOGS/mutant-$id-images.log" 2>&1) &&
       ! (cd "$dir/test/e2e" && PREMIGRATE_CACHE=$mcache KEEP_CLUSTER=1 KIND_NODE_IMAGE=$node_image \
          go test -count=1 -timeout 20m -run "$run" . >"$LOGS/mutant-$id-e2e.log" 2>&1); then
      caught="$run"; level=cluster
    fi
  fi
  if [ -n "$caught" ]; then
    say "mutant $id: CAUGHT by $caught"
    echo "| \`$id\` | $what | \`$caught\` | $level |" >>"$report"
  else
    say "mutant $id: NOT CAUGHT"
    echo "| \`$id\` | $what | **not caught** | - |" >>"$report"
    missed=$((missed + 1))
  fi
  git worktree remove --force "$dir"
done
if [ -z "${MUTANTS:-}" ] && [ -z "${MUTANTS_LEVEL:-}" ]; then
  cp "$report" MUTANTS.md # the committed table is the full run's
  say "mutation table: $report (copied to MUTANTS.md); $missed not caught"
else
  say "mutation table: $report; $missed not caught"
fi
# the cluster keeps the last mutant's images until the next run loads ours again (by content, per archive)
exit $((missed > 0))
