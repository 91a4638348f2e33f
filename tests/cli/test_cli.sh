#!/usr/bin/env bash
# The built binary driven as a user drives it: check-policies, preview, and serve answered by
# a real curl over TLS with certificates minted by certs/mint.sh. Loopback only; bounded.
#   test_cli.sh BINARY SOURCE_DIR
set -uo pipefail
bin="$1"
src="$2"
work="$(mktemp -d)"
server_pid=""
cleanup() {
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

passed=0
failed=0
check() {  # check NAME COMMAND...: the command must succeed
  local name="$1"
  shift
  if "$@"; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    echo "FAILED: $name" >&2
  fi
}
exit_code() {  # exit_code EXPECTED COMMAND...: the command must exit with EXPECTED
  local expected="$1"
  shift
  "$@" >"$work/out" 2>"$work/err"
  local got=$?
  [ "$got" = "$expected" ] || { echo "  exit $got, wanted $expected: $*" >&2; cat "$work/err" >&2; return 1; }
}
contains() { grep -qF -- "$2" "$1" || { echo "  $1 lacks: $2" >&2; sed 's/^/  | /' "$1" | head -20 >&2; return 1; }; }
lines() { [ "$(wc -l <"$1")" -eq "$2" ] || { echo "  $1 has $(wc -l <"$1") lines, wanted $2" >&2; return 1; }; }

# --- check-policies -------------------------------------------------------------------
check "check-policies accepts the shipped policies" exit_code 0 "$bin" check-policies "$src/policies"
check "check-policies takes --policies DIR too (its errors say to set it)" exit_code 0 \
  "$bin" check-policies --policies "$src/policies"
check "check-policies lists torch as default" contains "$work/out" "policy torch (frameworks: torch, pytorch; default)"
mkdir -p "$work/bad"
sed 's/    - name: WORLD_SIZE/    - name: WORLD_SIZE\n      valu: oops/' "$src/policies/torch.yaml" >"$work/bad/torch.yaml"
check "check-policies rejects an unknown key" exit_code 1 "$bin" check-policies "$work/bad"
check "the error names file, field and fix" contains "$work/err" "$work/bad/torch.yaml: spec.env[8]: unknown field \"valu\"; did you mean \"value\"?"
check "check-policies on a missing directory fails" exit_code 1 "$bin" check-policies "$work/none"
# The shipped policies are built in: check-policies and preview work from any directory.
check "check-policies from another directory checks the built-in policies" bash -c \
  "cd '$work' && '$bin' check-policies >'$work/built-in.txt'"
check "which are the shipped policies/, file for file" bash -c "diff <(sed 's|^[^:]*/||' '$work/built-in.txt') \
  <('$bin' check-policies '$src/policies' | sed 's|^[^:]*/||')"
check "named as built in" contains "$work/built-in.txt" "built-in/torch.yaml: ok: policy torch"
check "preview -f of the example pod works from another directory" bash -c "cd '$work' && \
  '$bin' preview -f '$src/examples/torch-pod.yaml' | jq -e '.policy == \"torch\"' >/dev/null"

# --- preview ----------------------------------------------------------------------------
check "preview of the torch example succeeds" exit_code 0 "$bin" preview -f "$src/examples/torch-pod.yaml" --policies "$src/policies"
check "preview prints the patch as JSON" bash -c "jq -e '.allowed == true and .policy == \"torch\" and (.patch | length) == 4' '$work/out' >/dev/null"
check "with why the pod got its values, on the pod (trainenv.io/status)" bash -c "jq -e '.object.metadata.annotations
  [\"trainenv.io/status\"] | fromjson | .policy == \"torch\" and .counts[0] == {name: \"numNodes\", value: \"4\",
  from: \"annotation trainenv.io/num-nodes\"}' '$work/out' >/dev/null"
check "fed back in, the admitted pod gets no patch (the status is kept, not rewritten)" bash -c "jq .object '$work/out' \
  | '$bin' preview -f - --policies '$src/policies' | jq -e '(.patch | length) == 0 and (.warnings | length) == 0' >/dev/null"
check "preview's mutated pod has RANK 0 of 4" bash -c "jq -e '[.object.spec.containers[0].env[] | {(.name): .value}] | add | .RANK == \"0\" and .WORLD_SIZE == \"4\"' '$work/out' >/dev/null"
# -o table for a person, -o yaml reading back as the JSON answer, several pods in one file, a job's
# file named with the command that previews it.
check "preview -o table" exit_code 0 "$bin" preview -f "$src/examples/torch-pod.yaml" -o table --policies "$src/policies"
check "names the pod and its policy" contains "$work/out" "Pod team-a/llama-ft-node-0-0-: policy torch, 4 patch operations"
check "and each value it is told" bash -c "grep -Eq '^  WORLD_SIZE +4 +node$' '$work/out'"
check "and where the counts came from" contains "$work/out" "  numNodes=4: annotation trainenv.io/num-nodes"
check "preview -o yaml" exit_code 0 "$bin" preview -f "$src/examples/torch-pod.yaml" -o yaml --policies "$src/policies"
cp "$work/out" "$work/answer.yaml"
check "is the JSON answer, read back by another YAML reader (PyYAML)" bash -c "'$bin' preview \
  -f '$src/examples/torch-pod.yaml' --policies '$src/policies' >'$work/answer.json' && python3 -c \
  'import json, sys, yaml; sys.exit(yaml.safe_load(open(\"$work/answer.yaml\")) != json.load(open(\"$work/answer.json\")))'"
{ cat "$src/examples/torch-pod.yaml"; echo "---"; cat "$src/examples/volcano-extra.yaml";
  printf -- '---\napiVersion: v1\nkind: Service\nmetadata: {name: x}\n'; } >"$work/two-pods.yaml"
check "a file of two pods and a Service" exit_code 0 "$bin" preview -f "$work/two-pods.yaml" --policies "$src/policies"
check "answers each pod, in order" bash -c "jq -e 'length == 2 and .[0].policy == \"torch\" and
  .[1].policy == \"volcano-pytorch\"' '$work/out' >/dev/null"
check "as a table too" bash -c "'$bin' preview -f '$work/two-pods.yaml' -o table --policies '$src/policies' \
  | grep -c '^Pod ' | grep -qx 2"
check "a job's file is refused" exit_code 2 "$bin" preview -f "$src/examples/jobs/jobset-master-worker.yaml" \
  --policies "$src/policies"
check "with the command that previews it" contains "$work/err" \
  "holds a JobSet: preview every pod of it, checked as a whole, with: trainenv preview --job -f $src/examples/jobs/jobset-master-worker.yaml"
# Every example previews to its policy, with the variable that policy is known by.
declare -A example_policy=([torch-pod]=torch:RANK [platform-pod]=platform:WORLD_SIZE [torchtune-pod]=torchtune:PET_NNODES
  [mpi-launcher]=mpi:OMPI_MCA_orte_default_hostfile [mpi-node]=mpi: [intel-mpi-launcher]=intel-mpi:I_MPI_PERHOST
  [mpich-launcher]=mpich:HYDRA_HOST_FILE [jax-pod]=jax:JAX_NUM_PROCESSES [xgboost-pod]=xgboost:DMLC_NUM_WORKER
  [volcano-master]=volcano-pytorch:WORLD_SIZE [volcano-extra]=volcano-pytorch:)
for example in "$src"/examples/*.yaml; do
  name=$(basename "$example" .yaml)
  expected="${example_policy[$name]:-}"
  check "example $name has an expectation here" [ -n "$expected" ]
  check "preview of example $name succeeds" exit_code 0 "$bin" preview -f "$example" --policies "$src/policies"
  check "example $name gets policy ${expected%%:*}" bash -c "jq -e --arg p '${expected%%:*}' --arg v '${expected#*:}' \
    '.policy == \$p and (.patch | length) > 0 and (\$v == \"\" or ([.object.spec.containers[0].env[]?.name] | index(\$v)) != null)' \
    '$work/out' >/dev/null"
done
check "preview reads standard input" exit_code 0 bash -c "'$bin' preview --policies '$src/policies' < '$src/tests/fixtures/review-torch-jobset-node3.json'"
check "preview of an AdmissionReview from stdin injects RANK 3" bash -c "jq -e '.object.spec.containers[0].env | map(select(.name == \"RANK\"))[0].value == \"3\"' '$work/out' >/dev/null"
check "preview --policy forces a policy" exit_code 0 "$bin" preview -f "$src/examples/torch-pod.yaml" --policy platform --policies "$src/policies"
check "forced policy is reported" bash -c "jq -e '.policy == \"platform\"' '$work/out' >/dev/null"
sed 's/trainenv.io\/num-nodes: "4"/trainenv.io\/num-nodes: "four"/' "$src/examples/torch-pod.yaml" >"$work/violation.yaml"
check "preview of a violation exits 1" exit_code 1 "$bin" preview -f "$work/violation.yaml" --policies "$src/policies"
check "the violation message goes to stderr" contains "$work/err" 'trainenv: annotation trainenv.io/num-nodes is "four"'
check "preview of a missing file exits 2" exit_code 2 "$bin" preview -f "$work/nope.yaml" --policies "$src/policies"
check "with one clear line" lines "$work/err" 1
echo '{"kind": "Deployment"}' >"$work/deploy.json"
check "preview of a non-Pod exits 2" exit_code 2 "$bin" preview -f "$work/deploy.json" --policies "$src/policies"
check "naming the kind" contains "$work/err" 'got kind "Deployment"'
# --- preview with owners: the Trainer-shaped examples, no trainenv annotation -----------------
owners="$src/examples/owners"
check "preview --owners of the Trainer torch pod succeeds" exit_code 0 "$bin" preview \
  -f "$owners/trainer-torch-pod.yaml" --owners "$owners/trainer-torch-owners.yaml" --policies "$src/policies"
check "it gets the torch policy, sized from its JobSet: RANK 1 of 3" bash -c "jq -e '.policy == \"torch\" and
  ([.object.spec.containers[0].env[] | {(.name): .value}] | add | .WORLD_SIZE == \"3\" and .RANK == \"1\")' '$work/out' >/dev/null"
check "and says where the count came from" bash -c "jq -e '.sources | map(select(.name == \"numNodes\"))[0].source
  | test(\"JobSet team-a/bert\")' '$work/out' >/dev/null"
check "preview --owners of the DeepSpeed launcher lists the workers with 4 slots" exit_code 0 "$bin" preview \
  -f "$owners/deepspeed-launcher-pod.yaml" --owners "$owners/deepspeed-owners.yaml" --policies "$src/policies"
check "in its hostfile" bash -c "jq -e '.object.metadata.annotations[\"trainenv.io/hostfile\"] | test(\"slots=4\")' '$work/out' >/dev/null"
check "preview --owners of the Volcano worker ranks it after the master" exit_code 0 "$bin" preview \
  -f "$owners/volcano-worker-pod.yaml" --owners "$owners/volcano-owners.yaml" --policies "$src/policies"
check "RANK 1 of 3" bash -c "jq -e '[.object.spec.containers[0].env[] | {(.name): .value}] | add
  | .WORLD_SIZE == \"3\" and .RANK == \"1\"' '$work/out' >/dev/null"
check "without --owners the Trainer pod passes unrecognised, with a warning" exit_code 0 "$bin" preview \
  -f "$owners/trainer-torch-pod.yaml" --policies "$src/policies"
check "and no patch" bash -c "jq -e '(.patch | length) == 0 and (.warnings | length) == 1' '$work/out' >/dev/null"
check "an owners file that is not YAML exits 2" exit_code 2 "$bin" preview -f "$owners/trainer-torch-pod.yaml" \
  --owners "$src/README.md" --policies "$src/policies"
check "--owners and --kubeconfig together exit 2" exit_code 2 "$bin" preview -f "$owners/trainer-torch-pod.yaml" \
  --owners "$owners/trainer-torch-owners.yaml" --kubeconfig "$work/none"
check "naming both" contains "$work/err" "give --owners or --kubeconfig, not both"

# --- preview --job: every pod of a whole job, checked as a whole ------------------------------
jobs="$src/examples/jobs"
for job in trainjob-torch trainjob-deepspeed jobset-master-worker indexed-job volcano-job; do
  check "preview --job of $job exits 0" exit_code 0 "$bin" preview --job -f "$jobs/$job.yaml" \
    --owners "$jobs/runtimes.yaml" --policies "$src/policies"
  check "its checks pass" contains "$work/out" "checks: ok"
done
check "the master/worker JobSet: five pods, ranks 0..4, one master" bash -c "'$bin' preview --job -o json \
  -f '$jobs/jobset-master-worker.yaml' --policies '$src/policies' | jq -e '.ok and (.pods | length) == 5
  and ([.pods[].rank] | sort) == [0,1,2,3,4] and ([.pods[].values.MASTER_ADDR] | unique) == [\"gpt-master-0-0.train-svc\"]' >/dev/null"
check "the DeepSpeed TrainJob: the launcher is the 4th node of its hostfile" bash -c "'$bin' preview --job -o json \
  -f '$jobs/trainjob-deepspeed.yaml' --owners '$jobs/runtimes.yaml' --policies '$src/policies' | jq -e '.ok
  and (.pods | map(select(.role == \"launcher\"))[0].values.hostfile) == \"4 hosts\"' >/dev/null"
check "a TrainJob whose runtime is not in --owners exits 2" exit_code 2 "$bin" preview --job \
  -f "$jobs/trainjob-torch.yaml" --policies "$src/policies"
check "naming the runtime" contains "$work/err" "ClusterTrainingRuntime torch-distributed"
# A JobSet whose template hard-codes RANK=0 (kept, as the user set it): every worker claims rank 0.
sed 's/                  command: \[torchrun, \/workspace\/train.py\]/&\n                  env: [{name: RANK, value: "0"}]/' \
  "$jobs/jobset-master-worker.yaml" >"$work/rank0.yaml"
check "an inconsistent job exits 1" exit_code 1 "$bin" preview --job -f "$work/rank0.yaml" --policies "$src/policies"
check "naming the problem" contains "$work/out" "pods share RANK 0"
check "and the pods" contains "$work/out" "gpt-worker-1-1"
check "preview --job -o yaml is its JSON, as YAML" bash -c "'$bin' preview --job -o yaml -f '$jobs/indexed-job.yaml' \
  --policies '$src/policies' >'$work/job.yaml' && '$bin' preview --job -o json -f '$jobs/indexed-job.yaml' \
  --policies '$src/policies' >'$work/job.json' && python3 -c 'import json, sys, yaml
sys.exit(yaml.safe_load(open(\"$work/job.yaml\")) != json.load(open(\"$work/job.json\")))'"
check "--job with --policy exits 2" exit_code 2 "$bin" preview --job --policy torch -f "$jobs/indexed-job.yaml"
# The mistakes people make (issue 41), each a problem or a warning that today's output missed.
# The trainer label taken off the workers (same image, same torchrun): the master alone trains.
python3 - "$jobs/jobset-master-worker.yaml" "$work" <<'PY'
import sys
text = open(sys.argv[1]).read()
label = """            metadata:
              labels:
                trainer.kubeflow.org/trainjob-ancestor-step: trainer
"""
assert text.count(label) == 2
last = text.rfind(label)
open(sys.argv[2] + "/unlabelled-workers.yaml", "w").write(text[:last] + text[last + len(label):])
open(sys.argv[2] + "/unlabelled.yaml", "w").write(text.replace(label, ""))
typo = """              annotations:
                trainenv.io/num-node: "4"
"""
open(sys.argv[2] + "/typo.yaml", "w").write(
    text.replace("  namespace: team-a\n", "  namespace: team-a\n  annotations:\n    trainenv.io/elastc: \"2:4\"\n", 1)
        .replace(label, label + typo, 1))
PY
check "a role running the training launcher without the label exits 1" exit_code 1 "$bin" preview --job \
  -f "$work/unlabelled-workers.yaml" --policies "$src/policies"
check "naming the role, the launcher and the fix" contains "$work/out" \
  "role worker runs torchrun as training role master does, but is not a training pod"
check "and the label to add" contains "$work/out" "fix: label its template trainer.kubeflow.org/trainjob-ancestor-step: trainer"
check "a job with no training pod exits 1" exit_code 1 "$bin" preview --job -f "$work/unlabelled.yaml" --policies "$src/policies"
check "saying so, and what the roles run" contains "$work/out" \
  "no pod of the job is a training pod: none carries label trainer.kubeflow.org/trainjob-ancestor-step: trainer"
check "with the roles that launch" contains "$work/out" "(master runs torchrun, worker runs torchrun)"
sed 's/replicas: [0-9]*/replicas: 0/' "$jobs/volcano-job.yaml" >"$work/no-pods.yaml"
check "a job that creates no pod exits 1" exit_code 1 "$bin" preview --job -f "$work/no-pods.yaml" --policies "$src/policies"
check "saying so in its table" contains "$work/out" "told, by role: nothing (the job creates no pod)"
check "and as its problem" contains "$work/out" "the job creates no pod: every role has 0 replicas"
check "a misspelled key is a warning on the pod" exit_code 0 "$bin" preview --job -f "$work/typo.yaml" --policies "$src/policies"
check "with the key meant" contains "$work/out" "trainenv: unknown annotation trainenv.io/num-node (did you mean trainenv.io/num-nodes?)"
check "and on the job" contains "$work/out" \
  "note: trainenv: unknown annotation trainenv.io/elastc on JobSet team-a/gpt (did you mean trainenv.io/elastic?)"
sed 's|^  annotations:|&\n    trainenv.io/nproc_per_node: "2"|' "$src/examples/torch-pod.yaml" >"$work/typo-pod.yaml"
check "a misspelled key on a single pod" bash -c "grep -q nproc_per_node '$work/typo-pod.yaml'"
check "is a warning too (admission's answer)" bash -c "set -o pipefail; '$bin' preview -f '$work/typo-pod.yaml' \
  --policies '$src/policies' | jq -e '.warnings | index(\"trainenv: unknown annotation \
trainenv.io/nproc_per_node (did you mean trainenv.io/nproc-per-node?)\")' >/dev/null"
# DeepSpeed's workers run sshd: told nothing, and rightly so; no warning on their rows.
check "the DeepSpeed TrainJob" exit_code 0 "$bin" preview --job -f "$jobs/trainjob-deepspeed.yaml" \
  --owners "$jobs/runtimes.yaml" --policies "$src/policies"
check "has no warning on a worker's row" bash -c "! grep -E '^ds-node-0-[0-9] .*not a training pod' '$work/out'"
check "its role summary says why the workers are told nothing" contains "$work/out" \
  "  node      3 pods  -    nothing: a host of the launcher's hostfile: it runs sshd and needs nothing"
check "and what the launcher is told, not every pod" contains "$work/out" \
  "  launcher  1 pod   mpi  OMPI_MCA_orte_set_default_slots=4"
check "no 'every pod told' line claims values the workers never get" bash -c "! grep -q 'every pod told' '$work/out'"
check "the checks line names only what ran (no ranks, no master in an MPI job)" bash -c \
  "grep -q '^checks: ok (hostfile = the workers, ' '$work/out' && ! grep -q 'one master' '$work/out'"
check "a JobSet's checks line names the ranks and the master" bash -c "'$bin' preview --job \
  -f '$jobs/jobset-master-worker.yaml' --policies '$src/policies' | grep -q '^checks: ok (node ranks and RANKs 0..N-1, one world size, one master'"

check "an unknown flag exits 2" exit_code 2 "$bin" preview --frobnicate
check "with one line naming it" contains "$work/err" "unknown flag --frobnicate"
check "help exits 0" exit_code 0 "$bin" serve --help
check "help lists --client-ca" contains "$work/out" "--client-ca FILE"
check "an unknown command exits 2" exit_code 2 "$bin" frobnicate

# --- serve --------------------------------------------------------------------------------
"$src/certs/mint.sh" "$work/certs" >/dev/null 2>&1 || { echo "FAILED: certs/mint.sh" >&2; exit 1; }
check "serve refuses a missing certificate" exit_code 1 "$bin" serve --tls-cert "$work/none.crt" --tls-key "$work/certs/tls.key" \
  --listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0 --policies "$src/policies"
check "naming the flag, the file and the system's reason" contains "$work/err" \
  "--tls-cert $work/none.crt: cannot read: No such file or directory"
check "serve refuses a bad --listen" exit_code 2 "$bin" serve --listen nowhere
check "serve refuses invalid policies" exit_code 1 "$bin" serve --policies "$work/bad" --tls-cert "$work/certs/tls.crt" \
  --tls-key "$work/certs/tls.key" --listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0

# shellcheck source=server_lib.sh
source "$src/tests/cli/server_lib.sh"
start_server "$work/server.log"

check "curl /preview with the README's line" bash -c "curl --silent --max-time 10 --cacert '$work/certs/ca.crt' \
  --data-binary @'$src/examples/torch-pod.yaml' https://localhost:$https_port/preview >'$work/preview.json'"
check "the preview has the torch patch" bash -c "jq -e '.allowed and .policy == \"torch\" and
  (.patch | map(.path) | index(\"/metadata/annotations/trainenv.io~1injected\")) != null' '$work/preview.json' >/dev/null"
check "the CLI and the endpoint give the same answer" bash -c "'$bin' preview -f '$src/examples/torch-pod.yaml' \
  --policies '$src/policies' | jq -S . >'$work/a' && jq -S . '$work/preview.json' >'$work/b' && cmp -s '$work/a' '$work/b'"
check "curl /mutate answers an AdmissionReview" bash -c "curl --silent --max-time 10 --cacert '$work/certs/ca.crt' \
  -H 'Content-Type: application/json' --data-binary @'$src/tests/fixtures/review-torch-jobset-node3.json' \
  https://127.0.0.1:$https_port/mutate >'$work/review.json'"
check "with the uid and a base64 JSON Patch" bash -c "jq -e '.response.uid == \"47332173-738f-526c-bb61-f1929792407a\"
  and .response.patchType == \"JSONPatch\"' '$work/review.json' >/dev/null &&
  jq -r .response.patch '$work/review.json' | base64 -d | jq -e 'length == 13' >/dev/null"
check "curl /preview/job answers the whole job" bash -c "curl --silent --max-time 10 --cacert '$work/certs/ca.crt' \
  --data-binary @'$src/examples/jobs/jobset-master-worker.yaml' https://localhost:$https_port/preview/job >'$work/job.json'"
check "the endpoint and preview --job -o json give the same answer" bash -c "'$bin' preview --job -o json \
  -f '$src/examples/jobs/jobset-master-worker.yaml' --policies '$src/policies' \
  | jq -S . >'$work/a' && jq -S . '$work/job.json' >'$work/b' && cmp -s '$work/a' '$work/b'"
check "a job that is not YAML is 400" bash -c "[ \"\$(curl --silent --max-time 10 --cacert '$work/certs/ca.crt' -o /dev/null \
  -w '%{http_code}' --data-binary '{\"kind\": ' https://localhost:$https_port/preview/job)\" = 400 ]"
sed 's/parallelism: 2/parallelism: 1000/; s/completions: 2/completions: 1000/' "$src/examples/jobs/jobset-master-worker.yaml" >"$work/big-job.yaml"
check "a job of more than 500 pods is 422 from the server" bash -c "[ \"\$(curl --silent --max-time 10 --cacert '$work/certs/ca.crt' \
  -o '$work/big.json' -w '%{http_code}' --data-binary @'$work/big-job.yaml' https://localhost:$https_port/preview/job)\" = 422 ]"
check "naming the bound" contains "$work/big.json" "more than 500 pods"
check "while the CLI lays it out" exit_code 0 "$bin" preview --job -f "$work/big-job.yaml" --policies "$src/policies"
check "curl speaking TLS 1.3" bash -c "curl --silent --max-time 10 --cacert '$work/certs/ca.crt' --tlsv1.3 \
  https://localhost:$https_port/healthz | grep -q ok"
# OpenSSL 3 clients refuse TLS 1.1 themselves unless SECLEVEL=0: lower it, so the refusal is the server's.
check "curl limited to TLS 1.1 is refused by the server" bash -c "! curl --silent --max-time 10 --cacert '$work/certs/ca.crt' \
  --tlsv1.1 --tls-max 1.1 --ciphers 'DEFAULT:@SECLEVEL=0' https://localhost:$https_port/healthz"
check "wrong media type is 415" bash -c "[ \"\$(curl --silent --max-time 10 --cacert '$work/certs/ca.crt' -o /dev/null \
  -w '%{http_code}' -H 'Content-Type: text/xml' --data-binary '{}' https://localhost:$https_port/mutate)\" = 415 ]"
check "healthz on the plain port" bash -c "curl --silent --max-time 10 http://127.0.0.1:$http_port/healthz | grep -q ok"
check "readyz on the plain port" bash -c "curl --silent --max-time 10 http://127.0.0.1:$http_port/readyz | grep -q ok"
kill -TERM "$server_pid"
for _ in $(seq 1 100); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.1; done
wait "$server_pid"
check "serve exits 0 on SIGTERM" [ $? -eq 0 ]
server_pid=""
# Read once the server has exited: it writes its log in batches (within 100 ms) and all of it
# at shutdown.
check "the server logged one line per admission" contains "$work/server.log" "admission uid=47332173-738f-526c-bb61-f1929792407a namespace=team-a"

# serve --owners: a local server with no cluster previews the Trainer pod as the CLI does.
start_server "$work/server-owners.log" --owners "$owners/trainer-torch-owners.yaml"
check "curl /preview of the Trainer pod, owners from the file" bash -c "curl --silent --max-time 10 \
  --cacert '$work/certs/ca.crt' --data-binary @'$owners/trainer-torch-pod.yaml' \
  https://localhost:$https_port/preview >'$work/preview-owners.json'"
check "the endpoint and preview --owners give the same answer" bash -c "'$bin' preview \
  -f '$owners/trainer-torch-pod.yaml' --owners '$owners/trainer-torch-owners.yaml' --policies '$src/policies' \
  | jq -S . >'$work/a' && jq -S . '$work/preview-owners.json' >'$work/b' && cmp -s '$work/a' '$work/b'"
check "the start-up line says where owners come from" contains "$work/server-owners.log" "owner lookups: from $owners/trainer-torch-owners.yaml"
kill -TERM "$server_pid"
wait "$server_pid"
# serve --owners with Trainer's runtimes: POST /preview/job of a TrainJob reads its runtime there.
start_server "$work/server-runtimes.log" --owners "$jobs/runtimes.yaml"
check "curl /preview/job of a DeepSpeed TrainJob, its runtime from the server's owners" bash -c "curl --silent \
  --max-time 10 --cacert '$work/certs/ca.crt' --data-binary @'$jobs/trainjob-deepspeed.yaml' \
  https://localhost:$https_port/preview/job | jq -e '.ok and (.pods | length) == 4' >/dev/null"
kill -TERM "$server_pid"
wait "$server_pid"
server_pid=""
check "serve refuses --owners with --kubeconfig" exit_code 2 "$bin" serve --owners "$owners/trainer-torch-owners.yaml" \
  --kubeconfig "$work/none"
check "serve refuses an unreadable --owners file" exit_code 1 "$bin" serve --owners "$work/none.yaml" \
  --tls-cert "$work/certs/tls.crt" --tls-key "$work/certs/tls.key" --listen 127.0.0.1:0 \
  --metrics-listen 127.0.0.1:0 --policies "$src/policies"
check "naming it" contains "$work/err" "--owners cannot read $work/none.yaml"

# --- wait: the readiness wait as trainenv-wait runs it (docs/contract.md §3.1) -----------------
check "wait passes once its targets answer" exit_code 0 "$bin" wait --resolve localhost --resolve 127.0.0.1
check "saying so" contains "$work/out" "all 2 targets answered, twice"
printf '# the job\nlocalhost slots=2\nlauncher-0.job slots=2\nlocalhost:4\n' >"$work/hostfile"
check "wait reads a hostfile, skipping the pod itself" exit_code 0 "$bin" wait --hostfile "$work/hostfile" \
  --skip launcher-0.job.team-a.svc
check "one target left of three lines" contains "$work/out" "trainenv wait: 1 targets"
check "wait gives up at its bound with 75" exit_code 75 "$bin" wait --connect 127.0.0.1:1 \
  --resolve localhost --timeout 2 --progress 1 --job jobset/bert -n team-a --termination-log "$work/termination"
check "its progress names the cause" contains "$work/out" "1 of 2 targets missing: refused (nothing listens yet): 127.0.0.1:1"
check "its termination message names target, cause and time" contains "$work/termination" \
  "refused (nothing listens yet): 127.0.0.1:1 (2 s)"
check "and the doctor command" contains "$work/termination" "Why, and what to do: trainenv doctor jobset/bert -n team-a"
check "wait with nothing to wait for exits 2" exit_code 2 "$bin" wait --timeout 5
check "saying what to give" contains "$work/err" "give --resolve, --connect or --hostfile"
check "wait refuses a target without a port" exit_code 2 "$bin" wait --connect bert-0.bert
check "wait refuses a bad bound" exit_code 2 "$bin" wait --resolve localhost --timeout forever
check "wait on an unreadable hostfile exits 2" exit_code 2 "$bin" wait --hostfile "$work/no-hostfile"
check "naming it" contains "$work/err" "cannot read the hostfile $work/no-hostfile"

# --- doctor: a live job from a kubectl dump (tests/fixtures/doctor, docs/doctor.md) ------------
doctor_dumps="$src/tests/fixtures/doctor"
check "doctor of a healthy JobSet exits 0" exit_code 0 "$bin" doctor jobset/gpt -n team-a \
  --from "$doctor_dumps/healthy-jobset.json" --policies "$src/policies"
check "saying so" contains "$work/out" "healthy: every pod is where its layout puts it"
check "doctor of a stale Indexed Job exits 1" exit_code 1 "$bin" doctor job/pretrain -n team-a \
  --from "$doctor_dumps/stale-after-resize.json" --policies "$src/policies"
check "naming the value found and expected" contains "$work/out" "WORLD_SIZE 3, expected 4"
check "and the fix" contains "$work/out" "fix: delete the pod"
check "doctor -o json: the findings under doctor, preview --job's pods beside them" bash -c "'$bin' doctor \
  job/pretrain -n team-a --from '$doctor_dumps/stale-after-resize.json' --policies '$src/policies' -o json \
  | jq -e '(.doctor.healthy | not) and ([.doctor.findings[].kind] | unique) == [\"stale\"] and (.pods | length) == 4' >/dev/null"
llama_pod=$(jq -r '[.items[] | select(.kind == "Pod")][0].metadata.name' "$doctor_dumps/healthy-trainjob.json")
check "doctor of a pod explains its job" exit_code 0 "$bin" doctor "pod/$llama_pod" -n team-a \
  --from "$doctor_dumps/healthy-trainjob.json" --policies "$src/policies"
check "the TrainJob" contains "$work/out" "TrainJob team-a/llama"
check "doctor of a job not in the dump exits 2" exit_code 2 "$bin" doctor jobset/nope -n team-a \
  --from "$doctor_dumps/healthy-jobset.json" --policies "$src/policies"
check "naming it" contains "$work/err" "no JobSet.jobset.x-k8s.io nope in namespace team-a in the --from file"
check "doctor with no cluster to read exits 2" exit_code 2 env -u KUBECONFIG -u KUBERNETES_SERVICE_HOST \
  HOME="$work" "$bin" doctor jobset/gpt --policies "$src/policies"
check "saying where it looked" contains "$work/err" "no cluster to read: give --kubeconfig FILE (or set KUBECONFIG), or --from FILE"
check "doctor of an unknown kind exits 2" exit_code 2 "$bin" doctor deployment/x --from "$doctor_dumps/healthy-jobset.json" \
  --policies "$src/policies"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
