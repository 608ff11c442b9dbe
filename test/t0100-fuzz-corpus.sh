#!/bin/sh
# The corpus of every fuzz harness (test/fuzz/NAME/, see test/fuzz/fuzz.h)
# replayed through it: the inputs that once crashed a reader, and the
# seeds, must still get an error or a result, nothing worse.  Under make
# check-asan this runs with the sanitizers.
. "$(dirname "$0")/lib.sh"

for dir in "$TEST_DIR"/fuzz/*/; do
	name=$(basename "$dir")
	test_expect_success "fuzz corpus of $name replays ($(ls "$dir" | wc -l) inputs)" '
		"$BUILD/test/fuzz-$name" "$dir"
	'
done

test_done
