#!/usr/bin/perl
# tensor.pl ARCHIVE NAME: writes the raw bytes of one tensor of a .dlt
# archive to stdout.  It reads the layout that lib/archive/archive.h
# documents without libdlt, so the tests compare what dlt-prep stored with
# what they fed it through a reader that shares no code with the writer.
use strict;
use warnings;

my ($file, $want) = @ARGV;
open(my $fh, '<:raw', $file) or die "$file: $!\n";
my $d = do { local $/; <$fh> };
# trailer: u64 index offset, ...; index: "INDX", u32 0, u64 count, offsets
my $ix = unpack('Q<', substr($d, length($d) - 32, 8));
my $count = unpack('Q<', substr($d, $ix + 8, 8));
for my $i (0 .. $count - 1) {
	my $off = unpack('Q<', substr($d, $ix + 16 + 8 * $i, 8));
	my ($tag, $hsize, $dtype, $codec, $ndim, $zero, $nlen, $stored) =
	    unpack('a4 L< C C C C L< Q<', substr($d, $off, 24));
	next if $tag ne 'TENS' || substr($d, $off + 40 + 8 * $ndim, $nlen) ne $want;
	my $bytes = substr($d, $off + $hsize, $stored);
	binmode STDOUT;
	if ($codec == 0) {
		print $bytes;
	} elsif ($codec == 1) {
		open(my $z, '|-', 'zstd', '-dcq') or die "zstd: $!\n";
		binmode $z;
		print $z $bytes;
		close $z or die "zstd failed\n";
	} else {
		die "$file: tensor $want: codec $codec\n";
	}
	exit 0;
}
die "$file: no tensor $want\n";
