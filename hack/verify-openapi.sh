#!/usr/bin/env bash
# Fails when pkg/api/generated/openapi/zz_generated.openapi.go is not what hack/update-openapi.sh generates now
# (the k8s.io/metrics or kube-openapi version moved, or someone edited the file). Fix: hack/update-openapi.sh.
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TMP=$(mktemp -d)
trap 'rm -rf "${TMP}"' EXIT

"${ROOT}/hack/update-openapi.sh" "${TMP}"
if ! diff -u "${ROOT}/pkg/api/generated/openapi/zz_generated.openapi.go" "${TMP}/zz_generated.openapi.go"; then
	echo "pkg/api/generated/openapi/zz_generated.openapi.go is stale: run hack/update-openapi.sh" >&2
	exit 1
fi
