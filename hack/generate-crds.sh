#!/usr/bin/env bash
# Regenerates, from the Go sources pinned in api/go.mod:
#   - api/v1alpha2/zz_generated.deepcopy.go           (controller-gen object)
#   - manifests/crd/inference.networking.x-k8s.io_*.yaml (controller-gen crd)
#   - api/revisions/*/.../zz_generated.deepcopy.go      (controller-gen object)
#   - manifests/crd/revisions/<revision>/*.yaml        (controller-gen crd, one
#     directory per published API revision, see REVISIONS below)
#   - manifests/crd/gateway-api/*.yaml                 (Gateway API standard channel,
#     produced by the generator program of the sigs.k8s.io/gateway-api module)
#
# Usage: hack/generate-crds.sh [OUTPUT_ROOT]
#
# OUTPUT_ROOT defaults to the repository root. Any other directory receives the
# same layout (OUTPUT_ROOT/api/v1alpha2/..., OUTPUT_ROOT/manifests/crd/...);
# hack/verify-crds.sh uses this to compare a fresh generation with the tree.
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
API_DIR="${REPO_ROOT}/api"

if ! command -v go >/dev/null 2>&1; then
  echo "generate-crds: 'go' was not found on PATH; install Go 1.25 or newer to generate the CRDs" >&2
  exit 1
fi

out_root="${1:-${REPO_ROOT}}"
mkdir -p "${out_root}"
out_root="$(cd "${out_root}" && pwd -P)"

work="$(mktemp -d)"
trap 'rm -rf "${work}"' EXIT

cd "${API_DIR}"

# 1. Deepcopy functions of the InferencePool types.
go tool controller-gen \
  object:headerFile="${REPO_ROOT}/hack/boilerplate.go.txt" \
  paths=./v1alpha2/... \
  output:object:dir="${work}/deepcopy"

# 2. The InferencePool CRD.
go tool controller-gen \
  crd \
  paths=./v1alpha2/... \
  output:crd:dir="${work}/crd"

# 2b. The CRD of each published revision of the API (api/revisions/), and the
#     deepcopy functions of the packages they are made of. Each entry is
#     "<revision>=<package directory under api/revisions>". The v0.x revisions
#     are inference.networking.x-k8s.io/v1alpha2, the v1.x revisions
#     inference.networking.k8s.io/v1; each CRD names the oldest release of its
#     revision in its inference.networking.k8s.io/bundle-version annotation (a
#     marker on the InferencePool type of the revision).
REVISIONS=(
  v0.2=v0_2/v1alpha2
  v0.5=v0_5/v1alpha2
  v1.0=v1_0/v1
  v1.0.2=v1_0_2/v1
  v1.1=v1_1/v1
  v1.4=v1_4/v1
  v1.6=v1_6/v1
)
REVISION_PACKAGES=(common v0_2/v1alpha2 v0_5/v1alpha2 v1common v1_0/v1 v1_0_2/v1 v1_1/v1 v1_4/v1 v1_6/v1)
for pkg in "${REVISION_PACKAGES[@]}"; do
  go tool controller-gen \
    object:headerFile="${REPO_ROOT}/hack/boilerplate.go.txt" \
    paths="./revisions/${pkg}/..." \
    output:object:dir="${work}/revisions-deepcopy/${pkg}"
done
for entry in "${REVISIONS[@]}"; do
  go tool controller-gen \
    crd \
    paths="./revisions/${entry#*=}/..." \
    output:crd:dir="${work}/revisions-crd/${entry%%=*}"
done

# 3. Gateway API CRDs. The upstream generator writes config/crd/<channel>/ below
#    its working directory and loads the API packages through the go command, so
#    it runs in a scratch directory with a workspace that points at api/go.mod
#    (which pins the sigs.k8s.io/gateway-api version).
printf 'go 1.25\n\nuse %s\n' "${API_DIR}" >"${work}/go.work"
mkdir -p "${work}/gateway-api/config/crd/standard" "${work}/gateway-api/config/crd/experimental"
if ! (cd "${work}/gateway-api" && GOWORK="${work}/go.work" go tool generator >"${work}/gateway-api.log" 2>&1); then
  cat "${work}/gateway-api.log" >&2
  echo "generate-crds: the Gateway API CRD generator failed" >&2
  exit 1
fi

# Sanity checks before anything in OUTPUT_ROOT is touched.
shopt -s nullglob
pool_crds=("${work}"/crd/inference.networking.x-k8s.io_*.yaml)
gw_crds=("${work}"/gateway-api/config/crd/standard/gateway.networking.k8s.io_*.yaml)
shopt -u nullglob
if [[ ! -f "${work}/deepcopy/zz_generated.deepcopy.go" || ${#pool_crds[@]} -eq 0 || ${#gw_crds[@]} -eq 0 ]]; then
  echo "generate-crds: a generator produced no output" >&2
  exit 1
fi
for pkg in "${REVISION_PACKAGES[@]}"; do
  if [[ ! -f "${work}/revisions-deepcopy/${pkg}/zz_generated.deepcopy.go" ]]; then
    echo "generate-crds: controller-gen object produced nothing for api/revisions/${pkg}" >&2
    exit 1
  fi
done
for entry in "${REVISIONS[@]}"; do
  shopt -s nullglob
  rev_crds=("${work}/revisions-crd/${entry%%=*}"/inference.networking.*_inferencepools.yaml)
  shopt -u nullglob
  if [[ ${#rev_crds[@]} -ne 1 ]]; then
    echo "generate-crds: controller-gen crd produced ${#rev_crds[@]} InferencePool CRDs (want 1) for revision ${entry%%=*}" >&2
    exit 1
  fi
done

# Install: replace the generated files of each set, keep anything else.
install_set() {
  local dest="$1" pattern="$2"
  shift 2
  mkdir -p "${dest}"
  find "${dest}" -maxdepth 1 -type f -name "${pattern}" -delete
  local f
  for f in "$@"; do
    cp "${f}" "${dest}/"
    chmod 0644 "${dest}/$(basename "${f}")"
  done
}

install_set "${out_root}/api/v1alpha2" 'zz_generated.deepcopy.go' "${work}/deepcopy/zz_generated.deepcopy.go"
install_set "${out_root}/manifests/crd" 'inference.networking.x-k8s.io_*.yaml' "${pool_crds[@]}"
install_set "${out_root}/manifests/crd/gateway-api" 'gateway.networking.*.yaml' "${gw_crds[@]}"
for pkg in "${REVISION_PACKAGES[@]}"; do
  install_set "${out_root}/api/revisions/${pkg}" 'zz_generated.deepcopy.go' \
    "${work}/revisions-deepcopy/${pkg}/zz_generated.deepcopy.go"
done
for entry in "${REVISIONS[@]}"; do
  install_set "${out_root}/manifests/crd/revisions/${entry%%=*}" 'inference.networking.*_inferencepools.yaml' \
    "${work}/revisions-crd/${entry%%=*}"/inference.networking.*_inferencepools.yaml
done

echo "generate-crds: wrote ${#pool_crds[@]} InferencePool CRD(s) (and one per revision: ${REVISIONS[*]%%=*}) and ${#gw_crds[@]} Gateway API standard-channel CRD(s) under ${out_root}/manifests/crd"
