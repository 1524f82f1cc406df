#!/usr/bin/env bash
# The module boundaries src/README.md promises: the modules that dispatch through the pipeline
# registry (apps/, feed/, parallel/, checkpoint/, audit/, python/) include no pipeline's header,
# and only the listed modules see MPI, HDF5 and CUDA. Usage: layering_test.sh REPO_ROOT
set -euo pipefail
cd "$1"
status=0
check() {  # $1: what, $2: extended regex, then the paths that must not match
  local what=$1 pattern=$2
  shift 2
  local hits
  hits=$(grep -rnE --include='*.h' --include='*.cc' --include='*.cu' "$pattern" "$@" || true)
  if [ -n "$hits" ]; then
    echo "FAIL: $what:"
    echo "$hits"
    status=1
  fi
}
S=src/gridfeed
check "a pipeline's header outside order/" \
  '#include "gridfeed/order/(megatron|olmo|mixture|sft|fim)/' \
  apps $S/feed $S/parallel $S/checkpoint $S/audit $S/python $S/config $S/io $S/text $S/core
check "MPI outside parallel/, feed/, python/ and apps/" '#include <mpi\.h>' \
  $S/order $S/io $S/text $S/config $S/core $S/checkpoint $S/audit
check "HDF5 outside checkpoint/" '#include <(hdf5|H5[A-Za-z]*)\.h>' \
  $S/order $S/io $S/text $S/config $S/core $S/feed $S/parallel $S/audit $S/python
[ "$status" -eq 0 ] && echo "layering: ok"
exit "$status"
