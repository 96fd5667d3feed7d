# The kind tier's measuring scenarios, none of them a default (E2E_SCENARIOS names them),
# sourced by hack/e2e-kind.sh after hack/kind/node_scenarios.sh (whose helpers they use):
# pod start-up (benchmarks/pod_startup.py), and what a plain Pod gang gets from a node's
# loss (benchmarks/node_failures.py).

# ------------------------------------------------- pod start-up, measured (not a default)
# benchmarks/pod_startup.py on this cluster (the trainer image is its DNS probe's: bash and
# getent), then its process kubelet half on the real control plane. E2E_BENCH_RUNS runs of
# each (default 3); E2E_BENCH_JSON keeps the figures (docs/benchmarks.md).
scenario_bench() {
    local keep=()
    [[ -z "${E2E_BENCH_JSON:-}" ]] || keep=(--json "$E2E_BENCH_JSON")
    "$PY" benchmarks/pod_startup.py --runs "${E2E_BENCH_RUNS:-3}" --kind-context "$KCTX" \
        --kind-namespace "$JOB_NS" --kind-shared "$SHARED" --kind-tools-image "$TRAINER_IMAGE" "${keep[@]}" \
        || die "benchmarks/pod_startup.py failed"
}

# ---------------------------------------------- what a plain Pod gang gets (a benchmark)
# Not a default scenario (E2E_SCENARIOS=node_baseline; benchmarks/node_failures.py): the
# same trainer as a user runs it without ddpjob, as two Indexed Jobs of two Pods each
# (torchrun's static rendezvous on index 0, rigid; torchrun's c10d rendezvous, --nnodes=1:2,
# elastic), Kubernetes' defaults for everything else, on two workers. The node of the rigid
# gang's index 1 is killed: the seconds to each gang's next step, or none within BASELINE_S
# (its Pod waits out the 300 s not-ready/unreachable toleration, then stays Terminating: no
# kubelet confirms it, and the Job controller makes its replacement only then).
BASELINE_S=${E2E_BASELINE_S:-420}
scenario_node_baseline() {
    local ns=plain-gang kind nodes a b victim t0 step
    k create namespace "$ns"
    read -r a b < <(pod_nodes_ready | head -2 | paste -sd' ')
    for kind in rigid elastic; do
        mkdir -m 0777 "$SHARED/plain-$kind"
        plain_gang "$ns" "$kind" "$a" "$b" | k apply -f -
    done
    for kind in rigid elastic; do
        wait_for "plain $kind gang: steps at world size 2" "${TIMEOUT%s}" \
            "check resized '$SHARED/plain-$kind' --world 2 >/dev/null 2>&1"
    done
    victim=$(k -n "$ns" get pod -l job-name=plain-rigid,batch.kubernetes.io/job-completion-index=1 -o jsonpath='{.items[0].spec.nodeName}')
    settle  # a node scenario's end before it, still running (hack/kind/lanes.sh)
    t0=$(now)
    log "plain gangs: docker kill $victim"
    docker kill "$victim" >/dev/null
    # Both gangs watched at once: each one's figure is its own, not the other's wait added.
    local -A took=()
    while [[ -z ${took[rigid]:-} || -z ${took[elastic]:-} ]] && (($(since "$t0" | cut -d. -f1) < BASELINE_S)); do
        for kind in rigid elastic; do
            [[ -z ${took[$kind]:-} ]] || continue
            if check resized "$SHARED/plain-$kind" --after "$t0" --world 1 >/dev/null 2>&1 \
                || check resized "$SHARED/plain-$kind" --after "$t0" --world 2 >/dev/null 2>&1; then
                took[$kind]=$(since "$t0")
            fi
        done
        sleep 2
    done
    for kind in rigid elastic; do
        if [[ -n ${took[$kind]:-} ]]; then
            figure "plain $kind gang, Kubernetes' defaults: next step ${took[$kind]} s after the kill"
        else
            figure "plain $kind gang, Kubernetes' defaults: no step within $BASELINE_S s of the kill ($(k -n "$ns" get pods -o wide --no-headers | awk '{print $1, $3, $7}' | paste -sd';'))"
        fi
    done
    start_node "$victim"
    k delete namespace "$ns" --wait=false
}

pod_nodes_ready() { k get nodes -l '!node-role.kubernetes.io/control-plane' -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}'; }

# The Indexed Job (and its headless Service) of a plain gang: the trainer under torchrun as
# its image runs it, one Pod on each of nodes A and B, its files on the shared folder.
plain_gang() {  # NAMESPACE rigid|elastic A B
    "$PY" - "$1" "$2" "$3" "$4" "$TRAINER_IMAGE" <<'PYEOF'
import json, sys
ns, kind, a, b, image = sys.argv[1:]
name = f"plain-{kind}"
host = f"{name}-0.{name}.{ns}.svc"
if kind == "rigid":
    rdzv = f"--nnodes=2 --node-rank=$(JOB_COMPLETION_INDEX) --master-addr={host} --master-port=29500"
else:
    rdzv = f"--nnodes=1:2 --rdzv-backend=c10d --rdzv-endpoint={host}:29500 --rdzv-id={name} --max-restarts=100"
train = ("-m ddpjob_trainer.train --model mlp --data synthetic --epochs 8 --synthetic-size 8192 --batch-size 64 "
         "--checkpoint-dir /checkpoints --checkpoint-every-steps 10 --log-every 10 --sample-log /checkpoints")
container = {"name": "trainer", "image": image, "imagePullPolicy": "IfNotPresent",
             "command": ["bash", "-c", f"exec python -m torch.distributed.run --nproc-per-node=1 {rdzv} {train}"],
             "env": [{"name": "DDPJOB_TEST_STEP_SECONDS", "value": "0.2"}],
             "resources": {"requests": {"cpu": "100m", "memory": "512Mi"}, "limits": {"memory": "2Gi"}},
             "volumeMounts": [{"name": "checkpoints", "mountPath": "/checkpoints"}]}
spread = {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"job-name": name}}}
affinity = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [spread]},
            # A node field selector takes one value per requirement: a term per node (ORed).
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [n]}]} for n in (a, b)]}}}
job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": ns},
       "spec": {"completions": 2, "parallelism": 2, "completionMode": "Indexed", "backoffLimit": 100,
                "template": {"spec": {"subdomain": name, "restartPolicy": "OnFailure", "affinity": affinity,
                                      "containers": [container],
                                      "volumes": [{"name": "checkpoints", "hostPath": {
                                          "path": f"/var/ddpjob-shared/{name}", "type": "Directory"}}]}}}}
service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": ns},
           "spec": {"clusterIP": "None", "publishNotReadyAddresses": True, "selector": {"job-name": name}}}
print(json.dumps({"apiVersion": "v1", "kind": "List", "items": [service, job]}))
PYEOF
}
