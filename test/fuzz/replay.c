/* replay: a main for a fuzz harness (fuzz.h) that feeds it each file
 * named, or each file of each directory named, so that make check runs
 * the corpus of every harness under the normal compiler, no libFuzzer
 * needed.  Prints nothing unless it cannot read an input; a broken
 * promise is the harness's abort or a sanitizer's report. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

static int replay_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	unsigned char *buf = NULL;
	long n;

	if (!f || fseek(f, 0, SEEK_END) < 0 || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) < 0 ||
	    !(buf = malloc(n ? (size_t)n : 1)) || fread(buf, 1, (size_t)n, f) != (size_t)n) {
		perror(path);
		if (f)
			fclose(f);
		free(buf);
		return 1;
	}
	fclose(f);
	LLVMFuzzerTestOneInput(buf, (size_t)n);
	free(buf);
	return 0;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv)
{
	int bad = 0;

	for (int i = 1; i < argc; i++) {
		struct stat st;
		struct dirent *e;
		char **names = NULL;
		size_t n = 0;
		DIR *d;

		if (stat(argv[i], &st) == 0 && !S_ISDIR(st.st_mode)) {
			bad |= replay_file(argv[i]);
			continue;
		}
		if (!(d = opendir(argv[i]))) {
			perror(argv[i]);
			return 1;
		}
		while ((e = readdir(d))) {
			if (e->d_name[0] == '.' || strcmp(e->d_name, "README") == 0)
				continue;
			if (!(names = realloc(names, (n + 1) * sizeof(*names))) ||
			    !(names[n] = malloc(strlen(argv[i]) + strlen(e->d_name) + 2)))
				abort();
			sprintf(names[n++], "%s/%s", argv[i], e->d_name);
		}
		closedir(d);
		qsort(names, n, sizeof(*names), by_name);
		for (size_t k = 0; k < n; k++) {
			bad |= replay_file(names[k]);
			free(names[k]);
		}
		free(names);
	}
	return bad;
}
