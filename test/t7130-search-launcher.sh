#!/bin/sh
# dlt-search --launcher slurm without a cluster: the sbatch command line it
# builds (a stand-in sbatch writes it down), --gpus-per-trial K as
# --gres=gpu:K and dlt-train --gpus K, and the usage errors.
. "$(dirname "$0")/lib.sh"

blobs_csv >blobs.csv
cat >mlp.yaml <<'YAML'
data: {train: train.dlt, test: test.dlt}
model: [dense: 16, relu, dense: 3]
train: {epochs: 2, batch: 16, seed: 7, optimizer: {adam: {lr: 1e-2}}}
YAML
cat >grid.yaml <<'YAML'
base: mlp.yaml
metric: test.acc
method: grid
params:
  model.0.dense: {choice: [8, 32]}
YAML
# sbatch that writes its arguments down, one a line, and refuses the job
mkdir fake
cat >fake/sbatch <<'SH'
#!/bin/sh
printf '%s\n' "$@" >>sbatch.args
echo "sbatch: error: the stand-in takes no jobs" >&2
exit 1
SH
chmod +x fake/sbatch

test_expect_success 'setup: data' '
	dlt-prep csv blobs.csv --label kind --shuffle --split 0.8 -o train.dlt -o test.dlt
'

test_expect_success 'slurm: sbatch gets the job, the log, one task of T cores and --sbatch-args' '
	DLT_THREADS=4 PATH=$PWD/fake:$PATH test_must_fail 1 \
		"dlt-search: trial 000: sbatch: sbatch: error: the stand-in takes no jobs" \
		dlt-search -q -c grid.yaml -o s -j 2 --launcher slurm \
		--sbatch-args "-p  gpu -t 1:00 --account='"'my account'"' \"-J\"x" &&
	head -13 sbatch.args >got &&
	cat >want <<-EOF &&
	--parsable
	-J
	dlt-trial-000
	-o
	s/logs/000.log
	--open-mode=append
	--comment=dlt-search $PWD/s job 0
	-n
	1
	-c
	2
	-p
	gpu
	EOF
	test_cmp want got &&
	sed -n "14,\$p" sbatch.args >got &&
	printf "%s\n" -t 1:00 "--account=my account" -Jx --wrap >want &&
	head -5 got | test_cmp want - &&
	tail -1 got | grep -q "^exec '"'"'[^ ]*/dlt-train'"'"' '"'"'-c'"'"' '"'"'mlp.yaml'"'"' '"'"'-o'"'"' '"'"'s/trials/000'"'"' '"'"'-s'"'"' '"'"'train.threads=2'"'"' '"'"'-s'"'"' '"'"'model.0.dense=8'"'"' '"'"'-q'"'"'$" &&
	grep -q "\"event\":\"search\",.*\"launcher\":\"slurm\",\"sbatch_args\":\"-p  gpu" s/journal.jsonl
'

test_expect_success 'slurm --gpus-per-trial 2: --gres=gpu:2, dlt-train --gpus 2 on device cuda' '
	rm -f sbatch.args &&
	PATH=$PWD/fake:$PATH test_must_fail 1 "trial 000: sbatch: " \
		dlt-search -q -c grid.yaml -o g --launcher slurm --gpus-per-trial 2 &&
	grep -qx -- "--gres=gpu:2" sbatch.args &&
	tail -1 sbatch.args | grep -q "'"'"'-s'"'"' '"'"'device=cuda'"'"' .* '"'"'--gpus'"'"' '"'"'2'"'"' '"'"'-q'"'"'$"
'

test_expect_success 'usage: --launcher, --sbatch-args, --gpus with slurm' '
	test_must_fail 2 "--launcher: '"'"'pbs'"'"' is not local or slurm" \
		dlt-search -c grid.yaml -o u --launcher pbs &&
	test_must_fail 2 "--sbatch-args: '"'"' not closed: -t '"'"'1" \
		dlt-search -c grid.yaml -o u --launcher slurm --sbatch-args "-t '"'"'1" &&
	test_must_fail 2 "--sbatch-args needs --launcher slurm" \
		dlt-search -c grid.yaml -o u --sbatch-args "-t 1" &&
	test_must_fail 2 "--gpus picks GPUs of this machine: with --launcher slurm give --gpus-per-trial K" \
		dlt-search -c grid.yaml -o u --launcher slurm --gpus 0,1 &&
	test ! -e u
'

test_done
