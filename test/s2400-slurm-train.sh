#!/bin/sh
# dlt-train under Slurm (make check-slurm): srun's ranks all-reduce through
# MPI like mpirun's; rank 0 alone writes the run.
. "$(dirname "$0")/lib.sh"
DLT_THREADS=1
OMPI_ALLOW_RUN_AS_ROOT=1
OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
OMPI_MCA_rmaps_base_oversubscribe=1
export DLT_THREADS OMPI_ALLOW_RUN_AS_ROOT OMPI_ALLOW_RUN_AS_ROOT_CONFIRM \
	OMPI_MCA_rmaps_base_oversubscribe
[ -n "${SLURM_CONF:-}" ] || { echo "1..0 # SKIP no Slurm: run by make check-slurm"; exit 0; }

cat >mlp.yaml <<'YAML'
data: {train: train.dlt, test: test.dlt}
model: [flatten, {dense: 256}, relu, {dense: 128}, relu, {dense: 10}]
train: {epochs: 1, batch: 128, seed: 0, optimizer: {adam: {lr: 1e-3}}, schedule: cosine}
dist: {timeout: 20}
YAML

test_expect_success 'prepare 12000 training images and the test set' '
	fmnist_12000
'

test_expect_success 'srun --mpi=pmix -n 2: the parameters of mpirun -np 2 within 1e-6 relative L2' '
	mpirun -np 2 dlt-train -q -c mlp.yaml -o mpi >out 2>err &&
	srun --mpi=pmix -n 2 -t 5 dlt-train -c mlp.yaml -o slurm >out 2>err &&
	dlt-ckpt diff mpi/model.dlt slurm/model.dlt >diff && cat diff &&
	awk "\$2 == \"equal\" || \$2 == \"differs\" { if (\$4 > m) m = \$4; n++ }
		END { print n, \"tensors, largest relative L2\", m + 0; exit !(n == 6 && m < 1e-6) }" diff &&
	test $(grep -c "^test accuracy" out) = 1 &&
	test $(grep -c "^epoch 1/1" out) = 1
'

test_expect_success 'srun: a run of two ranks, written by rank 0 alone' '
	grep -q "\"event\":\"done\"" slurm/metrics.jsonl &&
	test $(grep -c "\"event\":\"done\"" slurm/metrics.jsonl) = 1 &&
	! test -e slurm/slurm
'

test_expect_success 'srun without -o: the run is named after the job; status, dlt-runs ls and dlt-smi jobs show the job and its node' '
	srun -n 1 -t 5 sh -c "echo \$SLURM_JOB_ID >jobid; exec dlt-train -q -c mlp.yaml" \
		>out 2>err &&
	j=$(cat jobid) && node=$(hostname -s) &&
	grep -q "\"status\":\"done\".*\"slurm_job\":\"$j\"" runs/mlp-$j/status &&
	dlt-runs ls runs >ls && cat ls &&
	head -1 ls | grep -q "^run  *status  *job  *node  *start " &&
	grep -q "^runs/mlp-$j  *done  *$j  *$node  " ls &&
	dlt-runs ls -f csv runs | grep -q ",$j,$node\$" &&
	dlt-smi jobs --runs runs -f csv | grep -q ",mlp-$j,done,.*,$j,$node\$" &&
	dlt-smi jobs --runs runs >smi && cat smi &&
	grep -q "^mlp-$j  *done .* $j  *$node\$" smi
'

test_expect_success 'srun: --ranks and --restarts are refused (Slurm starts and requeues the ranks)' '
	srun -n 2 -t 5 dlt-train --restarts 2 -c mlp.yaml -o refused >out 2>err;
	test $? != 0 && cat err &&
	grep -q "this is rank [01] of 2 started by srun: --ranks, --gpus and --restarts" err &&
	! test -e refused
'

test_done
