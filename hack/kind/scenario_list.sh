#!/usr/bin/env bash
# The kind tier's scenarios, in the order hack/e2e-kind.sh runs them, from its knobs:
# E2E_SCENARIOS names them all; else the default ones, then the node scenarios
# (docs/node-failures.md: 8 to 10 of the tier's 14 to 16 min here), all of them unless
# E2E_NODE_SCENARIOS says 0 (none) or names some (those, in this order: .ci/run runs the
# ones its time left allows). A name that is not a node scenario is refused (exit 2).
set -euo pipefail
DEFAULT_SCENARIOS="example restart elastic oom graceful curves"
NODE_SCENARIOS="node_elastic node_rigid partition node_drain node_unhealthy operator_loss"
if [[ -n ${E2E_SCENARIOS:-} ]]; then
    echo "$E2E_SCENARIOS"
    exit 0
fi
list=$DEFAULT_SCENARIOS
case ${E2E_NODE_SCENARIOS:-1} in
    1) list+=" $NODE_SCENARIOS" ;;
    0) ;;
    *)
        for name in $E2E_NODE_SCENARIOS; do
            [[ " $NODE_SCENARIOS " == *" $name "* ]] || {
                echo "E2E_NODE_SCENARIOS: '$name' is not a node scenario (0, 1, or some of: $NODE_SCENARIOS)" >&2
                exit 2
            }
        done
        for name in $NODE_SCENARIOS; do
            [[ " $E2E_NODE_SCENARIOS " != *" $name "* ]] || list+=" $name"
        done
        ;;
esac
echo "$list"
