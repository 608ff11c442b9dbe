#!/bin/sh
# Every program's -h prints the synopsis of its man page (as git's t0450),
# and every man page renders cleanly.
. "$(dirname "$0")/lib.sh"

# The SYNOPSIS lines of a man page, roff escapes removed.
man_synopsis() {
	sed -n '/^\.SH SYNOPSIS/,/^\.SH/p' "$1" | grep -v '^\.' |
		sed -e 's/\\f[BIRP]//g' -e 's/\\-/-/g'
}

# The usage lines of -h: up to the first blank line, "usage: " removed.
help_synopsis() {
	"$1" -h | sed -n '/^$/q;p' | sed -e 's/^usage: //' -e 's/^ *//'
}

for page in "$ROOT"/man/dlt-*.1; do
	prog=$(basename "$page" .1)
	test_expect_success "$prog -h matches the SYNOPSIS of $prog(1)" "
		man_synopsis '$page' >man.txt &&
		help_synopsis '$BIN/$prog' >help.txt &&
		test -s man.txt &&
		test_cmp man.txt help.txt
	"
	test_expect_success "$prog --version" "
		'$BIN/$prog' --version | grep -q '^$prog [0-9]'
	"
done
for page in "$ROOT"/man/*.[17]; do
	test_expect_success "$(basename "$page") renders without groff warnings" "
		groff -ww -z -man '$page' 2>warn.txt &&
		test ! -s warn.txt
	"
done
for src in "$ROOT"/cmd/dlt-*.c; do
	prog=$(basename "$src" .c)
	test_expect_success "$prog has a man page" "test -f '$ROOT/man/$prog.1'"
	test_expect_success "dlt(7) lists $prog" "grep -q '$prog' '$ROOT/man/dlt.7'"
done
test_done
