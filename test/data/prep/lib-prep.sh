# Helpers of the dlt-prep tests (t1xxx), sourced after test/lib.sh.
PREP=$DATA/prep

# mkidx FILE MAGIC DIM... -- BYTE...: an IDX file, header big-endian, e.g.
#   mkidx labels.idx 0x801 3 -- 1 0 2
mkidx() {
	perl -e '
		my $file = shift;
		my @h;
		while (@ARGV && $ARGV[0] ne "--") { push @h, shift }
		shift;
		open(my $f, ">:raw", $file) or die "$file: $!";
		print $f pack("N*", map { oct } $h[0]), pack("N*", @h[1 .. $#h]),
		    pack("C*", @ARGV);
	' "$@"
}

# jget PATH <JSON: the value at a dotted PATH (array items by index), as
# canonical JSON: jget meta.classes.0 prints "setosa" with its quotes.
jget() {
	perl -MJSON::PP -e '
		my $v = decode_json(do { local $/; <STDIN> });
		for my $k (split /\./, $ARGV[0]) {
			$v = ref $v eq "ARRAY" ? $v->[$k] : $v->{$k};
		}
		print JSON::PP->new->canonical->allow_nonref->encode($v), "\n";
	' "$1"
}

# tensor_bytes ARCHIVE NAME: its raw bytes, by an independent reader.
tensor_bytes() {
	perl "$PREP/tensor.pl" "$1" "$2"
}

# approx GOT WANT: equal to 12 significant digits.
approx() {
	perl -e 'my ($g, $w) = @ARGV;
		 exit !(abs($g - $w) <= 1e-12 * (abs($w) > 1 ? abs($w) : 1))' "$1" "$2" ||
	{ echo "got $1, want $2"; return 1; }
}

# is_empty DIR: nothing in it, not even a hidden temporary file.
is_empty() {
	test -z "$(ls -A "$1")" || { echo "$1 is not empty:"; ls -A "$1"; return 1; }
}
