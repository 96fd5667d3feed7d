#!/usr/bin/env bash
# Copies the CRD and the admission policy from their single sources (manifests/crd/,
# manifests/policy/) to the two places that need a copy of them: the Helm chart's files/crds/ (templates/crd.yaml renders it, so that
# `helm upgrade` applies a new schema; Helm never upgrades what is in crds/) and the
# kustomize base (kustomize loads no files from outside its folder). The tests in
# tests/deploy fail until the copies are identical again.
set -euo pipefail
cd "$(dirname "$0")/.."
rm -f charts/ddpjob-operator/files/crds/*.yaml
cp manifests/crd/*.yaml charts/ddpjob-operator/files/crds/
cp manifests/crd/ddpjobs.ddpjob.io.yaml manifests/base/crd.yaml
rm -f charts/ddpjob-operator/files/policy/*.yaml
cp manifests/policy/*.yaml charts/ddpjob-operator/files/policy/
cp manifests/policy/ddpjob-author-rights.yaml manifests/base/author-rights.yaml
echo "synced: charts/ddpjob-operator/files/{crds,policy}/ and manifests/base/{crd,author-rights}.yaml from manifests/"
