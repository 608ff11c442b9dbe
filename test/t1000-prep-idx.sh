#!/bin/sh
# dlt-prep idx: IDX images and labels, plain or gzip'd, into a dataset
# archive; shuffle, split, stats; damaged input.
. "$(dirname "$0")/lib.sh"
. "$DATA/prep/lib-prep.sh"

# Six 2x3 images of the pixels 0, 51, ..., 255 (k/5 after scaling, k = 0..5):
# mean 0.5, population std sqrt(0.7/6).
mkidx img.idx 0x803 6 2 3 -- $(for i in 1 2 3 4 5 6; do echo 0 51 102 153 204 255; done)
mkidx lab.idx 0x801 6 -- 3 0 1 3 2 0
# 100 1x1 images whose pixel is their index, labelled index mod 10, to
# follow samples through a shuffle.
mkidx seq.idx 0x803 100 1 1 -- $(seq 0 99)
mkidx seqlab.idx 0x801 100 -- $(for i in $(seq 0 99); do echo $((i % 10)); done)
mkdir out

test_expect_success 'idx: an archive with x u8 [N,1,H,W] and y i32 [N]' '
	dlt-prep idx img.idx lab.idx -o d.dlt &&
	dlt-prep info --json d.dlt >info.json &&
	test "$(jget tensors.0.name <info.json)" = "\"x\"" &&
	test "$(jget tensors.0.dtype <info.json)" = "\"u8\"" &&
	test "$(jget tensors.0.shape <info.json)" = "[6,1,2,3]" &&
	test "$(jget tensors.1.name <info.json)" = "\"y\"" &&
	test "$(jget tensors.1.dtype <info.json)" = "\"i32\"" &&
	test "$(jget tensors.1.shape <info.json)" = "[6]"
'

test_expect_success 'idx: metadata says kind, source, n, shape, num_classes' '
	dlt-prep info --json d.dlt >info.json &&
	test "$(jget meta.kind <info.json)" = "\"dataset\"" &&
	test "$(jget meta.source <info.json)" = "\"idx\"" &&
	test "$(jget meta.n <info.json)" = 6 &&
	test "$(jget meta.shape <info.json)" = "[1,2,3]" &&
	test "$(jget meta.num_classes <info.json)" = 4 &&
	test "$(jget meta.classes <info.json)" = null &&
	test "$(jget counts <info.json)" = "[2,1,1,2]"
'

test_expect_success 'idx: the pixels and labels round-trip byte for byte' '
	tensor_bytes d.dlt x >x.bin &&
	tail -c +17 img.idx >want.bin &&
	test_cmp want.bin x.bin &&
	tensor_bytes d.dlt y >y.bin &&
	perl -e "print pack(q(l<*), 3, 0, 1, 3, 2, 0)" >want.bin &&
	test_cmp want.bin y.bin
'

test_expect_success 'idx: scale 1/255, global population mean and std of x*scale' '
	dlt-prep info --json d.dlt >info.json &&
	approx "$(jget meta.scale <info.json)" 0.00392156862745098 &&
	approx "$(jget meta.mean.0 <info.json)" 0.5 &&
	approx "$(jget meta.std.0 <info.json)" 0.341565025531986 &&
	test "$(jget meta.mean.1 <info.json)" = null &&
	test "$(jget meta.std.1 <info.json)" = null
'

test_expect_success 'idx: gzip input gives the same archive as plain input' '
	gzip -c img.idx >img.idx.gz &&
	gzip -c lab.idx >lab.idx.gz &&
	dlt-prep idx img.idx.gz lab.idx.gz -o gz.dlt &&
	test_cmp d.dlt gz.dlt
'

test_expect_success 'idx: -o - writes the same archive to stdout; info - reads it' '
	dlt-prep idx img.idx lab.idx -o - >stdout.dlt &&
	test_cmp d.dlt stdout.dlt &&
	dlt-prep idx img.idx lab.idx -o - | dlt-prep info --json - >info.json &&
	test "$(jget meta.n <info.json)" = 6
'

test_expect_success 'idx: images from stdin' '
	dlt-prep idx - lab.idx -o stdin.dlt <img.idx.gz &&
	test_cmp d.dlt stdin.dlt
'

test_expect_success 'shuffle: x and y move together, nothing lost' '
	dlt-prep idx seq.idx seqlab.idx --shuffle --seed 7 -o s.dlt &&
	tensor_bytes s.dlt x >x.bin &&
	tensor_bytes s.dlt y >y.bin &&
	perl -e "
		local \$/; open my \$x, q(<), q(x.bin); open my \$y, q(<), q(y.bin);
		my @x = unpack q(C*), <\$x>; my @y = unpack q(l<*), <\$y>;
		exit 1 if @x != 100 || @y != 100;
		for (0 .. 99) { exit 1 if \$y[\$_] != \$x[\$_] % 10 }
		exit 1 if join(q(,), @x) eq join(q(,), 0 .. 99);
		exit 1 if join(q(,), sort { \$a <=> \$b } @x) ne join(q(,), 0 .. 99);
	"
'

test_expect_success 'shuffle: the same seed gives the same bytes, another seed others' '
	dlt-prep idx seq.idx seqlab.idx --shuffle --seed 7 -o s2.dlt &&
	test_cmp s.dlt s2.dlt &&
	dlt-prep idx seq.idx seqlab.idx --shuffle --seed 8 -o s3.dlt &&
	! cmp -s s.dlt s3.dlt &&
	dlt-prep idx seq.idx seqlab.idx --shuffle -o s4.dlt &&
	dlt-prep idx seq.idx seqlab.idx --shuffle --seed 0 -o s5.dlt &&
	test_cmp s4.dlt s5.dlt &&
	! cmp -s s.dlt s4.dlt
'

test_expect_success 'split: round(N*F) first, the rest second, stats of the first in both' '
	dlt-prep idx seq.idx seqlab.idx --split 0.9 -o a.dlt -o b.dlt &&
	dlt-prep info --json a.dlt >a.json &&
	dlt-prep info --json b.dlt >b.json &&
	test "$(jget meta.n <a.json)" = 90 &&
	test "$(jget meta.n <b.json)" = 10 &&
	test "$(jget tensors.0.shape <b.json)" = "[10,1,1,1]" &&
	test "$(jget meta.num_classes <b.json)" = 10 &&
	tensor_bytes b.dlt x >x.bin &&
	perl -e "print pack(q(C*), 90 .. 99)" >want.bin &&
	test_cmp want.bin x.bin &&
	approx "$(jget meta.mean.0 <a.json)" "$(perl -e "print 44.5 / 255")" &&
	test "$(jget meta.mean <a.json)" = "$(jget meta.mean <b.json)" &&
	test "$(jget meta.std <a.json)" = "$(jget meta.std <b.json)"
'

test_expect_success 'split: rounds half away from zero; shuffle comes first' '
	dlt-prep idx img.idx lab.idx --split 0.25 -o a.dlt -o b.dlt &&
	test "$(dlt-prep info --json a.dlt | jget meta.n)" = 2 &&
	test "$(dlt-prep info --json b.dlt | jget meta.n)" = 4 &&
	dlt-prep idx seq.idx seqlab.idx --shuffle --seed 7 --split 0.5 -o a.dlt -o b.dlt &&
	tensor_bytes a.dlt x >a.bin &&
	tensor_bytes b.dlt x >b.bin &&
	tensor_bytes s.dlt x >s.bin &&
	cat a.bin b.bin >ab.bin &&
	test_cmp s.bin ab.bin
'

test_expect_success 'bad input: truncated data' '
	head -c -1 img.idx >short.idx &&
	test_must_fail 2 "short.idx: truncated: the header promises 36 bytes of data, the file holds 35" \
		dlt-prep idx short.idx lab.idx -o out/d.dlt &&
	is_empty out
'

test_expect_success 'bad input: truncated gzip stream' '
	head -c -12 img.idx.gz >short.gz &&
	test_must_fail 2 "short.gz: truncated" dlt-prep idx short.gz lab.idx -o out/d.dlt &&
	is_empty out
'

test_expect_success 'bad input: damaged gzip data' '
	gzip -nc img.idx >crc.gz &&
	perl -0777 -pi -e "substr(\$_, -8, 1) ^= chr(1)" crc.gz &&
	test_must_fail 2 "crc.gz: gzip: incorrect data check" \
		dlt-prep idx crc.gz lab.idx -o out/d.dlt &&
	is_empty out
'

test_expect_success 'bad input: a header that claims far more than the file holds' '
	mkidx huge.idx 0x803 1000000 1000 1000 -- 1 2 3 &&
	test_must_fail 2 "huge.idx: truncated: the header promises 1000000000000 bytes" \
		dlt-prep idx huge.idx lab.idx -o out/d.dlt &&
	mkidx huge.idx 0x803 4294967295 4294967295 4294967295 -- 1 &&
	test_must_fail 2 "huge.idx: IDX dimensions too large" \
		dlt-prep idx huge.idx lab.idx -o out/d.dlt &&
	is_empty out
'

# Runs a command with no block of memory over 200 MB: RLIMIT_DATA, or
# under make check-asan ASan's own limit (its shadow memory is far over
# any RLIMIT_DATA)
small_blocks() {
	if [ -n "${ASAN_OPTIONS:-}" ]; then
		ASAN_OPTIONS=$ASAN_OPTIONS:max_allocation_size_mb=200:allocator_may_return_null=1 "$@"
	else
		(ulimit -d 204800 && exec "$@")
	fi
}

test_expect_success 'bad input: a header that claims more than the file, read whole to split' '
	mkidx big.idx 0x803 6 8192 8192 -- 1 2 3 &&
	test_must_fail 2 "big.idx: truncated: the header promises 402653184 bytes of data, the file holds 3" \
		small_blocks dlt-prep idx --split 0.5 big.idx lab.idx -o out/a.dlt -o out/b.dlt &&
	mkidx big.idx 0x803 6 8193 8192 -- 1 2 3 &&
	test_must_fail 2 "big.idx: images of 8193 x 8192 pixels: more than 67108864" \
		dlt-prep idx big.idx lab.idx -o out/a.dlt &&
	is_empty out
'

test_expect_success 'bad input: trailing data' '
	cat img.idx lab.idx >long.idx &&
	test_must_fail 2 "long.idx: trailing data after the 36 bytes the header promises" \
		dlt-prep idx long.idx lab.idx -o out/d.dlt &&
	is_empty out
'

test_expect_success 'bad input: wrong magic' '
	test_must_fail 2 "lab.idx: bad IDX magic 0x00000801, expected 0x00000803 (u8 images)" \
		dlt-prep idx lab.idx lab.idx -o out/d.dlt &&
	test_must_fail 2 "img.idx: bad IDX magic 0x00000803, expected 0x00000801 (u8 labels)" \
		dlt-prep idx img.idx img.idx -o out/d.dlt &&
	mkidx f32.idx 0x0d03 1 1 1 -- 0 0 0 0 &&
	test_must_fail 2 "f32.idx: bad IDX magic 0x00000d03" \
		dlt-prep idx f32.idx lab.idx -o out/d.dlt &&
	is_empty out
'

test_expect_success 'bad input: as many labels as images' '
	mkidx five.idx 0x801 5 -- 0 1 2 3 4 &&
	test_must_fail 2 "five.idx: 5 labels, but img.idx has 6 images" \
		dlt-prep idx img.idx five.idx -o out/d.dlt &&
	is_empty out
'

test_expect_success 'bad input: empty file, zero dimension, missing file' '
	: >empty.idx &&
	test_must_fail 2 "empty.idx: empty file" dlt-prep idx empty.idx lab.idx -o out/d.dlt &&
	mkidx zero.idx 0x803 6 0 3 &&
	test_must_fail 2 "zero.idx: IDX dimension 1 is 0" \
		dlt-prep idx zero.idx lab.idx -o out/d.dlt &&
	test_must_fail 2 "nosuch.idx: No such file or directory" \
		dlt-prep idx nosuch.idx lab.idx -o out/d.dlt &&
	is_empty out
'

test_expect_success 'a failed write is a job failure (status 1), not bad input' '
	test_must_fail 1 "No space left on device" \
		sh -c "dlt-prep idx img.idx lab.idx -o - >/dev/full"
'

test_expect_success 'split: the second part failing takes the first, already in place, back' '
	rm -f first.dlt &&
	test_must_fail 1 "No space left on device" \
		sh -c "dlt-prep idx img.idx lab.idx --split 0.5 -o first.dlt -o - >/dev/full" &&
	! test -e first.dlt
'

src=/usr/share/datasets/fashion-mnist
if test -d $src; then
	test_expect_success 'Fashion-MNIST t10k: 10000 images, 10 classes of 1000' '
		dlt-prep idx $src/t10k-images-idx3-ubyte.gz $src/t10k-labels-idx1-ubyte.gz \
			-o fm.dlt &&
		dlt-prep info --json fm.dlt >info.json &&
		test "$(jget tensors.0.shape <info.json)" = "[10000,1,28,28]" &&
		test "$(jget meta.num_classes <info.json)" = 10 &&
		test "$(jget counts <info.json)" = \
			"[1000,1000,1000,1000,1000,1000,1000,1000,1000,1000]" &&
		perl -e "exit !(abs($(jget meta.mean.0 <info.json) - 0.2868) < 1e-4)" &&
		perl -e "exit !(abs($(jget meta.std.0 <info.json) - 0.3524) < 1e-4)" &&
		gzip -dc $src/t10k-images-idx3-ubyte.gz | tail -c +17 >want.bin &&
		tensor_bytes fm.dlt x >x.bin &&
		test_cmp want.bin x.bin
	'
fi
test_done
