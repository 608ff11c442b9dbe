#!/bin/sh
# Language models: a byte-level GPT (embedding, learned positions,
# pre-LN residual blocks of causal attention and an MLP with GELU tanh,
# a head tied to the embedding) trained on a token stream with
# train.steps; its records (loss, acc, ppl, bpb), evaluation every
# eval_every steps on the validation stream, bit-exact resume, gradient
# accumulation and clipping, and the bad inputs of issue 28.
. "$(dirname "$0")/lib.sh"

gpt_text text
gpt_yaml train.dlt val.dlt >gpt.yaml
echo "checkpoint: {every: 20 steps, best: val.loss}" >>gpt.yaml

# field RUN SPLIT KEY: KEY of the SPLIT's records, one a line
field() {
	grep "\"split\":\"$2\"" "$1/metrics.jsonl" | sed -n "s/.*\"$3\":\([-0-9.e+]*\).*/\1/p"
}

untimed() {
	grep -v '^{"event":"resume"' "$1" |
	sed -e 's/,"\(samples_per_s\|train_time\|startup\|time\)":[^,}]*//g'
}

test_expect_success 'dlt-prep text makes the streams' '
	dlt-prep text text --split 0.9 -o train.dlt -o val.dlt &&
	dlt-prep info --json train.dlt | grep -q "\"kind\":\"tokens\""
'

test_expect_success 'a GPT trains on the stream: the validation loss falls well below ln 256' '
	dlt-train -c gpt.yaml -o gpt -q >out &&
	field gpt val loss >val && test $(wc -l <val) = 3 &&
	first=$(head -1 val) && last=$(tail -1 val) && echo "val loss $first ... $last" &&
	perl -e "exit !($last < $first && $last < 3.3)" &&
	grep -q "\"event\":\"train\",\"epoch\":1,\"step\":10,\"loss\":.*\"acc\":.*\"ppl\":.*\"bpb\":" \
		gpt/metrics.jsonl &&
	bpb=$(field gpt val bpb | tail -1) &&
	perl -e "exit !(abs($bpb - $last / log(2)) < 1e-9)" &&
	test -f gpt/ckpt/best.dlt && test -f gpt/model.dlt
'

test_expect_success 'the same config trains the same bits' '
	dlt-train -c gpt.yaml -o again -q >/dev/null &&
	cmp gpt/model.dlt again/model.dlt && cmp gpt/ckpt/step-00000060.dlt again/ckpt/step-00000060.dlt
'

test_expect_success 'SIGTERM at step 30 and --resume: the checkpoints and records of the run that never stopped' '
	DLT_TEST_STEP_DELAY=0.05 dlt-train -c gpt.yaml -o stop -q >/dev/null 2>&1 &
	pid=$! &&
	i=0 && until grep -q "\"step\":30," stop/metrics.jsonl 2>/dev/null; do
		i=$((i + 1)); [ $i -lt 600 ] || break; sleep 0.05; done &&
	kill -TERM $pid && wait $pid;
	grep -q "\"status\":\"stopped\"" stop/status &&
	dlt-train --resume stop -q >/dev/null &&
	cmp gpt/model.dlt stop/model.dlt && cmp gpt/ckpt/step-00000060.dlt stop/ckpt/step-00000060.dlt &&
	untimed gpt/metrics.jsonl >want && untimed stop/metrics.jsonl >got && test_cmp want got
'

test_expect_success 'train.accumulate: 2 micro-batches of 4 make the step of a batch of 8, to rounding' '
	one="-s train.steps=1 -s train.eval_every=0 -s train.clip=0 -s checkpoint.best=null" &&
	dlt-train -c gpt.yaml -o acc -q -s train.batch=4 -s train.accumulate=2 $one \
		-s "train.optimizer={sgd: {lr: 1}}" >/dev/null &&
	dlt-train -c gpt.yaml -o one -q $one -s "train.optimizer={sgd: {lr: 1}}" >/dev/null &&
	dlt-ckpt diff acc/model.dlt one/model.dlt >diff; cat diff &&
	awk "NR > 1 && \$4 + 0 > 1e-6 { bad = 1 } END { exit bad }" diff &&
	grep -q "  accumulate: 2" acc/config.yaml
'

test_expect_success 'attention dropout 0.1: other weights; the same bits at 1 and 2 threads, and over a resume' '
	drop="-s model.2.residual.1.attention.dropout=0.1" &&
	sed "/schedule:/d; s/every: 20 steps, //" gpt.yaml >const.yaml &&
	DLT_THREADS=1 dlt-train -q -c const.yaml -o d40 -s train.steps=40 $drop >/dev/null &&
	DLT_THREADS=2 dlt-train -q -c const.yaml -o d40b -s train.steps=40 $drop >/dev/null &&
	cmp d40/model.dlt d40b/model.dlt &&
	dlt-train -q -c const.yaml -o d20 -s train.steps=20 $drop >/dev/null &&
	dlt-train -q --resume d20 -s train.steps=40 >/dev/null &&
	cmp d40/model.dlt d20/model.dlt &&
	dlt-train -q -c const.yaml -o n40 -s train.steps=40 >/dev/null &&
	! cmp -s d40/model.dlt n40/model.dlt &&
	grep -q "attention: {heads: 2, causal: true, dropout: 0.1}" d40/config.yaml &&
	field d40 val loss | tail -1 >dl && field n40 val loss | tail -1 >nl &&
	perl -e "exit !(abs($(cat dl) - $(cat nl)) < 0.1)"
'

test_expect_success 'bad inputs: one line, exit 2, no run directory' '
	test_must_fail 2 "the model ends with 100 features but the data has 256 tokens in its vocabulary" \
		dlt-train -c gpt.yaml -o bad1 -s model.0.embedding.vocab=100 &&
	test_must_fail 2 "a vocabulary of 256 tokens, but the model'"'"'s embedding has 100" \
		dlt-train -c gpt.yaml -o bad1 -s model.0.embedding.vocab=100 -s model.5=null \
		-s "model.5={dense: 256}" &&
	test_must_fail 2 "train.context 40 + 1" \
		sh -c "head -c 30 text >short && dlt-prep text short -o short.dlt &&
		       dlt-train -c gpt.yaml -o bad2 -s data.train=short.dlt -s train.context=40 -s model.1.positional.max=40" &&
	test_must_fail 2 "token data needs train.steps and train.context" \
		dlt-train -c gpt.yaml -o bad3 -s train.steps=0 &&
	test_must_fail 2 "dense: tie: '"'"'wte'"'"' is [256, 32], but this layer'"'"'s input has 64 features" \
		dlt-train -c gpt.yaml -o bad4 -s model.4=null -s "model.4={dense: 64}" &&
	printf "a,b,y\n1,2,0\n3,4,1\n" >t.csv && dlt-prep csv t.csv -l y -o t.dlt &&
	test_must_fail 2 "the model starts with an embedding (token ids), but this is not a token archive" \
		dlt-train -c gpt.yaml -o bad5 -s data.train=t.dlt -s data.val=null -s checkpoint.best=null &&
	test_must_fail 2 "token data needs a model that starts with an embedding" \
		dlt-train -c gpt.yaml -o bad6 -s model.0=null -s "model.0={dense: 32}" &&
	! test -e bad1 && ! test -e bad2 && ! test -e bad3 && ! test -e bad4 && ! test -e bad5
'

test_done
