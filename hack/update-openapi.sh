#!/usr/bin/env bash
# Regenerates the OpenAPI definitions served by metrics-ring (pkg/api/generated/openapi/zz_generated.openapi.go)
# from the k8s.io/metrics v1 and v1beta1 types and the apimachinery types they reference, with kube-openapi's openapi-gen
# at the version go.mod pins (a `tool` directive), so it runs offline from the module cache.
#
# Usage: hack/update-openapi.sh [OUTPUT_DIR]   (default: pkg/api/generated/openapi)
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT_DIR=${1:-"${ROOT}/pkg/api/generated/openapi"}
mkdir -p "${OUT_DIR}"
cd "${ROOT}"

go tool openapi-gen \
	--output-pkg github.com/metrics-ring/metrics-ring/pkg/api/generated/openapi \
	--output-dir "${OUT_DIR}" \
	--output-file zz_generated.openapi.go \
	--go-header-file "${ROOT}/hack/boilerplate.go.txt" \
	--report-filename /dev/null \
	k8s.io/metrics/pkg/apis/metrics/v1 \
	k8s.io/metrics/pkg/apis/metrics/v1beta1 \
	k8s.io/apimachinery/pkg/apis/meta/v1 \
	k8s.io/apimachinery/pkg/api/resource \
	k8s.io/apimachinery/pkg/runtime \
	k8s.io/apimachinery/pkg/version
