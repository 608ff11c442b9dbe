#!/bin/sh
# Tasks other than classification, through the one data path and loss
# interface: regression (float targets, mse/l1/huber, metrics rmse, mae
# and r2 in the targets' units), multi-label (multi-hot labels, bce,
# metrics acc and f1); bit-exact resume, checkpoint.best by a task's
# metric, dlt-infer in the targets' units, and the loss that does not fit
# the data refused.
. "$(dirname "$0")/lib.sh"

# y = 100 + 20 a - 30 b^2 + 5 c (+ noise), z = [a b > 0] + c / 2; labels
# of the multi-label set: a > 0, b > c, a + b + c > 1 (a, b, c standard
# normal, from a fixed LCG through Box-Muller)
perl -e '
	my $s = 12345;
	sub r { $s = ($s * 1103515245 + 12345) % 2147483648; return ($s + 0.5) / 2147483648; }
	sub g { return sqrt(-2 * log(r())) * cos(6.283185307179586 * r()); }
	open(my $r, ">", "reg.csv") or die;
	open(my $m, ">", "multi.csv") or die;
	print $r "a,b,c,y,z\n";
	print $m "a,b,c,p,q,s\n";
	for (1 .. 1500) {
		my ($a, $b, $c) = (g(), g(), g());
		printf $r "%.5f,%.5f,%.5f,%.4f,%.4f\n", $a, $b, $c,
			100 + 20 * $a - 30 * $b * $b + 5 * $c + 0.5 * g(),
			($a * $b > 0 ? 1 : 0) + 0.5 * $c;
		printf $m "%.5f,%.5f,%.5f,%d,%d,%d\n", $a, $b, $c, $a > 0 ? 1 : 0,
			$b > $c ? 1 : 0, $a + $b + $c > 1 ? 1 : 0;
	}'
cat >reg.yaml <<'YAML'
data: {train: rtrain.dlt, test: rtest.dlt, val_split: 0.1}
model: [dense: 64, relu, dense: 64, relu, dense: 2]
train: {epochs: 12, batch: 32, seed: 3, log_every: 20, optimizer: {adam: {lr: 3e-3}}}
checkpoint: {best: val.rmse}
YAML
cat >multi.yaml <<'YAML'
data: {train: mtrain.dlt, test: mtest.dlt}
model: [dense: 32, relu, dense: 3]
train: {epochs: 15, batch: 32, seed: 1, optimizer: {adam: {lr: 1e-2}}}
YAML

# field RUN KEY: KEY of the run's last test evaluation
field() {
	grep '"split":"test"' "$1/metrics.jsonl" | tail -1 |
		sed -n "s/.*\"$2\":\([-0-9.e+]*\).*/\1/p"
}

test_expect_success 'regression: rmse and r2 of a 2-output MLP in the targets units' '
	dlt-prep csv reg.csv --target y,z --shuffle --split 0.8 -o rtrain.dlt -o rtest.dlt &&
	dlt-train -c reg.yaml -o reg -q >out &&
	grep "^test rmse: " out &&
	rmse=$(field reg rmse) && r2=$(field reg r2) && mae=$(field reg mae) &&
	echo "rmse $rmse mae $mae r2 $r2" &&
	perl -e "exit !($rmse < 6 && $r2 > 0.9 && $mae < $rmse)" &&
	grep -q "\"event\":\"train\".*\"rmse\":.*\"mae\":" reg/metrics.jsonl &&
	grep -q "\"test.rmse\":" reg/metrics.jsonl && test -f reg/ckpt/best.dlt
'

test_expect_success 'dlt-infer prints predictions in the targets units and their rmse' '
	dlt-infer -m reg/model.dlt rtest.dlt >pred.csv 2>err &&
	head -1 pred.csv >hdr && echo "index,pred0,pred1,target0,target1" >want &&
	test_cmp want hdr &&
	perl -F, -lane "next if \$. == 1; \$n++; \$s += \$F[1]; \$e += (\$F[1] - \$F[3]) ** 2;
		END { \$m = \$s / \$n; \$r = sqrt(\$e / \$n); print \"mean \$m rmse0 \$r\";
		exit !(\$m > 50 && \$m < 90 && \$r < 8) }" pred.csv &&
	grep "^rmse: .* mae: " err &&
	dlt-infer -m reg/model.dlt --format jsonl rtest.dlt 2>/dev/null | head -1 |
		grep "^{\"index\":0,\"pred\":\[[-0-9.e]*,[-0-9.e]*\],\"target\":\["
'

test_expect_success 'regression with l1 and huber losses trains too' '
	dlt-train -c reg.yaml -o l1 -q -s train.loss=l1 >/dev/null &&
	dlt-train -c reg.yaml -o hub -q -s train.loss.huber.delta=0.5 >/dev/null &&
	grep -q "  loss: l1" l1/config.yaml &&
	grep -q "  loss: {huber: {delta: 0.5}}" hub/config.yaml &&
	perl -e "exit !($(field l1 r2) > 0.9 && $(field hub r2) > 0.9)"
'

test_expect_success 'regression: SIGTERM in epoch 4 and --resume end as the run that never stopped' '
	DLT_TEST_STEP_DELAY=0.01 dlt-train -c reg.yaml -o stop -q >/dev/null 2>&1 &
	pid=$! &&
	i=0 && until grep -q "\"step\":100," stop/metrics.jsonl 2>/dev/null; do
		i=$((i + 1)); [ $i -lt 600 ] || break; sleep 0.05; done &&
	kill -TERM $pid && wait $pid;
	grep -q "\"status\":\"stopped\"" stop/status &&
	dlt-train --resume stop -q >/dev/null &&
	cmp reg/model.dlt stop/model.dlt && cmp reg/ckpt/best.dlt stop/ckpt/best.dlt
'

test_expect_success 'multi-label: bce, acc and f1 of a 3-label MLP' '
	dlt-prep csv multi.csv --labels p,q,s --shuffle --split 0.8 -o mtrain.dlt -o mtest.dlt &&
	dlt-train -c multi.yaml -o multi -q >out &&
	f1=$(field multi f1) && acc=$(field multi acc) && echo "acc $acc f1 $f1" &&
	perl -e "exit !($f1 > 0.9 && $acc > 0.93)" && grep "^test accuracy: " out
'

test_expect_success 'dlt-infer prints label sets, with --threshold and --probs' '
	dlt-infer -m multi/model.dlt mtest.dlt >sets.csv 2>err &&
	head -1 sets.csv >hdr && echo "index,labels,true" >want && test_cmp want hdr &&
	grep "^acc: .* f1: " err &&
	dlt-infer -m multi/model.dlt --threshold 0.99 --probs -q mtest.dlt >strict.csv &&
	head -1 strict.csv | grep "^index,labels,p0,p1,p2,true$" &&
	n=$(cut -d, -f2 sets.csv | tr ";" "\n" | grep -c "[0-9]") &&
	m=$(cut -d, -f2 strict.csv | tr ";" "\n" | grep -c "[0-9]") &&
	echo "labels at 0.5: $n, at 0.99: $m" && test $m -lt $n &&
	test_must_fail 2 "--threshold: 1 is not between 0 and 1" \
		dlt-infer -m multi/model.dlt --threshold 1 mtest.dlt
'

# rel_l2_below A B LIMIT: every tensor of two models within LIMIT relative L2
rel_l2_below() {
	dlt-ckpt diff "$1" "$2" >diff; cat diff
	awk -v lim="$3" "NR > 1 && \$4 + 0 > lim { bad = 1 } END { exit bad }" diff
}

test_expect_success 'regression and multi-label over 2 ranks: the parameters of one process' '
	with_ranks dlt-train -c reg.yaml -o reg2 -q --ranks 2 -s train.epochs=3 -s checkpoint.best=null \
		>/dev/null &&
	dlt-train -c reg.yaml -o reg1 -q -s train.epochs=3 -s checkpoint.best=null >/dev/null &&
	rel_l2_below reg1/model.dlt reg2/model.dlt 1e-5 &&
	with_ranks dlt-train -c multi.yaml -o multi2 -q --ranks 2 -s train.epochs=3 >/dev/null &&
	dlt-train -c multi.yaml -o multi1 -q -s train.epochs=3 >/dev/null &&
	rel_l2_below multi1/model.dlt multi2/model.dlt 1e-5 &&
	a=$(field reg1 rmse) && b=$(field reg2 rmse) && echo "rmse $a, $b" &&
	perl -e "exit !(abs($a - $b) < 1e-3 * $a)"
'

test_expect_success 'bf16 and fp16: a regression trains to about the fp32 rmse' '
	dlt-train -c reg.yaml -o regbf -q -s train.precision=bf16 >/dev/null &&
	dlt-train -c reg.yaml -o reghf -q -s train.precision=fp16 >/dev/null &&
	f=$(field reg rmse) && b=$(field regbf rmse) && h=$(field reghf rmse) &&
	echo "rmse fp32 $f, bf16 $b, fp16 $h" &&
	perl -e "exit !($b < 1.3 * $f + 0.5 && $h < 1.3 * $f + 0.5)"
'

test_expect_success 'safetensors export of a regression model: its tensors' '
	dlt-ckpt export -f safetensors -o reg.safetensors reg/model.dlt &&
	python3 -c "
import json, struct, sys
b = open(\"reg.safetensors\", \"rb\").read()
n = struct.unpack(\"<Q\", b[:8])[0]
h = json.loads(b[8:8 + n])
assert h[\"4.w\"][\"shape\"] == [2, 64], h[\"4.w\"]
print(sorted(k for k in h if k != \"__metadata__\"))
"
'

test_expect_success 'a loss that does not fit the data is refused, naming what fits' '
	test_must_fail 2 "train.loss cross_entropy does not fit data with float targets (use mse, l1 or huber)" \
		dlt-train -c reg.yaml -o bad1 -s train.loss=cross_entropy &&
	test_must_fail 2 "train.loss mse does not fit data with multi-hot labels (use bce)" \
		dlt-train -c multi.yaml -o bad2 -s train.loss=mse &&
	test_must_fail 2 "checkpoint.best test.acc: the data'"'"'s task has no such metric" \
		dlt-train -c reg.yaml -o bad3 -s checkpoint.best=test.acc &&
	test_must_fail 2 "unknown metric '"'"'val.accuracy'"'"'" \
		dlt-train -c reg.yaml -o bad4 -s checkpoint.best=val.accuracy &&
	test_must_fail 2 "unknown loss '"'"'mae'"'"'" dlt-train -c reg.yaml -o bad5 -s train.loss=mae &&
	test_must_fail 2 "train.steps and train.context are for token data" \
		dlt-train -c reg.yaml -o bad6 -s train.steps=10 &&
	! test -e bad1 && ! test -e bad2 && ! test -e bad3 && ! test -e bad6
'

test_done
