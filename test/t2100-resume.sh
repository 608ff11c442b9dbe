#!/bin/sh
# Checkpoints and resume: a run killed (kill -9, SIGTERM) or restarted by
# --restarts ends with the same bytes as the run that never stopped.
. "$(dirname "$0")/lib.sh"

blobs_csv >blobs.csv
cat >mlp.yaml <<'YAML'
data: {train: train.dlt, test: test.dlt, val_split: 0.1}
model: [dense: 32, relu, dropout: 0.1, dense: 3]
train:
  epochs: 3
  batch: 16
  seed: 7
  log_every: 10
  optimizer: {adam: {lr: 1e-2}}
  schedule: {cosine: {warmup: 5}}
YAML
# 432 training samples: 27 steps an epoch, 81 in all
FINAL=ckpt/step-00000081.dlt

untimed() {
	grep -v '^{"event":"resume"' "$1" |
	sed -e 's/,"\(samples_per_s\|train_time\|startup\|time\)":[^,}]*//g'
}

# wait_for FILE PATTERN: until a line of FILE matches (at most 20 s)
wait_for() {
	i=0
	until grep -q "$2" "$1" 2>/dev/null; do
		i=$((i + 1))
		[ $i -lt 400 ] || { echo "timed out waiting for $2 in $1"; return 1; }
		sleep 0.05
	done
}

# same_run DIR: DIR ended as the uninterrupted run did
same_run() {
	cmp ref/$FINAL "$1/$FINAL" && cmp ref/model.dlt "$1/model.dlt" &&
	untimed ref/metrics.jsonl >want && untimed "$1/metrics.jsonl" >got &&
	test_cmp want got && grep -q '"status":"done"' "$1/status"
}

# slowed down, so that a signal lands in the middle of epoch 2
export DLT_TEST_STEP_DELAY=0.02

test_expect_success 'the uninterrupted run checkpoints every epoch' '
	dlt-prep csv blobs.csv --label kind --shuffle --split 0.8 -o train.dlt -o test.dlt &&
	DLT_TEST_STEP_DELAY= dlt-train -c mlp.yaml -o ref -q >/dev/null &&
	ls ref/ckpt >list && printf "%s\n" step-00000027.dlt step-00000054.dlt \
		step-00000081.dlt >want && test_cmp want list
'

test_expect_success 'the same config writes the same checkpoint bytes' '
	DLT_TEST_STEP_DELAY= dlt-train -c mlp.yaml -o again -q >/dev/null &&
	cmp ref/ckpt/step-00000027.dlt again/ckpt/step-00000027.dlt &&
	cmp ref/$FINAL again/$FINAL
'

test_expect_success 'kill -9 in epoch 2, --resume: the same checkpoint and metrics' '
	dlt-train -c mlp.yaml -o k9 -q >/dev/null 2>&1 &
	pid=$! &&
	wait_for k9/metrics.jsonl "\"epoch\":2" &&
	kill -9 $pid && ! wait $pid &&
	grep -q "\"status\":\"running\"" k9/status &&
	! test -f k9/$FINAL &&
	dlt-train --resume k9 -q >out 2>err &&
	grep -q "^{\"event\":\"resume\",\"epoch\":2,\"step\":27,\"from\":\"k9/ckpt/step-00000027.dlt\"}$" \
		k9/metrics.jsonl &&
	same_run k9
'

test_expect_success 'SIGTERM checkpoints the step and exits 0; --resume goes on' '
	dlt-train -c mlp.yaml -o term -q >/dev/null 2>err &
	pid=$! &&
	wait_for term/metrics.jsonl "\"epoch\":2" &&
	kill -TERM $pid && wait $pid &&
	grep -q "^dlt-train: stopped at step [0-9]*; checkpoint term/ckpt/step-000000[345][0-9].dlt; go on with: dlt-train --resume term$" err &&
	grep -q "\"status\":\"stopped\"" term/status &&
	dlt-train --resume term -q >/dev/null &&
	same_run term
'

test_expect_success 'SIGUSR1 writes a checkpoint and the run goes on' '
	dlt-train -c mlp.yaml -o usr1 -q >/dev/null 2>&1 &
	pid=$! &&
	wait_for usr1/metrics.jsonl "\"epoch\":2" &&
	kill -USR1 $pid && wait $pid &&
	ls usr1/ckpt | grep -v "step-000000\(27\|54\|81\)" | grep -q "^step-000000[345][0-9].dlt$" &&
	same_run usr1
'

test_expect_success '--restarts 3 restarts a process killed with kill -9' '
	dlt-train -c mlp.yaml -o sup --restarts 3 -q >/dev/null 2>err &
	sup=$! &&
	wait_for sup/metrics.jsonl "\"epoch\":2" &&
	child=$(sed "s/.*\"pid\":\([0-9]*\).*/\1/" sup/status) &&
	test "$child" != "$sup" &&
	kill -9 "$child" && wait $sup &&
	grep -q "^dlt-train: restart 1 of 3: the training process was killed by signal 9 (Killed)$" err &&
	grep -q "\"event\":\"resume\",\"epoch\":2,.*\"note\":\"restart 1 of 3: the training process was killed by signal 9 (Killed)\"" sup/metrics.jsonl &&
	same_run sup
'

test_expect_success '--restarts 0 reports the death and exits 1' '
	dlt-train -c mlp.yaml -o sup0 --restarts 1 -q >/dev/null 2>err &
	sup=$! &&
	wait_for sup0/metrics.jsonl "\"epoch\":1" &&
	kill -9 $(sed "s/.*\"pid\":\([0-9]*\).*/\1/" sup0/status) &&
	wait_for sup0/metrics.jsonl "\"event\":\"resume\"" &&
	sleep 0.2 &&
	kill -9 $(sed "s/.*\"pid\":\([0-9]*\).*/\1/" sup0/status) &&
	! wait $sup &&
	grep -q "^dlt-train: the training process was killed by signal 9 (Killed); no restarts left$" err
'

test_expect_success 'a damaged newest checkpoint is reported and the one before used' '
	cp -r ref dmg && rm dmg/model.dlt && rm dmg/$FINAL &&
	sed "s/\"status\":\"done\"/\"status\":\"running\"/" ref/status >dmg/status &&
	size=$(wc -c <dmg/ckpt/step-00000054.dlt) &&
	head -c $((size - 100)) ref/ckpt/step-00000054.dlt >dmg/ckpt/step-00000054.dlt &&
	DLT_TEST_STEP_DELAY= dlt-train --resume dmg -q >/dev/null 2>err &&
	grep -q "^dlt-train: warning: dmg/ckpt/step-00000054.dlt: .*; using the checkpoint before it$" err &&
	grep -q "\"from\":\"dmg/ckpt/step-00000027.dlt\"" dmg/metrics.jsonl &&
	same_run dmg
'

test_expect_success 'a finished run is not resumed' '
	test_must_fail 2 "dlt-train: ref: the run is done; nothing to resume" dlt-train --resume ref
'

test_expect_success '--resume refuses -c, -o and -s other than train.epochs, and a directory without a run' '
	test_must_fail 2 "dlt-train: --resume takes the run" dlt-train --resume ref -c mlp.yaml &&
	test_must_fail 2 "dlt-train: --resume: -s train.batch=2: only train.epochs can change on resume" \
		dlt-train --resume ref -s train.batch=2 &&
	test_must_fail 2 "dlt-train: --resume: -s train.epochs: " dlt-train --resume ref -s train.epochs=0 &&
	test_must_fail 2 "dlt-train: ref: the run is done; nothing to resume" \
		dlt-train --resume ref -s train.epochs=3 &&
	mkdir empty &&
	test_must_fail 2 "empty/config.yaml" dlt-train --resume empty &&
	test_must_fail 2 "dlt-train: --restarts" dlt-train -c mlp.yaml --restarts -1
'

# A constant learning rate, so the run to 1 epoch raised to 2, then 3, is
# the run to 3 from the start (cosine's steps depend on the total); the
# second resume keeps the records after the first one's resume record.
test_expect_success '--resume -s train.epochs raises a done run twice: the run trained to 3 epochs at once' '
	sed "/schedule:/d" mlp.yaml >const.yaml &&
	DLT_TEST_STEP_DELAY= dlt-train -c const.yaml -o three -q >/dev/null &&
	DLT_TEST_STEP_DELAY= dlt-train -c const.yaml -o one -q -s train.epochs=1 >/dev/null &&
	DLT_TEST_STEP_DELAY= dlt-train --resume one -q -s train.epochs=2 >/dev/null &&
	DLT_TEST_STEP_DELAY= dlt-train --resume one -q -s train.epochs=3 >/dev/null &&
	cmp three/$FINAL one/$FINAL &&
	untimed three/metrics.jsonl >want && untimed one/metrics.jsonl >got && test_cmp want got &&
	grep -q "^{\"event\":\"resume\",\"epoch\":2,\"step\":27,\"epochs\":2," one/metrics.jsonl &&
	grep -q "^{\"event\":\"resume\",\"epoch\":3,\"step\":54,\"epochs\":3," one/metrics.jsonl &&
	grep -q "^  epochs: 3$" one/config.yaml &&
	test_must_fail 2 "dlt-train: one: the run is done; nothing to resume" \
		dlt-train --resume one -s train.epochs=2
'

test_expect_success 'checkpoint: every N steps, keep and best' '
	DLT_TEST_STEP_DELAY= dlt-train -c mlp.yaml -o pol -q \
		-s "checkpoint={every: 10 steps, keep: 2, best: val.loss}" >/dev/null &&
	ls pol/ckpt >list && printf "%s\n" best.dlt step-00000070.dlt step-00000080.dlt >want &&
	test_cmp want list
'

# A tmpfs with room for the data and one checkpoint, not two, mounted in
# a private mount namespace (unshare -m, or -rm where only user
# namespaces are allowed).
test_expect_success 'a full disk: the checkpoint is reported, the earlier ones verify' '
	cat >full.sh <<-EOF &&
	mount -t tmpfs -o size=96k tmpfs mnt || exit 1
	cp train.dlt test.dlt mlp.yaml mnt/ && cd mnt &&
	DLT_TEST_STEP_DELAY= dlt-train -c mlp.yaml -o run -q -s model.0.dense=400 \
		>/dev/null 2>../full.err
	echo \$? >../full.status
	ls run/ckpt >../full.ls
	dlt-ckpt verify run/ckpt/*.dlt >../full.verify 2>&1
	EOF
	mkdir mnt &&
	{ unshare -m sh full.sh 2>/dev/null || unshare -rm sh full.sh; } &&
	cat full.err full.status full.ls full.verify &&
	grep -q "^dlt-train: warning: checkpoint not written: .*No space left on device" full.err &&
	test -s full.ls && ! grep -q "^\." full.ls &&
	! grep -qv ": ok$" full.verify
'

test_done
