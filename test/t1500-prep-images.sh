#!/bin/sh
# dlt-prep images: folders of class folders of PNG and JPEG images, as
# torchvision's ImageFolder reads them; the same tensors as dlt-prep idx
# for the same images, the same pixels as PIL, --size and --channels,
# damaged and hostile input.  Images are made with python3's PIL
# (python3-pil); the tests that need it say so and skip without it.
. "$(dirname "$0")/lib.sh"
. "$DATA/prep/lib-prep.sh"

CORPUS=$TEST_DIR/fuzz/image
FMNIST=/usr/share/datasets/fashion-mnist
PY=
for py in python3 /usr/bin/python3; do
	if command -v $py >/dev/null 2>&1 && $py -c "import PIL" 2>/dev/null; then
		PY=$py
		break
	fi
done

# test_with_pil 'what' 'commands': a test that needs PIL, skipped without it
test_with_pil() {
	if test -n "$PY"; then
		test_expect_success "$1" "$2"
	else
		test_count=$((test_count + 1))
		echo "ok $test_count # skip $1 (no python3 with PIL: install python3-pil)"
	fi
}

# test_with_fm 'what' 'commands': a test that needs PIL and Fashion-MNIST
test_with_fm() {
	if test -d $FMNIST; then
		test_with_pil "$1" "$2"
	else
		test_count=$((test_count + 1))
		echo "ok $test_count # skip $1 (no $FMNIST: install dataset-fashion-mnist)"
	fi
}

# pixels.py DIR C [H W]: the x tensor that dlt-prep images DIR should
# give, by PIL and the torchvision recipe (ImageFolder's order,
# convert("L" or "RGB"), Resize(cover HxW, bilinear) then CenterCrop),
# written out without dlt: u8 planes, image after image.
cat >pixels.py <<'EOF'
import os, sys
from PIL import Image
root, c = sys.argv[1], int(sys.argv[2])
size = (int(sys.argv[3]), int(sys.argv[4])) if len(sys.argv) > 4 else None
classes = sorted(e.name for e in os.scandir(root) if e.is_dir() and e.name[0] != '.')
out = sys.stdout.buffer
for cls in classes:
    for d, dirs, files in sorted(os.walk(os.path.join(root, cls), followlinks=True)):
        if '/.' in d[len(root):]:
            continue
        for f in sorted(files):
            if f[0] == '.' or not f.lower().endswith(('.png', '.jpg', '.jpeg')):
                continue
            im = Image.open(os.path.join(d, f)).convert('L' if c == 1 else 'RGB')
            if size:
                H, W = size
                w, h = im.size
                # torchvision's Resize(int) for the side that must grow most
                if W * h >= H * w:
                    rw, rh = W, int(W * h / w)
                else:
                    rh, rw = H, int(H * w / h)
                if (rw, rh) != (w, h):
                    im = im.resize((rw, rh), Image.BILINEAR)
                top, left = int(round((rh - H) / 2.0)), int(round((rw - W) / 2.0))
                im = im.crop((left, top, left + W, top + H))
            out.write(b''.join(b.tobytes() for b in im.split()))
EOF

# maxdiff A B: the largest difference of two byte files of one length
maxdiff() {
	perl -e 'local $/; open my $a, "<:raw", $ARGV[0] or die; open my $b, "<:raw", $ARGV[1] or die;
		my @a = unpack "C*", <$a>; my @b = unpack "C*", <$b>;
		die "lengths " . @a . " and " . @b . "\n" if @a != @b;
		my $m = 0; for (0 .. $#a) { my $d = abs($a[$_] - $b[$_]); $m = $d if $d > $m }
		print "$m\n"' "$1" "$2"
}

# within TOL A B: A and B differ by at most TOL in any byte
within() {
	d=$(maxdiff "$2" "$3") || return 1
	test "$d" -le "$1" || { echo "max difference $d, more than $1"; return 1; }
}

mkdir out

# 2000 Fashion-MNIST training images: as PNG class folders ("0 T-shirt",
# "1 Trouser", ... sort as the labels do; 00001.png, ... keep the original
# order within a class), and as an IDX pair of the same images grouped by
# class in the same order.
cat >fm.py <<'EOF'
import gzip, os, struct, sys
from PIL import Image
src, n = sys.argv[1], 2000
names = ['T-shirt', 'Trouser', 'Pullover', 'Dress', 'Coat', 'Sandal', 'Shirt', 'Sneaker',
         'Bag', 'Ankle boot']
x = gzip.open(src + '/train-images-idx3-ubyte.gz').read()[16:16 + n * 784]
y = gzip.open(src + '/train-labels-idx1-ubyte.gz').read()[8:8 + n]
order = sorted(range(n), key=lambda i: (y[i], i))
for i in range(n):
    d = 'fm/%d %s' % (y[i], names[y[i]])
    os.makedirs(d, exist_ok=True)
    Image.frombytes('L', (28, 28), x[i * 784:(i + 1) * 784]).save('%s/%05d.png' % (d, i))
with open('fm-images.idx', 'wb') as f:
    f.write(struct.pack('>IIII', 0x803, n, 28, 28))
    f.write(b''.join(x[i * 784:(i + 1) * 784] for i in order))
with open('fm-labels.idx', 'wb') as f:
    f.write(struct.pack('>II', 0x801, n) + bytes(y[i] for i in order))
EOF
if test -n "$PY" && test -d $FMNIST; then
	$PY fm.py $FMNIST || echo "fm.py failed"
fi

test_with_fm 'PNG folders of Fashion-MNIST give the tensors dlt-prep idx gives' '
	dlt-prep images fm -o fm.dlt &&
	dlt-prep idx fm-images.idx fm-labels.idx -o idx.dlt &&
	tensor_bytes fm.dlt x >x.bin &&
	tensor_bytes idx.dlt x >want.bin &&
	test $(wc -c <x.bin) = 1568000 &&
	test_cmp want.bin x.bin &&
	tensor_bytes fm.dlt y >y.bin &&
	tensor_bytes idx.dlt y >want.bin &&
	test_cmp want.bin y.bin &&
	dlt-prep info --json fm.dlt >fm.json &&
	dlt-prep info --json idx.dlt >idx.json &&
	test "$(jget tensors.0.shape <fm.json)" = "[2000,1,28,28]" &&
	test "$(jget tensors.1.dtype <fm.json)" = "\"i32\"" &&
	test "$(jget meta.source <fm.json)" = "\"images\"" &&
	test "$(jget meta.num_classes <fm.json)" = 10 &&
	test "$(jget meta.classes.0 <fm.json)" = "\"0 T-shirt\"" &&
	test "$(jget meta.classes.9 <fm.json)" = "\"9 Ankle boot\"" &&
	test "$(jget counts <fm.json)" = "$(jget counts <idx.json)" &&
	test "$(jget meta.scale <fm.json)" = "$(jget meta.scale <idx.json)" &&
	test "$(jget meta.mean <fm.json)" = "$(jget meta.mean <idx.json)" &&
	test "$(jget meta.std <fm.json)" = "$(jget meta.std <idx.json)"
'

test_with_fm 'the archive is the same whatever the number of threads' '
	DLT_THREADS=1 dlt-prep images fm -o t1.dlt &&
	DLT_THREADS=7 dlt-prep images fm/ -o t7.dlt &&
	test_cmp fm.dlt t1.dlt &&
	test_cmp fm.dlt t7.dlt
'

test_with_fm '--shuffle, --seed and --split as for the other inputs' '
	dlt-prep images fm --shuffle --seed 3 --split 0.9 -o a.dlt -o b.dlt &&
	dlt-prep idx fm-images.idx fm-labels.idx --shuffle --seed 3 --split 0.9 \
		-o ia.dlt -o ib.dlt &&
	for p in a b; do
		tensor_bytes $p.dlt x >x.bin && tensor_bytes i$p.dlt x >want.bin &&
		test_cmp want.bin x.bin &&
		tensor_bytes $p.dlt y >y.bin && tensor_bytes i$p.dlt y >want.bin &&
		test_cmp want.bin y.bin || exit 1
	done &&
	test "$(dlt-prep info --json a.dlt | jget meta.n)" = 1800 &&
	test "$(dlt-prep info --json b.dlt | jget meta.classes.3)" = "\"3 Dress\"" &&
	dlt-prep images fm --codec zstd -o z.dlt &&
	tensor_bytes z.dlt x >x.bin &&
	tensor_bytes fm.dlt x >want.bin &&
	test_cmp want.bin x.bin
'

# Colour and grey images of several sizes and kinds, as JPEG (quality 95)
# and PNG, to check the pixels against PIL's decode.
cat >mk.py <<'EOF'
import random, sys
from PIL import Image
random.seed(int(sys.argv[1]))
def image(mode, w, h):
    # smooth shapes and some noise, as photos have both
    im = Image.new(mode, (w, h))
    n = len(mode)
    px = []
    for y in range(h):
        for x in range(w):
            v = [(x * 255 // w + 40 * k + random.randrange(30)) % 256 for k in range(n)]
            v = [(c + y * 3) % 256 for c in v]
            px.append(tuple(v) if n > 1 else v[0])
    im.putdata(px)
    return im
for spec in sys.argv[2:]:
    path, mode, w, h = spec.split(':')
    im = image(mode, int(w), int(h))
    im.save(path, quality=95) if path.endswith('.jpg') else im.save(path)
EOF

if test -n "$PY"; then
	mkdir -p jpg/cat jpg/dog rgb/a rgb/b mixed/c mixed/d
	$PY mk.py 1 jpg/cat/1.jpg:L:32:24 jpg/cat/2.jpg:L:32:24 jpg/dog/x.jpeg:L:32:24 \
		jpg/dog/Y.JPG:L:32:24 &&
	$PY mk.py 2 rgb/a/1.jpg:RGB:40:30 rgb/a/2.png:RGB:40:30 rgb/b/3.png:RGBA:40:30 \
		rgb/b/4.jpg:RGB:40:30 rgb/b/5.png:P:40:30 &&
	$PY mk.py 3 mixed/c/1.jpg:RGB:64:48 mixed/c/2.png:L:20:33 mixed/d/3.png:RGB:7:5 \
		mixed/d/4.jpg:L:48:64 mixed/d/5.png:RGBA:100:3 || echo "mk.py failed"
fi

test_with_pil 'a JPEG folder loads with the pixels of PIL, grey by default' '
	dlt-prep images jpg -o j.dlt &&
	dlt-prep info --json j.dlt >j.json &&
	test "$(jget tensors.0.shape <j.json)" = "[4,1,24,32]" &&
	test "$(jget meta.classes <j.json)" = "[\"cat\",\"dog\"]" &&
	tensor_bytes j.dlt y >y.bin &&
	perl -e "print pack(q(l<*), 0, 0, 1, 1)" >want.bin &&
	test_cmp want.bin y.bin &&
	tensor_bytes j.dlt x >x.bin &&
	$PY pixels.py jpg 1 >want.bin &&
	within 1 want.bin x.bin
'

test_with_pil 'RGB images: 3 channels by default, or --channels 1 (luma as PIL convert(L))' '
	dlt-prep images rgb -o c.dlt &&
	test "$(dlt-prep info --json c.dlt | jget tensors.0.shape)" = "[5,3,30,40]" &&
	tensor_bytes c.dlt x >x.bin &&
	$PY pixels.py rgb 3 >want.bin &&
	within 1 want.bin x.bin &&
	dlt-prep images rgb --channels 1 -o g.dlt &&
	test "$(dlt-prep info --json g.dlt | jget tensors.0.shape)" = "[5,1,30,40]" &&
	tensor_bytes g.dlt x >x.bin &&
	$PY pixels.py rgb 1 >want.bin &&
	within 1 want.bin x.bin &&
	dlt-prep images jpg --channels 3 -o j3.dlt &&
	test "$(dlt-prep info --json j3.dlt | jget tensors.0.shape)" = "[4,3,24,32]" &&
	tensor_bytes j3.dlt x >x.bin &&
	$PY pixels.py jpg 3 >want.bin &&
	within 1 want.bin x.bin
'

test_with_pil '--size resizes and centre-crops as Resize+CenterCrop: the stated shape' '
	dlt-prep images mixed --size 16x16 -o s.dlt &&
	test "$(dlt-prep info --json s.dlt | jget tensors.0.shape)" = "[5,3,16,16]" &&
	tensor_bytes s.dlt x >x.bin &&
	$PY pixels.py mixed 3 16 16 >want.bin &&
	within 1 want.bin x.bin &&
	dlt-prep images mixed --size 9x31 --channels 1 -o s.dlt &&
	test "$(dlt-prep info --json s.dlt | jget tensors.0.shape)" = "[5,1,9,31]" &&
	tensor_bytes s.dlt x >x.bin &&
	$PY pixels.py mixed 1 9 31 >want.bin &&
	within 1 want.bin x.bin &&
	dlt-prep images mixed --size 200x150 -o s.dlt &&
	test "$(dlt-prep info --json s.dlt | jget tensors.0.shape)" = "[5,3,200,150]" &&
	tensor_bytes s.dlt x >x.bin &&
	$PY pixels.py mixed 3 200 150 >want.bin &&
	within 1 want.bin x.bin
'

test_with_pil 'without --size, an image of another size is an error naming it' '
	test_must_fail 2 "dlt-prep: mixed/c/2.png: 33x20, not the first image'"'"'s 48x64 (--size resizes them all)" \
		dlt-prep images mixed -o out/d.dlt &&
	is_empty out
'

# The order of ImageFolder: subfolders of a class included, by path, then
# name; hidden files and folders, and files that are not images, skipped.
test_expect_success 'order: classes and files bytewise, subfolders as os.walk sorts them' '
	mkdir -p ord/b ord/a/sub ord/a/sub-x ord/a/sub/deeper ord/a/.git ord/.hidden ord/B &&
	for f in b/1.png a/z.png a/sub/a.png a/sub-x/b.png a/sub/deeper/d.png B/0.png; do
		cp "$CORPUS/grey.png" ord/$f || exit 1
	done &&
	echo garbage >ord/a/.x.png && echo garbage >ord/a/.git/y.png &&
	echo garbage >ord/.hidden/z.png && echo notes >ord/a/README.txt &&
	echo top >ord/top.png &&
	dlt-prep images ord -o o.dlt &&
	dlt-prep info --json o.dlt >o.json &&
	test "$(jget meta.classes <o.json)" = "[\"B\",\"a\",\"b\"]" &&
	test "$(jget tensors.0.shape <o.json)" = "[6,1,5,7]" &&
	test "$(jget counts <o.json)" = "[1,4,1]"
'

test_with_pil 'order: the images of a class as ImageFolder lists them' '
	rm -rf ord && mkdir -p ord/c/sub ord/c/sub-x ord/c/sub/deeper ord/d &&
	$PY -c "
import sys
from PIL import Image
for v, f in enumerate(sys.argv[1:]):
    Image.new(\"L\", (1, 1), v * 10).save(\"ord/\" + f)
" c/z.png c/sub/a.png c/sub-x/b.png c/sub/deeper/d.png c/A.jpg d/0.png &&
	dlt-prep images ord -o o.dlt &&
	tensor_bytes o.dlt x >x.bin &&
	$PY pixels.py ord 1 >want.bin &&
	test_cmp want.bin x.bin &&
	perl -e "print pack(q(C*), 40, 0, 10, 20, 30, 50)" >want.bin &&
	within 1 want.bin x.bin
'

# Bad input: exit 2, one line naming the file, nothing left behind.
mkdir -p good/a good/b
cp "$CORPUS/grey.png" good/a/1.png
cp "$CORPUS/grey.png" good/b/2.png
cp "$CORPUS/grey.png" good/b/3.png

# bad NAME FILE: good/ with good/b/NAME replaced by FILE, as bad/
bad() {
	rm -rf bad && cp -r good bad && cp "$2" "bad/b/$1"
}

test_expect_success 'the good folder works' '
	dlt-prep images good -o out/g.dlt &&
	test "$(dlt-prep info --json out/g.dlt | jget tensors.0.shape)" = "[3,1,5,7]" &&
	rm out/g.dlt
'

test_expect_success 'bad input: a damaged PNG' '
	bad 3.png "$CORPUS/crc.png" &&
	test_must_fail 2 "dlt-prep: bad/b/3.png: damaged PNG: IDAT: incorrect data check" \
		dlt-prep images bad -o out/d.dlt &&
	bad 3.png "$CORPUS/truncated.png" &&
	test_must_fail 2 "dlt-prep: bad/b/3.png: damaged PNG: truncated" \
		dlt-prep images bad --size 5x7 -o out/d.dlt &&
	is_empty out
'

test_expect_success 'bad input: a damaged JPEG' '
	bad 4.jpg "$CORPUS/truncated.jpg" &&
	test_must_fail 2 "dlt-prep: bad/b/4.jpg: damaged JPEG: premature end of JPEG file" \
		dlt-prep images bad --size 5x7 -o out/d.dlt &&
	head -c 200 "$CORPUS/rgb.jpg" >cut.jpg &&
	bad 4.jpg cut.jpg &&
	test_must_fail 2 "dlt-prep: bad/b/4.jpg: damaged JPEG" \
		dlt-prep images bad --size 5x7 -o out/d.dlt &&
	is_empty out
'

test_expect_success 'bad input: a zero-byte file' '
	: >empty &&
	bad 3.png empty &&
	test_must_fail 2 "dlt-prep: bad/b/3.png: empty file" dlt-prep images bad -o out/d.dlt &&
	is_empty out
'

test_expect_success 'bad input: a 100000x100000 header, refused before allocating' '
	bad 3.png "$CORPUS/huge-header.png" &&
	test_must_fail 2 "dlt-prep: bad/b/3.png: 100000x100000 pixels is over the limit of 67108864" \
		dlt-prep images bad --size 5x7 -o out/d.dlt &&
	bad 3.jpg "$CORPUS/huge-header.jpg" &&
	test_must_fail 2 "dlt-prep: bad/b/3.jpg: 65000x65000 pixels is over the limit" \
		dlt-prep images bad --size 5x7 -o out/d.dlt &&
	is_empty out
'

test_expect_success 'bad input: a file that is not an image' '
	echo "hello" >text &&
	bad 3.png text &&
	test_must_fail 2 "dlt-prep: bad/b/3.png: not a PNG or JPEG image" \
		dlt-prep images bad -o out/d.dlt &&
	bad 3.png "$CORPUS/cmyk.jpg" &&
	test_must_fail 2 "dlt-prep: bad/b/3.png: CMYK JPEG images are not supported" \
		dlt-prep images bad --size 5x7 -o out/d.dlt &&
	bad 3.bmp text &&
	test_must_fail 2 "dlt-prep: bad/b/3.bmp: bmp images are not supported (PNG and JPEG only)" \
		dlt-prep images bad -o out/d.dlt &&
	is_empty out
'

test_expect_success 'bad input: the first damaged file in order is named, whatever the threads' '
	bad 2.png text &&
	cp text bad/b/3.png &&
	for t in 1 2 5; do
		export DLT_THREADS=$t &&
		test_must_fail 2 "dlt-prep: bad/b/2.png: not a PNG or JPEG image" \
			dlt-prep images bad -o out/d.dlt || exit 1
	done &&
	is_empty out
'

test_expect_success 'bad input: an empty folder, no class folders, an empty class' '
	mkdir -p none &&
	test_must_fail 2 "dlt-prep: none: no class folders (a subfolder of images per class)" \
		dlt-prep images none -o out/d.dlt &&
	cp "$CORPUS/grey.png" none/1.png &&
	test_must_fail 2 "dlt-prep: none: no class folders" dlt-prep images none -o out/d.dlt &&
	rm -rf bad && cp -r good bad && mkdir bad/c && echo x >bad/c/notes.txt &&
	test_must_fail 2 "dlt-prep: bad/c: no PNG or JPEG images" \
		dlt-prep images bad -o out/d.dlt &&
	test_must_fail 2 "dlt-prep: nosuch: No such file or directory" \
		dlt-prep images nosuch -o out/d.dlt &&
	test_must_fail 2 "dlt-prep: none/1.png: Not a directory" \
		dlt-prep images none/1.png -o out/d.dlt &&
	is_empty out
'

test_expect_success 'bad input: a link back to a folder above' '
	rm -rf bad && cp -r good bad && ln -s ../b bad/b/up &&
	test_must_fail 2 "dlt-prep: bad/b/up: a link back to a folder above it" \
		dlt-prep images bad -o out/d.dlt &&
	is_empty out
'

test_expect_success 'usage: --size, --channels and the operands' '
	test_must_fail 2 "dlt-prep: --size: expected HxW" dlt-prep images good --size 28 -o out/d.dlt &&
	test_must_fail 2 "dlt-prep: --size: expected HxW" dlt-prep images good --size 0x5 -o out/d.dlt &&
	test_must_fail 2 "dlt-prep: --size: 10000x10000 is more than 67108864 pixels" \
		dlt-prep images good --size 10000x10000 -o out/d.dlt &&
	test_must_fail 2 "dlt-prep: --channels: expected 1 or 3, got '"'"'2'"'"'" \
		dlt-prep images good --channels 2 -o out/d.dlt &&
	test_must_fail 2 "dlt-prep: --size and --channels apply to images only" \
		dlt-prep csv x.csv -l 0 --size 2x2 -o out/d.dlt &&
	test_must_fail 2 "dlt-prep: images takes one DIR, got 2 operands" \
		dlt-prep images good good -o out/d.dlt &&
	test_must_fail 2 "dlt-prep: --label, --header and --no-header apply to csv only" \
		dlt-prep images good -l 0 -o out/d.dlt &&
	is_empty out
'

test_done
