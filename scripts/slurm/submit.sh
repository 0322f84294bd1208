#!/bin/bash
# Submits the matrix as an array of TASKS shards and the merge step after it.
#
#   scripts/slurm/submit.sh 8 --series C1,C2,C3 --runs 30
#
# ACH_BIN and ACH_OUT as in array.sbatch; extra sbatch options (partition, account) go in
# SBATCH_* environment variables, e.g. SBATCH_PARTITION=compute.
set -euo pipefail
here=$(dirname "$0")
tasks=${1:?usage: submit.sh TASKS [experiments arguments...]}
shift
array=$(sbatch --parsable --array="0-$((tasks - 1))" "$here/array.sbatch" "$@")
array=${array%%;*}
merge=$(sbatch --parsable --dependency="afterok:$array" "$here/merge.sbatch" "$@")
echo "array job $array ($tasks tasks), merge job ${merge%%;*}; results in ${ACH_OUT:-results}"
