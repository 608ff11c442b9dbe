#!/bin/sh
# dlt-infer: a trained model's predictions for a dataset from a file or a
# pipe; the trainer's accuracy to the last digit; bad input.
. "$(dirname "$0")/lib.sh"
. "$DATA/prep/lib-prep.sh"

blobs_csv >blobs.csv
# the same rows without labels, and with a column missing
cut -d, -f1,2,4,5 blobs.csv >new.csv
cut -d, -f1,2,4 blobs.csv >narrow.csv

cat >mlp.yaml <<'YAML'
data:
  train: train.dlt
  test: test.dlt
  val_split: 0.1
model:
  - dense: 16
  - relu
  - dropout: 0.1
  - dense: 3
train:
  epochs: 2
  batch: 16
  seed: 3
  optimizer: {adam: {lr: 3e-3}}
YAML

# the final test.acc of a run's metrics
run_acc() {
	tail -n 1 "$1/metrics.jsonl" | sed -n 's/.*"test\.acc":\([^,}]*\).*/\1/p'
}

# same_acc ACC ERRFILE: "accuracy: A (C/N)" in ERRFILE with C/N exactly ACC
same_acc() {
	line=$(grep "^accuracy: " "$2") &&
	perl -e 'my ($acc, $l) = @ARGV;
		 $l =~ m{^accuracy: ([0-9.]+) \((\d+)/(\d+)\)$} or die "bad line: $l\n";
		 $2 / $3 == $acc or die "accuracy $2/$3, but the run says $acc\n";
		 sprintf("%.4f", $acc) eq $1 or die "printed $1 for $acc\n"' "$1" "$line"
}

test_expect_success 'setup: train a small MLP on blobs' '
	dlt-prep csv blobs.csv --label kind --shuffle --split 0.8 -o train.dlt -o test.dlt &&
	dlt-train -c mlp.yaml -o run -q >/dev/null &&
	test -f run/model.dlt &&
	ls run/ckpt/step-*.dlt >ckpts && test -s ckpts
'

test_expect_success 'the test set: the accuracy of the run, to the last digit' '
	dlt-infer -m run/model.dlt test.dlt >pred.csv 2>err &&
	test $(wc -l <err) = 1 &&
	same_acc "$(run_acc run)" err
'

test_expect_success 'csv: a header, then one row per sample with pred and label' '
	test "$(head -n 1 pred.csv)" = "index,pred,label" &&
	test $(wc -l <pred.csv) = 121 &&
	perl -ne "next if \$. == 1; /^(\d+),([0-2]),([0-2])\$/ && \$1 == \$. - 2 or die \"line \$.: \$_\"" pred.csv &&
	correct=$(awk -F, "NR > 1 && \$2 == \$3" pred.csv | wc -l) &&
	grep -q "($correct/120)" err
'

test_expect_success 'the batch size and the thread count do not change the results' '
	dlt-infer -m run/model.dlt --probs -q test.dlt >b256.csv &&
	dlt-infer -m run/model.dlt --probs -q -b 1 test.dlt >b1.csv &&
	dlt-infer -m run/model.dlt --probs -q --batch 7 test.dlt >b7.csv &&
	DLT_THREADS=1 dlt-infer -m run/model.dlt --probs -q -b 16 test.dlt >t1.csv &&
	test_cmp b256.csv b1.csv && test_cmp b256.csv b7.csv && test_cmp b256.csv t1.csv
'

test_expect_success '--probs: p0..p2 after pred, each row sums to 1' '
	test "$(head -n 1 b256.csv)" = "index,pred,p0,p1,p2,label" &&
	perl -ne "next if \$. == 1; chomp; my @f = split /,/;
		  my \$s = \$f[2] + \$f[3] + \$f[4];
		  abs(\$s - 1) <= 1e-5 or die \"line \$.: sum \$s\n\";
		  my (\$m) = sort { \$f[\$b + 2] <=> \$f[\$a + 2] } 0 .. 2;
		  \$f[2 + \$f[1]] == \$f[2 + \$m] or die \"line \$.: pred is not the most likely\n\"" b256.csv
'

test_expect_success '--format jsonl: one JSON object per sample' '
	dlt-infer -m run/model.dlt --format jsonl --probs -q test.dlt >pred.jsonl &&
	test $(wc -l <pred.jsonl) = 120 &&
	perl -MJSON::PP -ne "my \$o = decode_json(\$_);
		 \$o->{index} == \$. - 1 or die \"index\n\";
		 \$o->{pred} =~ /^[0-2]\$/ && \$o->{label} =~ /^[0-2]\$/ or die \"pred, label\n\";
		 my \$s = 0; \$s += \$_ for @{\$o->{probs}};
		 @{\$o->{probs}} == 3 && abs(\$s - 1) <= 1e-5 or die \"probs\n\"" pred.jsonl &&
	head -n 1 pred.jsonl | grep -q "^{\"index\":0,\"pred\":[0-2],\"label\":[0-2],\"probs\":\[" &&
	dlt-infer -m run/model.dlt --format jsonl -q test.dlt | head -n 1 >plain.jsonl &&
	grep -q "^{\"index\":0,\"pred\":[0-2],\"label\":[0-2]}\$" plain.jsonl
'

test_expect_success 'a checkpoint works as well as model.dlt' '
	ckpt=$(tail -n 1 ckpts) &&
	dlt-infer -m "$ckpt" --probs test.dlt >ck.csv 2>ck.err &&
	test_cmp b256.csv ck.csv &&
	same_acc "$(run_acc run)" ck.err
'

test_expect_success 'unlabeled data through a pipe from dlt-prep csv --label none' '
	dlt-prep csv new.csv --label none -o - | dlt-infer -m run/model.dlt - >new.out 2>new.err &&
	test ! -s new.err &&
	test "$(head -n 1 new.out)" = "index,pred" &&
	test $(wc -l <new.out) = 601 &&
	dlt-prep csv blobs.csv --label kind -o all.dlt &&
	dlt-infer -m run/model.dlt all.dlt -q >all.out &&
	cut -d, -f1,2 all.out >want && test_cmp want new.out
'

test_expect_success 'normalised with the training stats, not the data'"'"'s own' '
	# one blob alone: its own mean and std are far from the training set'"'"'s
	{ echo a,b,kind,c,d && grep ",dog," blobs.csv | sed "s/,dog,/,1,/"; } >dog.csv &&
	dlt-prep csv dog.csv --label kind -o dog.dlt &&
	dlt-infer -m run/model.dlt dog.dlt >dog.out 2>dog.err &&
	awk -F, "NR > 1 && \$3 == 1 { print \$2 }" all.out >want &&
	cut -d, -f2 dog.out | tail -n +2 >got &&
	test -s want && test_cmp want got &&
	grep -Eq "^accuracy: (0\.9[0-9]*|1\.0000) \(" dog.err
'

test_expect_success '-o writes a file, and nothing to stdout' '
	dlt-infer -m run/model.dlt -o out.csv --probs test.dlt >stdout 2>/dev/null &&
	test ! -s stdout && test_cmp b256.csv out.csv
'

test_expect_success 'a small CNN on images: the run'"'"'s accuracy, any batch size' '
	perl -e "
		my \$s = 99;
		sub r { \$s = (\$s * 1103515245 + 12345) % 2147483648; return \$s / 2147483648; }
		open(my \$x, \">:raw\", \"img.idx\"); open(my \$y, \">:raw\", \"lab.idx\");
		print \$x pack(\"N4\", 0x803, 240, 8, 8); print \$y pack(\"N2\", 0x801, 240);
		for (1 .. 240) {
			my \$k = int(r() * 2); print \$y pack(\"C\", \$k);
			for my \$i (0 .. 7) { for my \$j (0 .. 7) {
				my \$v = (\$k ? \$i : \$j) * 24 + r() * 80; print \$x pack(\"C\", \$v);
			} }
		}" &&
	dlt-prep idx img.idx lab.idx --split 0.75 -o itrain.dlt -o itest.dlt &&
	cat >cnn.yaml <<-\YAML &&
	data: {train: itrain.dlt, test: itest.dlt}
	model:
	  - conv2d: {filters: 4, kernel: 3, pad: 1}
	  - batchnorm
	  - relu
	  - maxpool: 2
	  - flatten
	  - dense: 2
	train: {epochs: 2, batch: 12, seed: 1, optimizer: {adam: {lr: 1e-2}}}
	YAML
	dlt-train -c cnn.yaml -o crun -q >/dev/null &&
	dlt-infer -m crun/model.dlt itest.dlt --probs >c1.csv 2>c.err &&
	same_acc "$(run_acc crun)" c.err &&
	dlt-infer -m crun/model.dlt itest.dlt --probs -b 1 -q >c2.csv &&
	dlt-infer -m crun/model.dlt itest.dlt --probs -b 13 -q >c3.csv &&
	test_cmp c1.csv c2.csv && test_cmp c1.csv c3.csv
'

test_expect_success 'dlt-train refuses data without labels' '
	dlt-prep csv new.csv --label none -o new.dlt &&
	test_must_fail 2 "new.dlt: has no labels to train on" \
		dlt-train -c mlp.yaml -o bad -s data.train=new.dlt &&
	test_must_fail 2 "new.dlt: has no labels to test on" \
		dlt-train -c mlp.yaml -o bad -s data.test=new.dlt &&
	test ! -e bad
'

test_expect_success 'bad input: a missing model or dataset' '
	test_must_fail 2 "dlt-infer: nosuch.dlt: No such file or directory" \
		dlt-infer -m nosuch.dlt test.dlt &&
	test_must_fail 2 "dlt-infer: nosuch.dlt: No such file or directory" \
		dlt-infer -m run/model.dlt nosuch.dlt
'

test_expect_success 'bad input: data with another number of features' '
	dlt-prep csv narrow.csv --label none -o narrow.dlt &&
	test_must_fail 2 "narrow.dlt: samples of shape [3] (3 features), but run/model.dlt expects [4] (4)" \
		dlt-infer -m run/model.dlt narrow.dlt &&
	test_must_fail 2 "itest.dlt: samples of shape [1, 8, 8] (64 features), but run/model.dlt expects [4] (4)" \
		dlt-infer -m run/model.dlt itest.dlt
'

test_expect_success 'bad input: a damaged model file, a dataset as the model' '
	cp run/model.dlt damaged.dlt &&
	size=$(wc -c <damaged.dlt) &&
	printf "\377" | dd of=damaged.dlt bs=1 seek=$((size / 2)) conv=notrunc 2>/dev/null &&
	test_must_fail 2 "dlt-infer: damaged.dlt: " dlt-infer -m damaged.dlt test.dlt &&
	test_must_fail 2 "dlt-infer: test.dlt: not a checkpoint or model file" \
		dlt-infer -m test.dlt test.dlt &&
	test_must_fail 2 "dlt-infer: run/model.dlt: not a dataset" \
		dlt-infer -m run/model.dlt run/model.dlt
'

test_expect_success 'bad input: a label the model has no class for' '
	printf "a,b,c,d,y\n1,2,3,4,0\n1,2,3,4,3\n" >four.csv &&
	dlt-prep csv four.csv --label y -o four.dlt &&
	test_must_fail 2 "four.dlt: label 3 of sample 1, but run/model.dlt has 3 classes" \
		dlt-infer -m run/model.dlt four.dlt
'

test_expect_success 'bad usage: --format, --batch, operands' '
	test_must_fail 2 "dlt-infer: --format: '"'"'xml'"'"' is not csv or jsonl" \
		dlt-infer -m run/model.dlt --format xml test.dlt &&
	test_must_fail 2 "dlt-infer: --batch: 0 is out of range" \
		dlt-infer -m run/model.dlt --batch 0 test.dlt &&
	test_must_fail 2 "dlt-infer: --batch: expected an integer" \
		dlt-infer -m run/model.dlt -b x test.dlt &&
	test_must_fail 2 "dlt-infer: no model" dlt-infer test.dlt &&
	test_must_fail 2 "dlt-infer: no data" dlt-infer -m run/model.dlt &&
	test_must_fail 2 "dlt-infer: unexpected argument '"'"'more'"'"'" \
		dlt-infer -m run/model.dlt test.dlt more &&
	test_must_fail 2 "dlt-infer: unknown option '"'"'--gpus'"'"'" \
		dlt-infer -m run/model.dlt --gpus 1 test.dlt
'

test_expect_success 'a bad -o leaves nothing; a full disk is a failure (1)' '
	mkdir out &&
	test_must_fail 2 "nodir/p.csv" dlt-infer -m run/model.dlt -o nodir/p.csv test.dlt &&
	if test -w /dev/full && test -c /dev/full
	then
		test_must_fail 1 "dlt-infer: standard output: No space left on device" \
			sh -c "dlt-infer -m run/model.dlt test.dlt >/dev/full"
	fi &&
	test_must_fail 2 "nosuch.dlt" dlt-infer -m nosuch.dlt -o out/p.csv test.dlt &&
	is_empty out
'

test_expect_success '--device: cpu is the default here; a GPU missing fails the job, a bad name is usage' '
	dlt-infer -m run/model.dlt --device cpu test.dlt >cpu.csv 2>/dev/null &&
	test_cmp pred.csv cpu.csv &&
	if bin_has_gpu=$(dlt-infer -m run/model.dlt --device cuda -q test.dlt 2>&1 >/dev/null); then
		echo "a GPU is here: $bin_has_gpu"
	else
		test_must_fail 1 "no CUDA device" dlt-infer -m run/model.dlt --device cuda:0 test.dlt
	fi &&
	test_must_fail 2 "--device: '"'"'gpu'"'"' is not cpu, cuda or cuda:N" \
		dlt-infer -m run/model.dlt --device gpu test.dlt
'

# a hostile "input" in a model file: test/unit/test-ckpt-input.c
test_done
