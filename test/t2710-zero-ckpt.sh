#!/bin/sh
# Checkpoints of sharded runs (issue 30 part 4): with ZeRO 1 to 3 or a
# pipeline, every rank writes its own ranges of the parameters and the
# optimizer state into the one file that rank 0 made, and none gathers
# another's (lib/train/ckpt.h).  The tensors are stage 0's, raw, in a
# layout that the model alone gives, not the ranks, buckets or stages;
# the files verify, read as any checkpoint, and resume at another rank
# count and stage.  The bytes each rank sends a step are those of a run
# that writes no checkpoint.  A rank whose write fails leaves no file and
# a warning, and the run goes on; a rank that cannot open the file (no
# shared file system) has rank 0 gather from then on, as before, which
# one warning says.  DLT_TEST_CKPT_FAULT injects both.
. "$(dirname "$0")/lib.sh"
mpi_tests

gpt_text text
gpt_yaml train.dlt val.dlt >gpt.yaml
printf "checkpoint: {every: 20 steps}\ndist: {timeout: 20, bucket_mb: 0.01}\n" >>gpt.yaml

# run NAME NP ARGS...: the GPT at NP ranks
run() {
	name=$1 np=$2 && shift 2 &&
	with_ranks mpirun -np $np -x DLT_TEST_CKPT_FAULT dlt-train -q -c gpt.yaml -o $name "$@" \
		>out 2>err || { cat err; return 1; }
}

# tensors CKPT: its tensors in file order, a line each: name, codec, bytes
tensors() {
	dlt-ckpt info --json "$1" | python3 -c "import json, sys
for t in json.load(sys.stdin)[\"tensors\"]: print(t[\"name\"], t[\"codec\"], t[\"stored_size\"])"
}

# equal A B N: dlt-ckpt diff finds the N tensors of A and B equal
equal() {
	dlt-ckpt diff "$1" "$2" >d && grep -q "^all $3 tensors equal" d || { cat d; return 1; }
}

# no_temp RUN: no temporary file (.step-*, .model.dlt.*) left in the run
no_temp() {
	test -z "$(ls -A $1 $1/ckpt | grep "^\.")"
}

DLT_TEST_CKPT_FAULT=
export DLT_TEST_CKPT_FAULT

test_expect_success 'prepare the tokens; ZeRO 0 at 3 and 4 ranks, gathered by no one' '
	dlt-prep text text --split 0.9 -o train.dlt -o val.dlt &&
	run z0_3 3 -s dist.zero=0 && run z0_4 4 -s dist.zero=0 &&
	tensors z0_4/ckpt/step-00000040.dlt >z0.t &&
	grep -q "^optim.v/wte.w shuffle-zstd" z0.t && grep -q "^wte.w shuffle-zstd" z0.t
'

# 16 params, then m and v of each: 48 tensors, all placed, raw
for np in 3 4; do
	for z in 1 3; do
		test_expect_success "ZeRO $z at $np ranks: stage 0's tensors, raw, params then m and v" '
			run z'$z'_'$np' '$np' -s dist.zero='$z' &&
			for s in 20 40 60; do
				f=z'$z'_'$np'/ckpt/step-000000$s.dlt &&
				dlt-ckpt verify $f && equal z0_'$np'/ckpt/step-000000$s.dlt $f 48 ||
					return 1
			done &&
			tensors $f >t && cat t && test $(wc -l <t) = 48 &&
			test $(grep -c " raw " t) = 48 &&
			head -16 t | cut -d" " -f1 >params && head -16 z0.t | cut -d" " -f1 | cmp - params &&
			while read p; do echo optim.m/$p; echo optim.v/$p; done <params >optim &&
			sed -n "17,48p" t | cut -d" " -f1 | cmp - optim &&
			equal z0_'$np'/model.dlt z'$z'_'$np'/model.dlt 16 &&
			no_temp z'$z'_'$np'
		'
	done
done

test_expect_success 'the model of ZeRO 3 is written by the ranks (raw), of ZeRO 1 by rank 0' '
	tensors z3_4/model.dlt >t3 && test $(grep -c " raw " t3) = 16 &&
	tensors z1_4/model.dlt >t1 && grep -q "^wte.w shuffle-zstd" t1 &&
	dlt-ckpt verify z3_4/model.dlt z3_3/model.dlt
'

# a record's place is the sum of the sizes of those before it: the same
# names, codecs and sizes in the same order are the same places
test_expect_success 'one layout: ZeRO 1 at 3 ranks, 2 at 2 with 1 MB buckets, 3 at 4, 2 stages' '
	run z2_2 2 -s dist.zero=2 -s dist.bucket_mb=1 &&
	run p2 2 -s "dist.pipeline={stages: 2, microbatches: 2}" &&
	run p4 4 -s "dist.pipeline={stages: 2, microbatches: 3, split: [5]}" -s dist.zero=1 &&
	tensors z1_3/ckpt/step-00000040.dlt >a && test $(grep -c " raw " a) = 48 &&
	for r in z2_2 z3_4 p2 p4; do
		tensors $r/ckpt/step-00000040.dlt | cmp - a || return 1
	done
'

# Rank 0's train records give each rank's bytes sent a step over the
# record's window (10 steps): the gather of a checkpoint at step 20 or 40
# is in the window that ends at 30 or 50.  Written by the ranks, the
# checkpoints add nothing to any rank's bytes: every record is that of a
# run without checkpoints.  Gathered to rank 0 (from step 20 on, a rank
# not opening the file), rank r >= 1 sends 4 bytes a value of its range
# of the weights, m and v (ZeRO 1: of m and v) more in those windows, a
# tenth of it a step, and rank 0 nothing more.
sent() {
	grep "\"event\":\"train\"" $1/metrics.jsonl |
		sed -n "s/.*\"step\":\([0-9]*\).*\"sent\":\[\([^]]*\)\].*/\1 \2/p"
}

test_expect_success 'no rank sends its state for a checkpoint: the bytes of a run without one' '
	for z in 1 3; do
		run n$z 4 -s dist.zero=$z -s checkpoint.every="1000 steps" &&
		! test -e n$z/ckpt/step-00000060.dlt &&
		sent n$z >n$z.sent && sent z${z}_4 >z$z.sent && cat z$z.sent &&
		test $(wc -l <n$z.sent) = 6 && cmp n$z.sent z$z.sent || return 1
	done
'

test_expect_success 'a rank that cannot open the file: rank 0 gathers from then on, and says why once' '
	for z in 1 3; do
		DLT_TEST_CKPT_FAULT=open:2:20 && run g$z 4 -s dist.zero=$z &&
		grep "warning" err >w && cat w && test $(wc -l <w) = 1 &&
		grep -q "^dlt-train: warning: rank 2 cannot open .*/g$z/ckpt/\.step-00000020\.dlt\..*, which rank 0 made (No such file or directory): the ranks share no file system, so rank 0 gathers the state and writes every checkpoint alone from now on$" w &&
		test $(grep -c "\"event\":\"warning\",\"step\":20,\"message\":\"rank 2 cannot open" \
			g$z/metrics.jsonl) = 1 &&
		grep -q "\"status\":\"done\"" g$z/status && no_temp g$z &&
		for s in 20 40 60; do
			equal z${z}_4/ckpt/step-000000$s.dlt g$z/ckpt/step-000000$s.dlt 48 || return 1
		done &&
		tensors g$z/ckpt/step-00000060.dlt >t && grep -q "^optim.v/wte.w shuffle-zstd" t &&
		equal z${z}_4/model.dlt g$z/model.dlt 16 || return 1
	done &&
	cmp z1_4/model.dlt g1/model.dlt &&
	P=$(($(dlt-ckpt info --json z0_4/model.dlt | sed -n "s/.*\"raw_size\":\([0-9]*\).*/\1/p") / 4)) &&
	echo "P = $P" && sent g1 >g1.sent && sent g3 >g3.sent &&
	perl -e "my \$P = $P; my %per = (1 => 8, 3 => 12);
		for my \$z (1, 3) {
			open my \$a, q(<), qq(n\$z.sent) or die; open my \$b, q(<), qq(g\$z.sent) or die;
			my @a = <\$a>; my @b = <\$b>; exit 1 if @a != 6 || @b != 6;
			for my \$i (0 .. 5) {
				my (\$step, \$x) = split / /, \$a[\$i]; my (undef, \$y) = split / /, \$b[\$i];
				my @x = split /,/, \$x; my @y = split /,/, \$y;
				for my \$r (0 .. 3) {
					my \$range = int(\$P / 4) + (\$r < \$P % 4);
					my \$more = (\$r && (\$step == 30 || \$step == 50)) ? \$per{\$z} * \$range / 10 : 0;
					printf qq(ZeRO %d, step %d, rank %d: %g more, %g wanted\n),
						\$z, \$step, \$r, \$y[\$r] - \$x[\$r], \$more if \$more;
					exit 1 if abs(\$y[\$r] - \$x[\$r] - \$more) > 1e-6 * (\$x[\$r] + 1);
				}
			}
		}"
'

test_expect_success 'a rank whose write fails: no checkpoint, a warning, and the run goes on' '
	DLT_TEST_CKPT_FAULT=write:1:40 && run w3 3 -s dist.zero=3 &&
	cat err && test $(wc -l <err) = 1 &&
	grep -qx "dlt-train: warning: checkpoint not written: w3/ckpt/step-00000040.dlt: rank 1'"'"'s part: No space left on device" err &&
	ls -A w3/ckpt >ls && printf "step-00000020.dlt\nstep-00000060.dlt\n" | cmp - ls &&
	grep -q "\"status\":\"done\"" w3/status &&
	cmp z3_3/ckpt/step-00000060.dlt w3/ckpt/step-00000060.dlt && cmp z3_3/model.dlt w3/model.dlt
'

test_expect_success 'a rank whose write of the model fails: the run fails, saying which, no model' '
	DLT_TEST_CKPT_FAULT=write:2:60 &&
	{ with_ranks mpirun -np 3 -x DLT_TEST_CKPT_FAULT dlt-train -q -c gpt.yaml -o m3 \
		-s dist.zero=3 >out 2>err; test $? = 1; } &&
	cat err && grep -qx "dlt-train: rank 0: m3/model.dlt: rank 2'"'"'s part: No space left on device" err &&
	grep -qx "dlt-train: warning: checkpoint not written: m3/ckpt/step-00000060.dlt: rank 2'"'"'s part: No space left on device" err &&
	grep -q "\"status\":\"failed\"" m3/status && ! test -e m3/model.dlt && no_temp m3 &&
	! test -e m3/ckpt/step-00000060.dlt && test -e m3/ckpt/step-00000040.dlt
'

# Resharding, now from a file no rank gathered: the ZeRO 3 checkpoint of
# 4 ranks at step 40 goes on at 4 ranks to the bytes of the run that
# never stopped, and at 3 ranks with ZeRO 1, as 2 stages and in one
# process, each writing what it loaded again (DLT_TEST_CKPT_ON_RESUME)
# tensor for tensor, in the same layout where it is sharded too
test_expect_success 'the ZeRO 3 checkpoint of 4 ranks resumes at 4, 3 (ZeRO 1), 2 stages and 1' '
	stopped_copies z3_4 00000060 r4 r3 r2 r1 &&
	with_ranks mpirun -np 4 dlt-train -q --resume r4 >out &&
	cmp z3_4/ckpt/step-00000060.dlt r4/ckpt/step-00000060.dlt && cmp z3_4/model.dlt r4/model.dlt &&
	resume_resharded &&
	for r in r3 r2 r1; do
		! cmp -s z3_4/ckpt/step-00000040.dlt $r/ckpt/step-00000040.dlt &&
		equal z3_4/ckpt/step-00000040.dlt $r/ckpt/step-00000040.dlt 48 || return 1
	done &&
	tensors z3_4/ckpt/step-00000040.dlt >a && tensors r3/ckpt/step-00000040.dlt | cmp - a &&
	tensors r2/ckpt/step-00000040.dlt | cmp - a &&
	tensors r1/ckpt/step-00000040.dlt | grep -q "^optim.v/wte.w shuffle-zstd" &&
	gpt_close z3_4/model.dlt r3/model.dlt && gpt_close z3_4/model.dlt r2/model.dlt &&
	gpt_close z3_4/model.dlt r1/model.dlt
'

test_done
