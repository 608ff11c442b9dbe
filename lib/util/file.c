#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"

int dlt_fsync_dir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY);
	if (fd < 0)
		return dlt_error_errno(DLT_EIO, "%s", dir);
	/* some file systems cannot fsync a directory (EINVAL): nothing to do */
	if (fsync(fd) < 0 && errno != EINVAL) {
		close(fd);
		return dlt_error_errno(DLT_EIO, "%s: fsync", dir);
	}
	close(fd);
	return 0;
}

int dlt_pwrite_all(int fd, const void *p, size_t n, uint64_t off)
{
	const char *c = p;
	while (n > 0) {
		ssize_t w = pwrite(fd, c, n, (off_t)off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			if (w == 0)
				errno = EIO;
			return -1;
		}
		c += w;
		n -= (size_t)w;
		off += (uint64_t)w;
	}
	return 0;
}

/* The directory part of path ("." when it has none), in a new string. */
static char *dir_of(const char *path)
{
	const char *slash = strrchr(path, '/');
	char *d;
	if (!slash)
		return dlt_strdup(".");
	if (slash == path)
		return dlt_strdup("/");
	if (!(d = dlt_malloc(slash - path + 1)))
		return NULL;
	memcpy(d, path, slash - path);
	d[slash - path] = 0;
	return d;
}

static void ofile_clear(dlt_ofile *f)
{
	free(f->tmp);
	free(f->path);
	memset(f, 0, sizeof(*f));
}

/* The status of a failure to create a file or directory, from errno: a
 * path that cannot take one (no such directory, not a directory, no
 * permission, a read-only file system) is bad usage, as the user named
 * it; anything else (a full disk, EIO) is the job failing. */
static int unwritable(void)
{
	return errno == ENOENT || errno == ENOTDIR || errno == EACCES || errno == EPERM ||
		errno == EROFS ? DLT_EINPUT : DLT_EIO;
}

int dlt_ofile_open(dlt_ofile *f, const char *path)
{
	const char *slash = strrchr(path, '/');
	size_t dirlen = slash ? (size_t)(slash - path + 1) : 0;
	struct stat st;
	mode_t mask;
	int fd;

	memset(f, 0, sizeof(*f));
	if (strcmp(path, "-") == 0) {
		f->fp = stdout;
		return 0;
	}
	if (!*path || path[strlen(path) - 1] == '/')
		return dlt_error(DLT_EINPUT, "'%s': not a file name", path);
	/* a device or a pipe (-o /dev/null, a FIFO) is written as it is: a
	 * file renamed over it would replace the device itself */
	if (stat(path, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
		if (!(f->path = dlt_strdup(path)))
			return DLT_ENOMEM;
		if (!(f->fp = fopen(path, "wb"))) {
			int rc = dlt_error_errno(DLT_EIO, "%s", path);
			ofile_clear(f);
			return rc;
		}
		return 0;
	}
	f->path = dlt_strdup(path);
	f->tmp = dlt_malloc(strlen(path) + 16);
	if (!f->path || !f->tmp) {
		ofile_clear(f);
		return DLT_ENOMEM;
	}
	/* a dot file beside the target, so that the rename stays in one file system */
	sprintf(f->tmp, "%.*s.%s.XXXXXX", (int)dirlen, path, path + dirlen);
	if ((fd = mkstemp(f->tmp)) < 0) {
		int rc = dlt_error_errno(unwritable(), "%s", path);
		ofile_clear(f);
		return rc;
	}
	/* mkstemp makes 0600; give the file the mode open(2) would have */
	mask = umask(0);
	umask(mask);
	fchmod(fd, 0666 & ~mask);
	if (!(f->fp = fdopen(fd, "wb"))) {
		int rc = dlt_error_errno(DLT_EIO, "%s", path);
		close(fd);
		unlink(f->tmp);
		ofile_clear(f);
		return rc;
	}
	return 0;
}

int dlt_ofile_commit(dlt_ofile *f)
{
	char *dir;
	int rc;

	if (!f->path) {		/* stdout */
		if (fflush(f->fp) != 0)
			return dlt_error_errno(DLT_EIO, "standard output");
		memset(f, 0, sizeof(*f));
		return 0;
	}
	if (!f->tmp) {		/* a device or a pipe */
		rc = fclose(f->fp) != 0 ? dlt_error_errno(DLT_EIO, "%s", f->path) : 0;
		ofile_clear(f);
		return rc;
	}
	if (fflush(f->fp) != 0 || fsync(fileno(f->fp)) != 0) {
		rc = dlt_error_errno(DLT_EIO, "%s", f->path);
		dlt_ofile_abort(f);
		return rc;
	}
	if (fclose(f->fp) != 0) {
		f->fp = NULL;
		rc = dlt_error_errno(DLT_EIO, "%s", f->path);
		dlt_ofile_abort(f);
		return rc;
	}
	f->fp = NULL;
	if (rename(f->tmp, f->path) != 0) {
		rc = dlt_error_errno(DLT_EIO, "%s", f->path);
		dlt_ofile_abort(f);
		return rc;
	}
	if (!(dir = dir_of(f->path))) {
		ofile_clear(f);
		return DLT_ENOMEM;
	}
	rc = dlt_fsync_dir(dir);
	free(dir);
	ofile_clear(f);
	return rc;
}

void dlt_ofile_abort(dlt_ofile *f)
{
	if (f->path) {
		if (f->fp)
			fclose(f->fp);
		if (f->tmp)
			unlink(f->tmp);
	}
	ofile_clear(f);
}

int dlt_write_file_atomic(const char *path, const void *p, size_t n)
{
	dlt_ofile f;
	int rc = dlt_ofile_open(&f, path);
	if (rc < 0)
		return rc;
	if (n && fwrite(p, 1, n, f.fp) != n) {
		rc = dlt_error_errno(DLT_EIO, "%s", path);
		dlt_ofile_abort(&f);
		return rc;
	}
	return dlt_ofile_commit(&f);
}

/* What a stream may bring into memory: max, or with max 0 half the
 * machine's memory, so that /dev/zero or an endless pipe is an error and
 * not the kernel's OOM killer. */
static size_t stream_max(size_t max)
{
	double half = dlt_mem_total() / 2;
	return max ? max : half >= 1 && half < (double)SIZE_MAX ? (size_t)half : SIZE_MAX;
}

int dlt_read_file(const char *path, size_t max, char **data, size_t *len)
{
	int is_stdin = strcmp(path, "-") == 0;
	FILE *fp = is_stdin ? stdin : fopen(path, "rb");
	dlt_buf b = { 0 };
	char chunk[65536];
	size_t n;
	int rc = 0;

	if (!fp)
		return dlt_error_errno(errno == ENOENT || errno == EACCES || errno == ENOTDIR ||
				       errno == EISDIR ? DLT_EINPUT : DLT_EIO, "%s", path);
	max = stream_max(max);
	while ((n = fread(chunk, 1, sizeof(chunk), fp)) > 0) {
		if (b.len + n > max) {
			rc = dlt_error(DLT_EINPUT, "%s: larger than %zu bytes",
				       is_stdin ? "standard input" : path, max);
			break;
		}
		if ((rc = dlt_buf_append(&b, chunk, n)) < 0)
			break;
	}
	if (rc == 0 && ferror(fp))
		rc = dlt_error_errno(errno == EISDIR ? DLT_EINPUT : DLT_EIO, "%s",
				     is_stdin ? "standard input" : path);
	if (!is_stdin)
		fclose(fp);
	if (rc < 0) {
		dlt_buf_free(&b);
		return rc;
	}
	if (!b.data && dlt_buf_append(&b, "", 0) < 0)
		return DLT_ENOMEM;
	*data = b.data;
	*len = b.len;
	return 0;
}

int dlt_mkdir_p(const char *path)
{
	char *p = dlt_strdup(path);
	int rc = 0;
	if (!p)
		return DLT_ENOMEM;
	for (char *s = p + 1;; s++) {
		if (*s == '/' || *s == 0) {
			char c = *s;
			*s = 0;
			if (mkdir(p, 0777) != 0 && errno != EEXIST) {
				rc = dlt_error_errno(unwritable(), "%s", p);
				break;
			}
			*s = c;
			if (!c)
				break;
		}
	}
	if (rc == 0) {
		struct stat st;
		if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode))
			rc = dlt_error(DLT_EINPUT, "%s: not a directory", path);
	}
	free(p);
	return rc;
}

/* A pipe or a device cannot be mapped: its bytes are read from the
 * descriptor already open, as reopening a fifo would lose its writer. */
static int read_fd(int fd, const char *path, char **mem, size_t *size)
{
	dlt_buf b = { 0 };
	char chunk[65536];
	size_t max = stream_max(0);
	ssize_t n;
	int rc = 0;

	while (rc == 0 && (n = read(fd, chunk, sizeof(chunk))) != 0) {
		if (n > 0 && b.len + (size_t)n > max)
			rc = dlt_error(DLT_EINPUT, "%s: larger than %zu bytes", path, max);
		else if (n > 0)
			rc = dlt_buf_append(&b, chunk, n);
		else if (errno != EINTR)
			rc = dlt_error_errno(errno == EISDIR ? DLT_EINPUT : DLT_EIO, "%s", path);
	}
	if (rc == 0 && !b.data)
		rc = dlt_buf_append(&b, "", 0);
	if (rc < 0) {
		dlt_buf_free(&b);
		return rc;
	}
	*mem = b.data;
	*size = b.len;
	return 0;
}

int dlt_file_bytes(const char *path, void **map, char **mem, size_t *size)
{
	struct stat st;
	int fd, rc;

	*map = NULL;
	*mem = NULL;
	if (strcmp(path, "-") == 0)
		return dlt_read_file("-", 0, mem, size);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return dlt_error_errno(errno == ENOENT || errno == EACCES || errno == ENOTDIR ?
				       DLT_EINPUT : DLT_EIO, "%s", path);
	if (fstat(fd, &st) != 0) {
		rc = dlt_error_errno(DLT_EIO, "%s", path);
		close(fd);
		return rc;
	}
	/* files of /proc say they are empty and are not */
	if (!S_ISREG(st.st_mode) || st.st_size == 0) {
		rc = read_fd(fd, path, mem, size);
		close(fd);
		return rc;
	}
	*map = mmap(NULL, st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	rc = *map == MAP_FAILED ? dlt_error_errno(DLT_EIO, "%s: mmap", path) : 0;
	close(fd);
	if (rc < 0) {
		*map = NULL;
		return rc;
	}
	*size = st.st_size;
	return 0;
}
