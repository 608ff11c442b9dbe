# Shell test library, after git's t/test-lib.sh, printing TAP for prove.
# A test script sources it, calls test_expect_success / test_expect_failure,
# and ends with test_done.  Each test runs in a fresh directory $TRASH.
set -u
TEST_DIR=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$TEST_DIR/.." && pwd)
# make check-asan runs the tests on the sanitizer build: DLT_TEST_BUILD and
# DLT_TEST_BIN name its build/ and bin/.
BUILD=${DLT_TEST_BUILD:-$ROOT/build}
BIN=${DLT_TEST_BIN:-$ROOT/bin}
DATA=$TEST_DIR/data
PATH=$BIN:$PATH
export PATH
# Tests see no terminal and a fixed thread count, so output is the same everywhere.
DLT_THREADS=${DLT_THREADS:-2}
export DLT_THREADS
LC_ALL=C
export LC_ALL
TRASH=$(mktemp -d "${TMPDIR:-/tmp}/dlt-test.XXXXXX")
trap 'rm -rf "$TRASH"' EXIT
cd "$TRASH" || exit 1
test_count=0
test_failed=0

# test_expect_success 'what' 'shell commands'
test_expect_success() {
	test_count=$((test_count + 1))
	if (eval "$2") >"$TRASH/.out" 2>&1; then
		echo "ok $test_count - $1"
	else
		test_failed=$((test_failed + 1))
		echo "not ok $test_count - $1"
		sed 's/^/# /' "$TRASH/.out"
	fi
}

# test_must_fail STATUS 'message' command args...
# Runs the command; passes when it exits with STATUS, prints exactly one
# line on stderr, and that line contains the message.
test_must_fail() {
	want_status=$1 want_msg=$2
	shift 2
	"$@" >"$TRASH/.stdout" 2>"$TRASH/.stderr"
	got=$?
	if [ "$got" != "$want_status" ]; then
		echo "expected exit status $want_status, got $got from: $*"
		cat "$TRASH/.stderr"
		return 1
	fi
	lines=$(wc -l <"$TRASH/.stderr")
	if [ "$lines" != 1 ]; then
		echo "expected one line on stderr, got $lines from: $*"
		cat "$TRASH/.stderr"
		return 1
	fi
	if ! grep -qF -- "$want_msg" "$TRASH/.stderr"; then
		echo "expected '$want_msg' on stderr from: $*"
		cat "$TRASH/.stderr"
		return 1
	fi
}

# mpi_env: the environment of MPI ranks here: two ranks on two cores, one
# thread each, mpirun as root (CI)
mpi_env() {
	DLT_THREADS=1
	OMPI_ALLOW_RUN_AS_ROOT=1
	OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
	OMPI_MCA_rmaps_base_oversubscribe=1
	export DLT_THREADS OMPI_ALLOW_RUN_AS_ROOT OMPI_ALLOW_RUN_AS_ROOT_CONFIRM \
		OMPI_MCA_rmaps_base_oversubscribe
}

# mpi_test: in one test of a script whose others need no MPI: without
# mpirun the test passes, saying it skipped; else mpi_env
mpi_test() {
	if ! command -v mpirun >/dev/null; then
		echo "# skipped: no mpirun (openmpi-bin)"
		exit 0
	fi
	mpi_env
}

# mpi_tests: a script whose every process may be an MPI rank: mpi_env,
# and under make check-asan no leak checks (with_ranks says why); no
# mpirun: it skips.
mpi_tests() {
	mpi_env
	if [ -n "${ASAN_OPTIONS:-}" ]; then
		ASAN_OPTIONS=$ASAN_OPTIONS:detect_leaks=0
		export ASAN_OPTIONS
	fi
	if ! command -v mpirun >/dev/null; then
		echo "1..0 # SKIP no mpirun (openmpi-bin; scripts/install-deps installs it)"
		exit 0
	fi
}

# with_ranks COMMAND...: a command whose processes are MPI ranks.  Under
# make check-asan, Open MPI leaves its own allocations at MPI_Finalize
# (its components are unloaded by then, so no suppression can name
# them): the ranks are still checked for every memory error, not for
# leaks.
with_ranks() {
	if [ -n "${ASAN_OPTIONS:-}" ]; then
		ASAN_OPTIONS=$ASAN_OPTIONS:detect_leaks=0 "$@"
	else
		"$@"
	fi
}

# gpt_text FILE: English text for the language-model tests: fortunes
# (scripts/install-deps installs them), or words of a fixed generator
gpt_text() {
	if [ -f /usr/share/games/fortunes/computers ]; then
		cat /usr/share/games/fortunes/computers /usr/share/games/fortunes/science >"$1"
	else
		perl -e 'srand(7); my @w = qw(the a program of to is in computer that it and for
			you be with as on not this are data science was by or if);
			for (1 .. 40000) { print $w[int(rand(@w))], rand() < 0.1 ? ".\n" : " " }' >"$1"
	fi
}

# gpt_yaml TRAIN VAL: the tests' small byte-level GPT (GPT-2's block, a
# tied head, 60 steps of 8 windows of 32), to which a test adds its
# checkpoint: and dist: keys
gpt_yaml() {
	cat <<YAML
data: {train: $1, val: $2}
model:
  - embedding: {vocab: 256, dim: 32, name: wte}
  - positional: {max: 32}
  - residual: [layernorm, attention: {heads: 2}]
  - residual: [layernorm, dense: 64, gelu: tanh, dense: 32]
  - layernorm
  - dense: {tie: wte, bias: false}
train:
  steps: 60
  context: 32
  batch: 8
  seed: 1
  init: gpt2
  clip: 1.0
  eval_every: 20
  eval_batches: 4
  log_every: 10
  optimizer: {adamw: {lr: 3e-3, weight_decay: 0.1, decay: matrices}}
  schedule: {cosine: {warmup: 10}}
YAML
}

# ours: the processes of this test's jobs (others may run dlt-train too)
ours() {
	for p in $(pgrep -x 'dlt-train|mpirun|orted'); do
		[ "$(readlink /proc/$p/cwd 2>/dev/null)" = "$TRASH" ] && echo $p
	done
}

# rank_pid R: the pid of rank R of the job running
rank_pid() {
	for p in $(ours); do
		tr '\0' '\n' </proc/$p/environ 2>/dev/null |
			grep -qx "OMPI_COMM_WORLD_RANK=$1" && { echo $p; return 0; }
	done
	return 1
}

# rel_l2 A B: the largest relative L2 difference of a tensor of A and B
rel_l2() {
	dlt-ckpt diff "$1" "$2" | awk '$2 == "equal" || $2 == "differs" {
		if ($4 > m) m = $4 } END { print m + 0 }'
}

# gpt_blocks N C H: N blocks of GPT-2's of width C and H heads
gpt_blocks() {
	for i in $(seq $1); do
		echo "  - residual: [layernorm, attention: {heads: $3}]"
		echo "  - residual: [layernorm, dense: $(($2 * 4)), gelu: tanh, dense: $2]"
	done
}

# gpt_close A B: two models of gpt_yaml's GPT, tensor by tensor within
# 1e-5 relative L2 (dlt-ckpt diff).  The key third of the QKV bias gets
# no gradient in exact arithmetic (softmax ignores a constant added to
# every score of a row): what it holds is Adam's normalised rounding
# noise, under 1e-4 either way, and is checked for being that, not
# against the other run.
gpt_close() {
	dlt-ckpt diff "$1" "$2" >diff; cat diff &&
	test $(awk "\$2 == \"equal\" || \$2 == \"differs\"" diff | wc -l) = 16 &&
	awk "(\$2 == \"equal\" || \$2 == \"differs\") && \$1 != \"4.qkv.b\" && \$4 + 0 > 1e-5 {
		print \"over 1e-5: \" \$0; bad = 1 } END { exit bad }" diff &&
	rm -rf n1 n2 && dlt-ckpt export -f npy -o n1 "$1" && dlt-ckpt export -f npy -o n2 "$2" &&
	perl -e "
		sub load { open(my \$f, q(<:raw), \$_[0]) or die; local \$/; my \$d = <\$f>;
			   return unpack(q(f<*), substr(\$d, 10 + unpack(q(v), substr(\$d, 8, 2)))) }
		my @a = load(q(n1/4.qkv.b.npy)); my @b = load(q(n2/4.qkv.b.npy)); my \$C = @a / 3;
		for my \$p (0, 2) {
			my (\$d, \$n) = (0, 0);
			for my \$i (\$p * \$C .. \$p * \$C + \$C - 1) {
				\$d += (\$a[\$i] - \$b[\$i]) ** 2; \$n += \$a[\$i] ** 2 }
			printf qq(4.qkv.b %s: relative L2 %g\n), \$p ? q(v) : q(q), sqrt(\$d / \$n);
			exit 1 if sqrt(\$d / \$n) > 1e-5 }
		for my \$i (\$C .. 2 * \$C - 1) { exit 1 if abs(\$a[\$i]) > 1e-4 || abs(\$b[\$i]) > 1e-4 }"
}

# stopped_copies RUN STEP DIR...: copies of RUN's directory as if it had
# stopped before checkpoint STEP (that file and the model removed)
stopped_copies() {
	stopped_from=$1 stopped_at=$2 && shift 2 &&
	for r in "$@"; do
		cp -r $stopped_from $r && rm $r/model.dlt $r/ckpt/step-$stopped_at.dlt &&
		echo "{\"status\":\"stopped\"}" >$r/status || return 1
	done
}

# resume_resharded: the stopped copies r3, r2 and r1 of a sharded run go
# on at 3 ranks with ZeRO 1, at 2 as a pipeline of 2 stages and in one
# process, each writing the checkpoint it loaded again before its first
# step (DLT_TEST_CKPT_ON_RESUME)
resume_resharded() {
	with_ranks mpirun -np 3 -x DLT_TEST_CKPT_ON_RESUME=1 dlt-train -q --resume r3 \
		-s dist.zero=1 >out &&
	with_ranks mpirun -np 2 -x DLT_TEST_CKPT_ON_RESUME=1 dlt-train -q --resume r2 \
		-s dist.zero=null -s "dist.pipeline={stages: 2}" >out &&
	DLT_TEST_CKPT_ON_RESUME=1 dlt-train -q --resume r1 -s dist.zero=null >out
}

# test_cmp EXPECTED ACTUAL: byte equality, with a diff on failure.
test_cmp() {
	cmp -s "$1" "$2" || { diff -u "$1" "$2" | head -40; return 1; }
}

# blobs_csv: 600 samples of three Gaussian-ish blobs in 4-d, string labels,
# from a fixed LCG so the data is the same everywhere.
blobs_csv() {
	perl -e '
	my $s = 12345;
	sub r { $s = ($s * 1103515245 + 12345) % 2147483648; return $s / 2147483648; }
	my @names = ("eel", "cat", "dog");
	my @c = ([0, 0, 0, 0], [3, 3, 0, 0], [0, 3, 3, 3]);
	print "a,b,kind,c,d\n";
	for my $i (1 .. 600) {
		my $k = int(r() * 3);
		my @v = map { $c[$k][$_] + (r() + r() + r() - 1.5) } 0 .. 3;
		printf "%.4f,%.4f,%s,%.4f,%.4f\n", $v[0], $v[1], $names[$k], $v[2], $v[3];
	}'
}

# fmnist_12000: train.dlt, the first 12000 of Fashion-MNIST's training
# images (a --split 0.2; 94 batches of 128), and test.dlt, its test set.
FMNIST=/usr/share/datasets/fashion-mnist
fmnist_12000() {
	dlt-prep idx -q $FMNIST/train-images-idx3-ubyte.gz $FMNIST/train-labels-idx1-ubyte.gz \
		--split 0.2 -o train.dlt -o rest.dlt &&
	dlt-prep idx -q $FMNIST/t10k-images-idx3-ubyte.gz $FMNIST/t10k-labels-idx1-ubyte.gz \
		-o test.dlt
}

# test_wait_until SECONDS command args...: runs the command every 50 ms
# until it succeeds; fails, saying what it waited for, after SECONDS.
test_wait_until() {
	wait_tries=$(($1 * 20))
	shift
	until "$@" 2>/dev/null; do
		wait_tries=$((wait_tries - 1))
		[ $wait_tries -gt 0 ] || { echo "timed out waiting for: $*"; return 1; }
		sleep 0.05
	done
}

test_done() {
	echo "1..$test_count"
	[ "$test_failed" = 0 ]
}
