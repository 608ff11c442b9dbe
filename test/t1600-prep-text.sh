#!/bin/sh
# dlt-prep text: text into token archives, bytes and a BPE learned from the
# text (Debian's fortunes), --eot, --split, --tokenizer-from, what info
# says, every file of the corpus back from its tokens, and bad input.
. "$(dirname "$0")/lib.sh"

FORTUNES=/usr/share/games/fortunes
if test -f "$FORTUNES/fortunes"; then
	have_fortunes=1
else
	have_fortunes=
fi
test_fortunes() {
	if test -n "$have_fortunes"; then
		test_expect_success "$1" "$2"
	else
		test_count=$((test_count + 1))
		echo "ok $test_count # skip: no $FORTUNES (Debian's fortunes)"
	fi
}
# The text files of the corpus: not the .dat indexes, nor the .u8 links
fortune_texts() {
	for f in "$FORTUNES"/*; do
		case $f in
		*.dat | *.u8) ;;
		*) echo "$f" ;;
		esac
	done
}

# meta FILE: the metadata of an archive, as JSON
meta() {
	dlt-prep info --json "$1" | sed 's/.*"meta":\({[^}]*}\).*/\1/'
}

printf 'hello world\nhello there\n' >a.txt
printf 'second file\n' >b.txt

test_expect_success 'bytes (the default): an id a byte, u16' '
	dlt-prep text -o a.dlt a.txt &&
	meta a.dlt >m &&
	echo "{\"kind\":\"tokens\",\"tokenizer\":\"bytes\",\"vocab\":256,\"n\":24,\"bytes\":24}" >want &&
	test_cmp want m &&
	dlt-prep info a.dlt >info &&
	grep -q "^  tokens  u16    \[24\]" info &&
	grep -q "^bytes per token: 1$" info &&
	! grep -q "longest tokens" info &&
	dlt-prep text --decode a.dlt >back &&
	test_cmp a.txt back
'

test_expect_success 'standard input, a pipe out, zstd' '
	for i in $(seq 100); do cat a.txt; done >big.txt &&
	cat big.txt | dlt-prep text --codec zstd -o - - >s.dlt &&
	meta s.dlt | grep -q "\"n\":2400,\"bytes\":2400" &&
	dlt-prep info s.dlt | grep -q "^  tokens  u16    \[2400\]  zstd" &&
	dlt-prep text --decode s.dlt >back &&
	test_cmp big.txt back
'

test_expect_success '--eot: an end-of-text token between files, the vocabulary one larger' '
	dlt-prep text --eot -o e.dlt a.txt b.txt a.txt &&
	meta e.dlt >m &&
	echo "{\"kind\":\"tokens\",\"tokenizer\":\"bytes\",\"vocab\":257,\"eot\":256,\"n\":62,\"bytes\":60}" >want &&
	test_cmp want m &&
	dlt-prep text --decode e.dlt >back &&
	cat a.txt b.txt a.txt >want &&
	test_cmp want back
'

test_expect_success '--split: the first part, then the rest, each with its bytes' '
	dlt-prep text --split 0.75 -o tr.dlt -o va.dlt a.txt b.txt &&
	meta tr.dlt | grep -q "\"n\":27,\"bytes\":27}" &&
	meta va.dlt | grep -q "\"n\":9,\"bytes\":9}" &&
	dlt-prep text --decode tr.dlt >back &&
	dlt-prep text --decode va.dlt >>back &&
	cat a.txt b.txt >want &&
	test_cmp want back
'

test_fortunes 'bpe on part of fortunes: the vocabulary asked, the text back' '
	dlt-prep text --tokenizer bpe --vocab 1000 -o bpe.dlt \
		$FORTUNES/fortunes $FORTUNES/goedel $FORTUNES/kids $FORTUNES/food &&
	meta bpe.dlt >m &&
	grep -q "^{\"kind\":\"tokens\",\"tokenizer\":\"bpe\",\"vocab\":1000,\"n\":[0-9]*,\"bytes\":94871}$" m &&
	dlt-prep info bpe.dlt >info &&
	grep -q "^  merges  i32    \[744, 2\]" info &&
	bpt=$(sed -n "s/^bytes per token: //p" info) &&
	echo "bytes per token: $bpt" &&
	awk -v b="$bpt" "BEGIN { exit !(b > 2 && b < 4) }" &&
	dlt-prep text --decode bpe.dlt >back &&
	cat $FORTUNES/fortunes $FORTUNES/goedel $FORTUNES/kids $FORTUNES/food >want &&
	test_cmp want back
'

test_fortunes 'bpe learning is deterministic: the same archive twice' '
	dlt-prep text --tokenizer bpe --vocab 1000 -o bpe2.dlt \
		$FORTUNES/fortunes $FORTUNES/goedel $FORTUNES/kids $FORTUNES/food &&
	cmp bpe.dlt bpe2.dlt
'

test_fortunes 'info: the longest merged tokens, escaped; as JSON too' '
	dlt-prep info bpe.dlt >info &&
	sed -n "/^longest tokens:/,\$p" info >longest &&
	test $(wc -l <longest) = 7 &&
	grep -q "^     id  bytes  token$" longest &&
	dlt-prep info --json bpe.dlt >j &&
	grep -q "\"bytes_per_token\":[0-9.]*,\"longest_tokens\":\[{\"id\":[0-9]*,\"bytes\":[0-9]*,\"token\":\"" j
'

test_fortunes '--tokenizer-from: another file by the same tokenizer' '
	dlt-prep text --tokenizer-from bpe.dlt -o h.dlt $FORTUNES/humorists &&
	meta h.dlt | grep -q "\"tokenizer\":\"bpe\",\"vocab\":1000,\"n\":" &&
	dlt-prep info h.dlt | grep -q "^  merges  i32    \[744, 2\]" &&
	dlt-prep text --decode h.dlt >back &&
	test_cmp $FORTUNES/humorists back
'

test_fortunes '--tokenizer-from and --eot: an eot is added, or kept' '
	dlt-prep text --tokenizer-from bpe.dlt --eot -o he.dlt a.txt b.txt &&
	meta he.dlt | grep -q "\"vocab\":1001,\"eot\":1000," &&
	dlt-prep text --tokenizer-from he.dlt -o h2.dlt a.txt &&
	meta h2.dlt | grep -q "\"vocab\":1001,\"eot\":1000," &&
	dlt-prep text --decode he.dlt >back &&
	cat a.txt b.txt >want &&
	test_cmp want back
'

if test -n "$have_fortunes"; then
	# learning on the whole corpus, timed (a print, not a test)
	start=$(date +%s.%N)
	dlt-prep text --tokenizer bpe --vocab 4096 -o all.dlt $(fortune_texts) 2>err
	end=$(date +%s.%N)
	echo "# learning a vocabulary of 4096 on the $(cat $(fortune_texts) | wc -c) bytes" \
		"of fortunes, and encoding them: $(awk "BEGIN { printf \"%.2f\", $end - $start }") s"
fi

test_fortunes 'every file of fortunes comes back from its tokens (vocab 4096)' '
	meta all.dlt | grep -q "\"tokenizer\":\"bpe\",\"vocab\":4096," &&
	for f in $FORTUNES/*; do
		dlt-prep text --tokenizer-from all.dlt -o f.dlt $f &&
		dlt-prep text --decode f.dlt >back &&
		cmp $f back || return 1
	done
'

test_fortunes 'bytes: every file of fortunes comes back too' '
	for f in $FORTUNES/*; do
		dlt-prep text -o f.dlt $f &&
		dlt-prep text --decode f.dlt >back &&
		cmp $f back || return 1
	done
'

# bad DLT_STATUS 'message' args...: the one-line error, and no file left
# behind in the directory
listing() {
	ls -A | grep -v "^\.\(out\|stdout\|stderr\)$"
}
bad() {
	before=$(listing)
	test_must_fail "$@" || return 1
	after=$(listing)
	test "$before" = "$after" || { echo "left behind: $after"; return 1; }
}

printf 'a,label\n1,0\n2,1\n' >d.csv
dlt-prep csv -q -l label -o d.dlt d.csv
"$BUILD/test/test-bpe" --write-merges later.dlt later
"$BUILD/test/test-bpe" --write-merges range.dlt range
: >empty.txt

test_expect_success 'bad input: an empty text, no text at all' '
	bad 2 "dlt-prep: empty.txt: no text" dlt-prep text -o x.dlt empty.txt &&
	bad 2 "dlt-prep: no text: the 2 files are empty" dlt-prep text -o x.dlt empty.txt empty.txt &&
	bad 2 "dlt-prep: standard input: no text" dlt-prep text -o x.dlt - <empty.txt
'

test_expect_success 'bad input: --vocab out of range, or without bpe' '
	bad 2 "dlt-prep: --vocab: expected 257 to 65536, got '\''256'\''" \
		dlt-prep text --tokenizer bpe --vocab 256 -o x.dlt a.txt &&
	bad 2 "dlt-prep: --vocab: expected 257 to 65536, got '\''65537'\''" \
		dlt-prep text --tokenizer bpe --vocab 65537 -o x.dlt a.txt &&
	bad 2 "dlt-prep: --vocab: expected 257 to 65536, got '\''1e3'\''" \
		dlt-prep text --tokenizer bpe --vocab 1e3 -o x.dlt a.txt &&
	bad 2 "dlt-prep: --vocab needs --tokenizer bpe" dlt-prep text --vocab 300 -o x.dlt a.txt &&
	bad 2 "dlt-prep: --tokenizer bpe needs --vocab N" \
		dlt-prep text --tokenizer bpe -o x.dlt a.txt &&
	bad 2 "dlt-prep: --tokenizer: unknown tokenizer '\''words'\'' (bytes, bpe)" \
		dlt-prep text --tokenizer words -o x.dlt a.txt
'

test_expect_success 'bad input: --tokenizer-from an archive that is not a token archive' '
	bad 2 "dlt-prep: d.dlt: not a token archive (a dataset archive)" \
		dlt-prep text --tokenizer-from d.dlt -o x.dlt a.txt &&
	bad 2 "dlt-prep: a.txt: not a dlt archive (bad magic)" \
		dlt-prep text --tokenizer-from a.txt -o x.dlt a.txt &&
	bad 2 "dlt-prep: --tokenizer-from excludes --tokenizer and --vocab" \
		dlt-prep text --tokenizer-from a.dlt --tokenizer bytes -o x.dlt a.txt
'

test_expect_success 'bad input: damaged merges' '
	bad 2 "dlt-prep: later.dlt: tensor '\''merges'\'': merge 0 refers to token 257, which a later merge makes" \
		dlt-prep text --tokenizer-from later.dlt -o x.dlt a.txt &&
	bad 2 "dlt-prep: range.dlt: tensor '\''merges'\'': merge 1: token -1 is not in the vocabulary" \
		dlt-prep text --tokenizer-from range.dlt -o x.dlt a.txt &&
	bad 2 "dlt-prep: later.dlt: tensor '\''merges'\'': merge 0 refers to token 257" \
		dlt-prep info later.dlt &&
	bad 2 "dlt-prep: range.dlt: tensor '\''merges'\'': merge 1: token -1" \
		dlt-prep text --decode range.dlt
'

test_expect_success 'bad input: a split that leaves a part empty, the rest of the usage' '
	bad 2 "dlt-prep: split 0.01 of 24 tokens leaves one part empty" \
		dlt-prep text --split 0.01 -o x.dlt -o y.dlt a.txt &&
	bad 2 "dlt-prep: text takes FILE... (- for standard input), got no operands" \
		dlt-prep text -o x.dlt &&
	bad 2 "dlt-prep: missing -o OUT" dlt-prep text a.txt &&
	bad 2 "dlt-prep: --shuffle and --seed do not apply to text" \
		dlt-prep text --shuffle -o x.dlt a.txt &&
	bad 2 "dlt-prep: standard input (-) given twice" dlt-prep text -o x.dlt - - <a.txt &&
	bad 2 "dlt-prep: --tokenizer, --vocab, --tokenizer-from and --eot apply to text only" \
		dlt-prep csv --eot -l label -o x.dlt d.csv &&
	bad 2 "dlt-prep: info takes only --json and FILE" dlt-prep info --eot a.dlt &&
	bad 2 "dlt-prep: nosuch.txt" dlt-prep text -o x.dlt nosuch.txt
'

test_done
