#!/usr/bin/env bash
# Regenerates the deepcopy code and all CRDs into a temporary directory (with
# hack/generate-crds.sh) and compares them with the files in the tree.
# Exits non-zero if anything is missing, extra or different.
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"

if ! command -v go >/dev/null 2>&1; then
  echo "verify-crds: 'go' was not found on PATH; install Go 1.25 or newer to verify the CRDs" >&2
  exit 1
fi

fresh="$(mktemp -d)"
trap 'rm -rf "${fresh}"' EXIT

if ! "${REPO_ROOT}/hack/generate-crds.sh" "${fresh}/tree" >"${fresh}/generate.log" 2>&1; then
  cat "${fresh}/generate.log" >&2
  echo "verify-crds: regeneration failed, see the output above" >&2
  exit 1
fi

# The generated files, relative to a root, one per line, sorted.
generated_files() {
  (
    cd "$1"
    {
      find api/v1alpha2 -maxdepth 1 -type f -name 'zz_generated.deepcopy.go'
      find manifests/crd -maxdepth 1 -type f -name 'inference.networking.x-k8s.io_*.yaml'
      find manifests/crd/gateway-api -maxdepth 1 -type f -name 'gateway.networking.*.yaml'
      find api/revisions -type f -name 'zz_generated.deepcopy.go'
      find manifests/crd/revisions -mindepth 2 -maxdepth 2 -type f -name 'inference.networking.*_inferencepools.yaml'
    } 2>/dev/null | LC_ALL=C sort
  )
}

expected="$(generated_files "${fresh}/tree")"
actual="$(generated_files "${REPO_ROOT}")"

stale=()
while IFS= read -r f; do
  [[ -n "${f}" ]] || continue
  if [[ ! -f "${REPO_ROOT}/${f}" ]]; then
    stale+=("${f} (missing)")
  elif ! cmp -s "${fresh}/tree/${f}" "${REPO_ROOT}/${f}"; then
    stale+=("${f} (differs)")
  fi
done <<<"${expected}"
while IFS= read -r f; do
  [[ -n "${f}" ]] || continue
  if [[ ! -f "${fresh}/tree/${f}" ]]; then
    stale+=("${f} (no longer generated)")
  fi
done <<<"${actual}"

if [[ ${#stale[@]} -gt 0 ]]; then
  printf '  %s\n' "${stale[@]}" >&2
  echo "verify-crds: generated files are out of sync with api/ and api/go.mod; run hack/generate-crds.sh" >&2
  exit 1
fi

echo "verify-crds: $(wc -l <<<"${expected}" | tr -d ' ') generated files are up to date"
