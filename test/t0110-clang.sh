#!/bin/sh
# The library and the fuzz harnesses compile with clang, make fuzz's
# compiler: it takes no GCC target pragma and knows other cpu names, and
# make fuzz once stopped at kernels/cpu that way, unseen, for days.  At -O0
# and no sanitizers: the compile alone, a few seconds.
. "$(dirname "$0")/lib.sh"

harnesses=$(cd "$ROOT/test/fuzz" && ls *.c | grep -v '^replay\.c$' | sed "s|^|$TRASH/build/test/fuzz/|; s|\.c\$|.o|")

test_expect_success 'the library and the fuzz harnesses compile with clang' '
	make -C "$ROOT" -j2 --no-print-directory BUILD="$TRASH/build" BIN="$TRASH/bin" CUDA=0 \
		CC=clang WERROR= CFLAGS=-O0 "$TRASH/build/libdlt.a" $harnesses >log 2>&1 ||
		{ grep -m 20 error: log; false; } &&
	test -s "$TRASH/build/libdlt.a" &&
	test -s "$TRASH/build/test/fuzz/archive.o"
'

test_done
