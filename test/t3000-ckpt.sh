#!/bin/sh
# dlt-ckpt: info, verify, diff, export (safetensors, npy), import, average,
# strip; on a model.dlt that dlt-train writes and on checkpoints with
# optimiser state of known values (made by the unit test's fixture maker);
# damaged archives and hostile safetensors files.
. "$(dirname "$0")/lib.sh"
. "$DATA/prep/lib-prep.sh"

# test-safetensors --write-ckpt PATH VARIANT: a checkpoint (train/ckpt.h)
# with 8 weights and their Adam state (optim.m/*, optim.v/*) of known
# values; b drops 1.beta, reshapes 3.b to [1, 3], adds 4.w and adds 1 to
# 0.b[3]; plus1 and plus05 add 1 and 0.5 to every 0.b.
fixture() {
	"$BUILD/test/test-safetensors" --write-ckpt "$1" "$2"
}

# mkst FILE HEADER [N [DATA_BYTES]]: a safetensors file by hand: u64 N
# (default: the header's length), the header, zero bytes of data.
mkst() {
	perl -e 'my ($f, $h, $n, $d) = @ARGV;
		open(my $o, ">:raw", $f) or die "$f: $!";
		print $o pack("Q<", defined $n && $n ne "" ? $n : length $h), $h, "\0" x ($d || 0);
	' "$@"
}

# records ARCHIVE: "NAME DATA_OFFSET STORED_SIZE" of each record (an
# empty NAME is the metadata), read by a reader that shares no code with dlt.
records() {
	perl -e '
		local $/; open(my $fh, "<:raw", $ARGV[0]) or die; my $d = <$fh>;
		my $ix = unpack("Q<", substr($d, length($d) - 32, 8));
		my $count = unpack("Q<", substr($d, $ix + 8, 8));
		for my $i (0 .. $count - 1) {
			my $off = unpack("Q<", substr($d, $ix + 16 + 8 * $i, 8));
			my ($tag, $hsize, $dt, $codec, $ndim, $z, $nlen, $stored) =
			    unpack("a4 L< C C C C L< Q<", substr($d, $off, 24));
			my $name = substr($d, $off + 40 + 8 * $ndim, $nlen);
			print $nlen ? $name : "(metadata)", " ", $off + $hsize, " $stored\n";
		}' "$1"
}

# flip FILE OFFSET: xor one byte with 0x55, in place.
flip() {
	perl -e 'open(my $f, "+<:raw", $ARGV[0]) or die; seek($f, $ARGV[1], 0);
		read($f, my $c, 1); seek($f, $ARGV[1], 0); print $f chr(ord($c) ^ 0x55);' "$1" "$2"
}

# The Python that loads exports best: with the safetensors package, else
# torch, else plain Python (st-check.py says which it used).
PY=
for want in safetensors torch json; do
	for py in python3 /usr/bin/python3; do
		if command -v $py >/dev/null 2>&1 && $py -c "import $want" 2>/dev/null; then
			PY=$py
			break 2
		fi
	done
done
STCHECK="$ROOT/test/py/st-check.py"

perl -e '
	my $s = 12345;
	sub r { $s = ($s * 1103515245 + 12345) % 2147483648; return $s / 2147483648; }
	my @c = ([0, 0, 0, 0], [3, 3, 0, 0], [0, 3, 3, 3]);
	print "a,b,kind,c,d\n";
	for my $i (1 .. 150) {
		my $k = int(r() * 3);
		my @v = map { $c[$k][$_] + (r() + r() + r() - 1.5) } 0 .. 3;
		printf "%.4f,%.4f,%d,%.4f,%.4f\n", $v[0], $v[1], $k, $v[2], $v[3];
	}' >blobs.csv
cat >mlp.yaml <<'YAML'
data: {train: train.dlt, test: test.dlt}
model:
  - dense: 8
  - relu
  - dense: 3
train: {epochs: 2, batch: 16, seed: 7, optimizer: {adam: {lr: 1e-2}}}
YAML
mkdir out

test_expect_success 'setup: a trained model.dlt and checkpoints with optimiser state' '
	dlt-prep csv blobs.csv --label kind --split 0.8 -o train.dlt -o test.dlt &&
	dlt-train -c mlp.yaml -o run -q >/dev/null &&
	test -f run/model.dlt &&
	fixture a.dlt a && fixture b.dlt b && fixture plus1.dlt plus1 &&
	fixture plus05.dlt plus05 &&
	dlt-prep info --json a.dlt | grep -q "\"name\":\"optim.v/3.b\""
'

test_expect_success 'info: position, best, time, input, last metrics per split' '
	dlt-ckpt info a.dlt >info.txt &&
	grep -qx "file        a.dlt, $(wc -c <a.dlt) bytes" info.txt &&
	grep -qx "kind        checkpoint (format 1)" info.txt &&
	grep -qx "step        120" info.txt &&
	grep -qx "epoch       3 of 4, 5 batches of it done" info.txt &&
	grep -qx "best        val.acc 0.875 at step 100" info.txt &&
	grep -qx "time        12.5 s" info.txt &&
	grep -qx "input       \[4, 1, 1\], 3 classes" info.txt &&
	grep -qx "config      2 lines of YAML" info.txt &&
	grep -qx "train       step 120 (epoch 3): loss 0.25, acc 0.875, lr 0.005" info.txt &&
	grep -qx "val         step 100 (epoch 2): loss 0.375, acc 0.875" info.txt &&
	grep -qx "test        step 100 (epoch 2): loss 0.5, acc 0.8125" info.txt
'

test_expect_success 'info: a table of tensors and the totals with the ratio' '
	dlt-ckpt info a.dlt >info.txt &&
	grep -Eqx "0.w +f32 +\[64, 32\] +shuffle-zstd +8192 +[0-9]+" info.txt &&
	grep -Eqx "optim.v/3.b +f32 +\[3\] +(raw|shuffle-zstd) +12 +[0-9]+" info.txt &&
	test "$(grep -c "^optim\." info.txt)" = 12 &&
	stored=$(dlt-prep info --json a.dlt | perl -MJSON::PP -e "
		my \$s = 0; \$s += \$_->{stored_size} for @{decode_json(<STDIN>)->{tensors}};
		print \$s") &&
	ratio=$(perl -e "printf q(%.2f), 25252 / $stored") &&
	grep -Eqx "20 tensors +25252 +$stored +ratio $ratio" info.txt
'

test_expect_success 'info --json: the same as one object' '
	dlt-ckpt info --json a.dlt >info.json &&
	test "$(jget kind <info.json)" = "\"checkpoint\"" &&
	test "$(jget step <info.json)" = 120 &&
	test "$(jget epoch <info.json)" = 3 &&
	test "$(jget batch <info.json)" = 5 &&
	test "$(jget epochs <info.json)" = 4 &&
	test "$(jget best.value <info.json)" = 0.875 &&
	test "$(jget time <info.json)" = 12.5 &&
	test "$(jget config <info.json)" = "\"model:\\n  - dense: 8\\n\"" &&
	test "$(jget last.train.loss <info.json)" = 0.25 &&
	test "$(jget last.val.step <info.json)" = 100 &&
	test "$(jget last.test.acc <info.json)" = 0.8125 &&
	test "$(jget tensors.0 <info.json)" = \
		"{\"codec\":\"shuffle-zstd\",\"dtype\":\"f32\",\"name\":\"0.w\",\"raw_size\":8192,\"shape\":[64,32],\"stored_size\":$(jget tensors.0.stored_size <info.json)}" &&
	test "$(jget tensors.19.name <info.json)" = "\"optim.v/3.b\"" &&
	test "$(jget raw_size <info.json)" = 25252 &&
	test "$(jget metrics <info.json)" = null
'

test_expect_success 'info: a model.dlt of dlt-train' '
	dlt-ckpt info run/model.dlt >info.txt &&
	grep -Eqx "kind +model( \(format 1\))?" info.txt &&
	grep -Eqx "0.w +f32 +\[8, 4\] +[a-z-]+ +128 +[0-9]+" info.txt &&
	grep -Eqx "2.b +f32 +\[3\] +[a-z-]+ +12 +[0-9]+" info.txt &&
	grep -Eq "^4 tensors +268 " info.txt
'

test_expect_success 'the checkpoints of dlt-train: info, verify, a round trip of the weights' '
	ls run/ckpt/*.dlt >ckpts.txt &&
	test -s ckpts.txt &&
	last=$(tail -n 1 ckpts.txt) &&
	dlt-ckpt info $last >info.txt &&
	grep -qx "kind        checkpoint (format 1)" info.txt &&
	grep -qx "epoch       2 of 2 done" info.txt &&
	grep -q "^optim\.m/0\.w " info.txt &&
	dlt-ckpt verify $(cat ckpts.txt) >out.txt &&
	test "$(grep -c ": ok$" out.txt)" = "$(wc -l <ckpts.txt)" &&
	dlt-ckpt export --weights-only -f safetensors -o last.safetensors $last &&
	dlt-ckpt import -o last.dlt last.safetensors &&
	{ dlt-ckpt diff --json $last last.dlt >diff.json; test $? = 1; } &&
	test "$(grep -o "\"status\":\"equal\"" diff.json | wc -l)" = 4 &&
	test "$(grep -o "\"status\":\"only_a\"" diff.json | wc -l)" = 8 &&
	dlt-ckpt strip $last -o last-s.dlt &&
	dlt-ckpt diff last-s.dlt last.dlt >/dev/null &&
	dlt-ckpt diff last-s.dlt run/model.dlt >/dev/null
'

test_expect_success 'verify: every checksum; "FILE: ok" for each' '
	dlt-ckpt verify a.dlt run/model.dlt b.dlt >out.txt &&
	printf "a.dlt: ok\nrun/model.dlt: ok\nb.dlt: ok\n" >want.txt &&
	test_cmp want.txt out.txt &&
	dlt-ckpt verify - <a.dlt >out.txt &&
	echo "standard input: ok" >want.txt &&
	test_cmp want.txt out.txt
'

test_expect_success 'verify: a flipped byte in the data of each tensor names the tensor' '
	records a.dlt >rec.txt &&
	test "$(wc -l <rec.txt)" = 21 &&
	while read name off size; do
		test "$name" != "(metadata)" || continue
		cp a.dlt bad.dlt &&
		flip bad.dlt $((off + size / 2)) &&
		test_must_fail 1 "bad.dlt: checksum mismatch in tensor '\''$name'\''" \
			dlt-ckpt verify bad.dlt || exit 1
	done <rec.txt
'

test_expect_success 'verify: the metadata, index, trailer and header are checked too' '
	records a.dlt >rec.txt &&
	meta=$(sed -n "s/^(metadata) \([0-9]*\) .*/\1/p" rec.txt) &&
	test -n "$meta" &&
	size=$(wc -c <a.dlt) &&
	for off in $meta 0 9 $((size - 40)) $((size - 20)) $((size - 1)); do
		cp a.dlt bad.dlt &&
		flip bad.dlt $off &&
		test_must_fail 1 "bad.dlt: " dlt-ckpt verify bad.dlt || exit 1
	done
'

test_expect_success 'verify: a model.dlt with a byte flipped, every 7th byte over the file' '
	perl -e "
		local \$/; open(my \$f, q(<:raw), \$ARGV[0]) or die; my \$d = <\$f>; my @missed;
		for (my \$off = 0; \$off < length \$d; \$off += 7) {
			my \$b = \$d; substr(\$b, \$off, 1) ^= q(U);
			open(my \$o, q(>:raw), q(bad.dlt)) or die; print \$o \$b; close \$o;
			my \$err = qx(dlt-ckpt verify bad.dlt 2>&1 >/dev/null); my \$rc = \$? >> 8;
			push @missed, qq(\$off:\$rc) unless \$rc == 1 &&
			    \$err =~ /\\Adlt-ckpt: bad\\.dlt: [^\\n]*\\n\\z/;
		}
		print qq(not found at: @missed\\n) if @missed; exit !!@missed;
	" run/model.dlt
'

test_expect_success 'verify: a good and a damaged file: ok for one, status 1' '
	cp a.dlt bad.dlt && flip bad.dlt 100 &&
	test_must_fail 1 "bad.dlt" dlt-ckpt verify a.dlt bad.dlt &&
	echo "a.dlt: ok" >want.txt &&
	test_cmp want.txt "$TRASH/.stdout"
'

test_expect_success 'verify: a missing file is bad input (status 2)' '
	test_must_fail 2 "nosuch.dlt: No such file or directory" dlt-ckpt verify nosuch.dlt
'

test_expect_success 'diff: a checkpoint with itself: all equal, status 0' '
	dlt-ckpt diff a.dlt a.dlt >out.txt &&
	tail -n 1 out.txt >last.txt &&
	echo "all 20 tensors equal" >want.txt &&
	test_cmp want.txt last.txt
'

test_expect_success 'diff: values, shapes, names; status 1' '
	{ dlt-ckpt diff a.dlt b.dlt >out.txt; test $? = 1; } &&
	grep -Eqx "0.w +equal +0 +0" out.txt &&
	grep -Eqx "0.b +differs +1 +0.160128" out.txt &&
	grep -Eqx "1.beta +only in A" out.txt &&
	grep -Eqx "optim.v/1.beta +only in A" out.txt &&
	grep -Eqx "4.w +only in B" out.txt &&
	grep -Eqx "3.b +shape \[3\] vs \[1, 3\]" out.txt &&
	tail -n 1 out.txt | grep -qx "6 of 21 tensors differ"
'

test_expect_success 'diff --json: the relative L2 is ||a-b|| / ||b||' '
	{ dlt-ckpt diff --json a.dlt b.dlt >diff.json; test $? = 1; } &&
	test "$(jget differ <diff.json)" = 6 &&
	test "$(jget tensors.1.name <diff.json)" = "\"0.b\"" &&
	test "$(jget tensors.1.status <diff.json)" = "\"differs\"" &&
	test "$(jget tensors.1.max_abs <diff.json)" = 1 &&
	approx "$(jget tensors.1.rel_l2 <diff.json)" "$(perl -e "print 1 / sqrt(39)")" &&
	test "$(jget tensors.7.shape_b <diff.json)" = "[1,3]" &&
	test "$(jget tensors.20.status <diff.json)" = "\"only_b\""
'

test_expect_success 'diff: a damaged file is bad input (status 2)' '
	cp a.dlt bad.dlt && flip bad.dlt $(($(wc -c <a.dlt) - 1)) &&
	test_must_fail 2 "bad.dlt" dlt-ckpt diff a.dlt bad.dlt
'

test_expect_success 'export, import, export: model.dlt round-trips byte for byte' '
	dlt-ckpt export -f safetensors -o m.safetensors run/model.dlt &&
	dlt-ckpt import -o m.dlt m.safetensors &&
	dlt-ckpt diff run/model.dlt m.dlt >/dev/null &&
	dlt-ckpt export -f safetensors -o m2.safetensors m.dlt &&
	test_cmp m.safetensors m2.safetensors &&
	dlt-ckpt verify m.dlt >/dev/null
'

test_expect_success 'export --weights-only, import, export: the same for a checkpoint' '
	dlt-ckpt export --weights-only -f safetensors -o aw.safetensors a.dlt &&
	dlt-ckpt import -o aw.dlt aw.safetensors &&
	dlt-ckpt export -f safetensors -o aw2.safetensors aw.dlt &&
	test_cmp aw.safetensors aw2.safetensors &&
	dlt-ckpt strip a.dlt -o as.dlt &&
	dlt-ckpt diff as.dlt aw.dlt >/dev/null &&
	dlt-ckpt info --json aw.dlt >info.json &&
	test "$(jget kind <info.json)" = "\"model\"" &&
	test "$(jget step <info.json)" = 120 &&
	test "$(jget config <info.json)" = "\"model:\\n  - dense: 8\\n\"" &&
	test "$(jget tensors.0.codec <info.json)" = "\"shuffle-zstd\""
'

test_expect_success 'export: the safetensors layout, checked with perl' '
	perl -MJSON::PP -e "
		local \$/; open(my \$f, q(<:raw), q(aw.safetensors)) or die; my \$d = <\$f>;
		my \$n = unpack(q(Q<), substr(\$d, 0, 8));
		die qq(header length \$n\n) if \$n % 8;
		my \$h = decode_json(substr(\$d, 8, \$n));
		my \$m = delete \$h->{__metadata__};
		die qq(format\n) if \$m->{format} ne q(dlt) || \$m->{kind} ne q(model);
		die qq(step\n) if \$m->{step} ne q(120) || \$m->{dlt_format} ne q(1);
		die qq(input\n) if decode_json(\$m->{input})->{num_classes} != 3;
		die qq(optim\n) if grep { /^optim\./ } keys %\$h;
		my @t = sort { \$h->{\$a}{data_offsets}[0] <=> \$h->{\$b}{data_offsets}[0] } keys %\$h;
		die qq(order @t\n) if qq(@t) ne q(0.w 0.b 1.gamma 1.beta 1.running_mean 1.running_var 3.w 3.b);
		my \$end = 0;
		for (@t) { die qq(\$_\n) if \$h->{\$_}{data_offsets}[0] != \$end || \$h->{\$_}{dtype} ne q(F32);
			   \$end = \$h->{\$_}{data_offsets}[1]; }
		die qq(size\n) if 8 + \$n + \$end != length \$d;
		my @w = unpack(q(f<*), substr(\$d, 8 + \$n + \$h->{q(0.b)}{data_offsets}[0], 32));
		die qq(0.b @w\n) if qq(@w) ne q(0 0.5 1 1.5 2 2.5 3 3.5);
	"
'

test_expect_success 'export -o -: the same bytes on stdout' '
	dlt-ckpt export --weights-only -f safetensors -o - a.dlt >stdout.safetensors &&
	test_cmp aw.safetensors stdout.safetensors
'

if [ -n "$PY" ]; then
	test_expect_success "Python ($PY) loads the export: every value's bits, sums" '
		dlt-ckpt export -f safetensors -o a.safetensors a.dlt &&
		$PY "$STCHECK" compare a.safetensors a.dlt >py.txt &&
		sed -n "s/^loader: //p" py.txt >loader.txt &&
		grep -qx "0.b \[8\] sum=14.0" py.txt &&
		grep -qx "1.running_var \[8\] sum=36.0" py.txt &&
		grep -qx "0.w \[64, 32\] sum=-0.75" py.txt &&
		grep -qx "optim.m/0.w \[64, 32\] sum=127.625" py.txt &&
		test "$(grep -c sum= py.txt)" = 20 &&
		grep -q "\"config\": \"model:\\\\n  - dense: 8\\\\n\"" py.txt &&
		$PY "$STCHECK" compare aw.safetensors a.dlt --weights-only >py.txt &&
		test "$(grep -c sum= py.txt)" = 8 &&
		$PY "$STCHECK" compare m.safetensors run/model.dlt >py.txt &&
		test "$(grep -c sum= py.txt)" = 4
	'

	echo "# Python checks ran with $PY, safetensors loaded with $(cat loader.txt 2>/dev/null)"

	test_expect_success "Python ($PY) loads the npy export" '
		dlt-ckpt export -f npy -o npy a.dlt &&
		test -f npy/optim.m__0.w.npy && test -f npy/3.b.npy &&
		test "$(ls npy | wc -l)" = 20 &&
		$PY "$STCHECK" npy npy a.dlt >py.txt &&
		grep -qx "0.b \[8\] sum=14.0" py.txt &&
		dlt-ckpt export --weights-only -f npy -o npyw a.dlt &&
		test "$(ls npyw | wc -l)" = 8 &&
		$PY "$STCHECK" npy npyw a.dlt --weights-only >/dev/null
	'

	test_expect_success 'import: F16 and BF16 become the f32 of the same value' '
		$PY "$STCHECK" write-half half.safetensors &&
		dlt-ckpt import -o half.dlt half.safetensors &&
		dlt-ckpt export -f safetensors -o half32.safetensors half.dlt &&
		$PY "$STCHECK" check-half half32.safetensors >py.txt &&
		grep -qx "b \[1.0, -5.0, 3.140625, -0.0\]" py.txt &&
		dlt-ckpt info --json half.dlt >info.json &&
		test "$(jget kind <info.json)" = "\"model\"" &&
		test "$(jget safetensors <info.json)" = "{\"format\":\"pt\",\"source\":\"st-check.py\"}"
	'
else
	echo "# no python3: the Python checks are skipped"
fi

test_expect_success 'import: a full export leaves the optimiser state out' '
	dlt-ckpt export -f safetensors -o a.safetensors a.dlt &&
	dlt-ckpt import -o ai.dlt a.safetensors &&
	dlt-ckpt info --json ai.dlt >info.json &&
	test "$(jget kind <info.json)" = "\"model\"" &&
	! grep -q optim info.json &&
	{ dlt-ckpt diff --json a.dlt ai.dlt >diff.json; test $? = 1; } &&
	test "$(jget differ <diff.json)" = 12
'

test_expect_success 'import --config: the resolved config goes into the metadata' '
	dlt-ckpt import -c run/config.yaml -o mc.dlt m.safetensors &&
	dlt-ckpt info --json mc.dlt | perl -MJSON::PP -e "print decode_json(<STDIN>)->{config}" >cfg.txt &&
	test_cmp run/config.yaml cfg.txt &&
	dlt-ckpt import -c mlp.yaml -o mc2.dlt m.safetensors &&
	dlt-ckpt info --json mc2.dlt | perl -MJSON::PP -e "print decode_json(<STDIN>)->{config}" >cfg2.txt &&
	test_cmp run/config.yaml cfg2.txt
'

test_expect_success 'import --config: a bad config is refused, nothing written' '
	sed "s/dense: 3/densee: 3/" mlp.yaml >bad.yaml &&
	test_must_fail 2 "bad.yaml:5: unknown layer" \
		dlt-ckpt import -c bad.yaml -o out/x.dlt m.safetensors &&
	is_empty out
'

test_expect_success 'import: dtypes other than F32, F16, BF16 are refused' '
	mkst i64.safetensors "{\"a\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[0,8]}}" "" 8 &&
	test_must_fail 2 "i64.safetensors: tensor '\''a'\'' is I64, not F32, F16 or BF16" \
		dlt-ckpt import -o out/x.dlt i64.safetensors &&
	is_empty out
'

# hostile NAME MESSAGE HEADER [N [DATA_BYTES]]
hostile() {
	name=$1 msg=$2
	shift 2
	mkst "$name.safetensors" "$@" &&
	test_must_fail 2 "$name.safetensors: safetensors: $msg" \
		dlt-ckpt import -o out/x.dlt "$name.safetensors" &&
	is_empty out
}
E='"dtype":"F32","shape"'

test_expect_success 'hostile safetensors: header lengths' '
	printf "\010\0\0" >short.safetensors &&
	test_must_fail 2 "short.safetensors: safetensors: truncated" \
		dlt-ckpt import -o out/x.dlt short.safetensors &&
	hostile huge "header length 100000001 is over the limit of 100000000 bytes" "{}" 100000001 &&
	hostile max "header length 18446744073709551615 is over" "{}" 18446744073709551615 &&
	hostile long "header length 4096, but the file has 10 bytes after it" "{}" 4096 8
'

test_expect_success 'hostile safetensors: not a JSON object of objects' '
	hostile array "the header is not a JSON object" "[1,2,3]" &&
	hostile string "the header is not a JSON object" "\"{\"" &&
	hostile broken "header: offset 5: unexpected end" "{\"a\":" &&
	hostile entry "tensor '\''a'\'': not an object" "{\"a\":[1]}" &&
	hostile meta "__metadata__: the value of '\''step'\'' is not a string" \
		"{\"__metadata__\":{\"step\":120}}"
'

test_expect_success 'hostile safetensors: unknown dtype, bad shapes' '
	hostile dtype "tensor '\''a'\'': unknown dtype '\''F31'\''" \
		"{\"a\":{\"dtype\":\"F31\",\"shape\":[1],\"data_offsets\":[0,4]}}" "" 4 &&
	hostile negative "tensor '\''a'\'': shape: dimension 0 is not an integer" \
		"{\"a\":{$E:[-1],\"data_offsets\":[0,4]}}" "" 4 &&
	hostile overflow "tensor '\''a'\'': shape [4294967296, 4294967296, 2] is too large" \
		"{\"a\":{$E:[4294967296,4294967296,2],\"data_offsets\":[0,4]}}" "" 4 &&
	hostile mismatch "tensor '\''a'\'': data_offsets [0, 8] hold 8 bytes, but F32 [3] is 12" \
		"{\"a\":{$E:[3],\"data_offsets\":[0,8]}}" "" 8
'

test_expect_success 'hostile safetensors: offsets out of range, overlapping, gaps' '
	hostile range "tensor '\''a'\'': data_offsets [0, 4000] outside the data area of 8 bytes" \
		"{\"a\":{$E:[1000],\"data_offsets\":[0,4000]}}" "" 8 &&
	hostile overlap "tensor '\''b'\'': data overlaps tensor '\''a'\''" \
		"{\"a\":{$E:[2],\"data_offsets\":[0,8]},\"b\":{$E:[2],\"data_offsets\":[4,12]}}" "" 12 &&
	hostile gap "bytes 8 to 12 of the data area belong to no tensor" \
		"{\"a\":{$E:[2],\"data_offsets\":[0,8]},\"b\":{$E:[2],\"data_offsets\":[12,20]}}" "" 20 &&
	hostile tail "bytes 4 to 8 of the data area belong to no tensor" \
		"{\"a\":{$E:[1],\"data_offsets\":[0,4]}}" "" 8 &&
	hostile twice "tensor '\''a'\'': named twice" \
		"{\"a\":{$E:[1],\"data_offsets\":[0,4]},\"a\":{$E:[1],\"data_offsets\":[4,8]}}" "" 8
'

test_expect_success 'average: of A and A is A' '
	dlt-ckpt average -o aa.dlt a.dlt a.dlt &&
	dlt-ckpt diff as.dlt aa.dlt >/dev/null &&
	dlt-ckpt info --json aa.dlt >info.json &&
	test "$(jget kind <info.json)" = "\"model\"" &&
	test "$(jget step <info.json)" = null &&
	! grep -q optim info.json
'

test_expect_success 'average: the element-wise mean' '
	dlt-ckpt average -o mean.dlt a.dlt plus1.dlt &&
	dlt-ckpt strip plus05.dlt -o want.dlt &&
	dlt-ckpt diff want.dlt mean.dlt >/dev/null &&
	dlt-ckpt average -o mean3.dlt plus1.dlt a.dlt plus05.dlt &&
	dlt-ckpt diff want.dlt mean3.dlt >/dev/null &&
	{ dlt-ckpt diff --json a.dlt mean.dlt >diff.json; test $? = 1; } &&
	test "$(jget tensors.1.max_abs <diff.json)" = 0.5
'

test_expect_success 'average: different tensors are refused' '
	test_must_fail 2 "b.dlt: no tensor '\''1.beta'\'', which a.dlt has" \
		dlt-ckpt average -o out/x.dlt a.dlt b.dlt &&
	test_must_fail 2 "run/model.dlt: tensor '\''0.w'\'' has shape [8, 4], but [64, 32] in a.dlt" \
		dlt-ckpt average -o out/x.dlt a.dlt run/model.dlt &&
	is_empty out
'

test_expect_success 'strip: the weights, without optim.* and the training keys' '
	dlt-ckpt strip a.dlt -o s.dlt &&
	dlt-ckpt info --json s.dlt >info.json &&
	test "$(jget kind <info.json)" = "\"model\"" &&
	test "$(jget format <info.json)" = 1 &&
	test "$(jget step <info.json)" = null &&
	test "$(jget epoch <info.json)" = null &&
	test "$(jget best <info.json)" = null &&
	test "$(jget last <info.json)" = "{}" &&
	test "$(jget input.num_classes <info.json)" = 3 &&
	test "$(jget config <info.json)" = "\"model:\\n  - dense: 8\\n\"" &&
	test "$(jget tensors.7.name <info.json)" = "\"3.b\"" &&
	test "$(jget tensors.8 <info.json)" = null &&
	{ dlt-ckpt diff --json a.dlt s.dlt >diff.json; test $? = 1; } &&
	test "$(grep -o "\"status\":\"only_a\"" diff.json | wc -l)" = 12 &&
	test "$(grep -o "\"status\":\"equal\"" diff.json | wc -l)" = 8 &&
	test $(wc -c <s.dlt) -lt $(wc -c <a.dlt)
'

test_expect_success 'a failed write is a job failure (status 1), nothing left behind' '
	test_must_fail 1 "No space left on device" \
		sh -c "dlt-ckpt export -f safetensors -o - a.dlt >/dev/full" &&
	test_must_fail 2 "nosuchdir/x.dlt" dlt-ckpt strip a.dlt -o nosuchdir/x.dlt
'

test_expect_success 'usage errors' '
	test_must_fail 2 "unknown command '\''show'\''" dlt-ckpt show a.dlt &&
	test_must_fail 2 "missing command" dlt-ckpt &&
	test_must_fail 2 "export needs -o OUT" dlt-ckpt export -f npy a.dlt &&
	test_must_fail 2 "export needs -f safetensors|npy" dlt-ckpt export -o x a.dlt &&
	test_must_fail 2 "--format: '\''onnx'\'' is not safetensors or npy" \
		dlt-ckpt export -f onnx -o x a.dlt &&
	test_must_fail 2 "npy needs a directory, not -o -" dlt-ckpt export -f npy -o - a.dlt &&
	test_must_fail 2 "verify takes no --json" dlt-ckpt verify --json a.dlt &&
	test_must_fail 2 "info takes no -o" dlt-ckpt info -o x a.dlt &&
	test_must_fail 2 "strip takes no --weights-only" dlt-ckpt strip --weights-only -o x a.dlt &&
	test_must_fail 2 "diff takes A and B, got 1 operand" dlt-ckpt diff a.dlt &&
	test_must_fail 2 "average takes two CKPTs or more, got 1 operand" \
		dlt-ckpt average -o x a.dlt &&
	test_must_fail 2 "option '\''--json'\'' takes no value" dlt-ckpt info --json=1 a.dlt &&
	test_must_fail 2 "option '\''-o'\'' needs a value" dlt-ckpt strip a.dlt -o &&
	test_must_fail 2 "more than one -o" dlt-ckpt strip -o x -o y a.dlt &&
	test ! -e x
'
test_done
